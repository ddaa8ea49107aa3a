"""A ``vllm serve MODEL [flags...]`` command line -> the deployment it amounts to, plus
notes (:func:`parse_serve_command`).

Pure: no I/O except reading the model's ``config.json`` (a shipped preset or a
local directory, through :mod:`selector.models`); never prints or exits.  Bad
values raise :class:`InputError` naming the flag.  Flags that do not change
attention-backend selection are passed over with a note; knobs that the engine
ignores (``VLLM_ATTENTION_BACKEND``...) produce warnings that show the flag to use
instead; flags it removed and unknown keys inside ``--compilation-config`` are errors
(vLLM refuses the command line).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from selector.catalog import Catalog
from selector.errors import InputError
from selector.inputs.serve.command import ServeCommand, ServeNote
from selector.inputs.serve.environment import read_environment
from selector.inputs.serve.flag_notes import flag_notes
from selector.inputs.serve.flag_settings import build_settings
from selector.inputs.serve.flags import ServeFlags, release_flags, serve_flags
from selector.inputs.serve.presets import is_shipped_preset, load_model_config
from selector.inputs.serve.settings import Settings
from selector.inputs.serve.tokenize import tokenize
from selector.inputs.serve.values import SOURCE, bad_value, deep_merge
from selector.inputs.serve.wrappers import container_image, image_release
from selector.models import ModelFacts, parse_config
from selector.schema.request import (
    AttentionConfig,
    Deployment,
    DeviceRef,
    KVConnector,
    Parallel,
    Speculative,
)

__all__ = ["parse_serve_command"]


def _without_sliding_window(model: ModelFacts) -> ModelFacts:
    layers = tuple(layer.model_copy(update={"sliding_window": None}) for layer in model.layers)
    return model.model_copy(update={"layers": layers})


def _deployment(model: ModelFacts, model_ref: str, s: Settings, engine: str | None,
                device: str | DeviceRef) -> Deployment:
    dtype = s.dtype if s.dtype != "auto" else model.runtime_dtype
    try:
        return Deployment(
            engine=engine, model=model_ref, device=device, dtype=dtype,
            kv_cache_dtype=s.kv_cache_dtype, block_size=s.block_size,
            attention_backend=s.attention_backend, cudagraph_mode=s.cudagraph_mode,
            max_model_len="auto" if s.max_model_len == -1 else s.max_model_len or None,
            cpu_offload_gb=s.cpu_offload_gb,
            gpu_memory_utilization=s.gpu_memory_utilization,
            kv_cache_memory_bytes=s.kv_cache_memory_bytes,
            max_num_batched_tokens=s.kv_options.get("max_num_batched_tokens"),
            max_num_seqs=s.max_num_seqs,
            moe_backend=s.moe_backend,
            quantization=s.quantization,
            enable_prefix_caching=s.enable_prefix_caching,
            attention_config=AttentionConfig(
                backend_per_kind=dict(s.backend_per_kind),
                flash_attn_version=s.flash_attn_version,
                use_trtllm_attention=s.use_trtllm_attention,
                use_non_causal=s.use_non_causal),
            parallel=Parallel(tensor_parallel_size=s.tp, decode_context_parallel_size=s.dcp,
                              pipeline_parallel_size=s.pipeline_parallel_size,
                              prefill_context_parallel_size=s.pcp,
                              cp_kv_cache_interleave_size=s.cp_interleave),
            speculative=Speculative(num_speculative_tokens=s.num_speculative_tokens,
                                    **s.speculative),
            batch_invariant=s.batch_invariant,
            kv_connector=KVConnector(name=s.kv_connector) if s.kv_connector else None,
            environment=dict(s.environment),
            **s.multimodal,
        )
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise InputError(f"the command line does not make a valid deployment: {exc}",
                         file=SOURCE) from None


def _summary(s: Settings) -> dict[str, Any]:
    return {
        "attention_backend": s.attention_backend,
        "attention_config": {"backend_per_kind": s.backend_per_kind or None,
                             "flash_attn_version": s.flash_attn_version,
                             "use_trtllm_attention": s.use_trtllm_attention,
                             "use_non_causal": s.use_non_causal},
        "block_size": s.block_size,
        "kv_cache_dtype": s.kv_cache_dtype,
        "dtype": s.dtype,
        "tensor_parallel_size": s.tp,
        "decode_context_parallel_size": s.dcp,
        "prefill_context_parallel_size": s.pcp,
        "num_speculative_tokens": s.num_speculative_tokens,
        "cudagraph_mode": s.cudagraph_mode,
        "kv_connector": s.kv_connector,
        "enable_prefix_caching": s.enable_prefix_caching,
        "max_model_len": s.max_model_len,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "hf_overrides": s.hf_overrides or None,
        "batch_invariant": s.batch_invariant,
        "pipeline_parallel_size": s.pipeline_parallel_size,
        "data_parallel_size": s.data_parallel_size,
        "enable_expert_parallel": s.enable_expert_parallel,
    }


def _elsewhere(catalog: Catalog, table: ServeFlags) -> frozenset[str]:
    """Flags of other releases and the flags vLLM removed: read with their own notes
    (SU007, SU004) rather than refused as unknown."""
    flags: set[str] = {flag for flag, spec in table.flags.items() if spec.removed}
    for each in release_flags(catalog).values():
        flags |= each
    return frozenset(flags)


def _image_engine(argv: Sequence[str], catalog: Catalog,
                  engine: str | None) -> tuple[str | None, ServeNote | None]:
    """The engine a container line's vLLM image tag names (``vllm/vllm-openai:v0.30.0``:
    that release's profile, unless ``--engine`` names one), with a note saying which
    profile is checked."""
    image = container_image(argv)
    release = image_release(image) if image else None
    if image is None or release is None:
        return engine, None
    name = f"vllm=={release}"
    if engine is not None:
        chosen = catalog.release(engine)
        if chosen == name:
            return engine, None
        return engine, ServeNote("warning", "AS152", "IMAGE",
                                 f"the image {image} runs vLLM {release}; checked against "
                                 f"{chosen} (--engine)")
    if name in catalog.engine_dirs:
        return name, ServeNote("info", "AS152", "IMAGE",
                               f"the image {image} runs vLLM {release}: checked against its "
                               "profile")
    default = catalog.release(None)
    profiled = catalog.engine_names
    return None, ServeNote(
        "warning", "AS152", "IMAGE",
        f"the image {image} runs vLLM {release}, which attn-select has no profile of: "
        f"checked against {default}",
        hint=f"profiled releases: {profiled[0].split('==')[1]}..{profiled[-1].split('==')[1]}; "
             "use one of their images, or pass --engine")


def _platform_of(device: str | DeviceRef, catalog: Catalog) -> str:
    """The platform of the command's device (the default platform for a device the
    catalog does not know: the target reports that one, located)."""
    if isinstance(device, DeviceRef):
        return device.platform or catalog.default_platform
    try:
        return catalog.device(device).platform
    except InputError:
        return catalog.default_platform


def parse_serve_command(argv: Sequence[str], *, device: str | DeviceRef, catalog: Catalog,
                        engine: str | None = None, model: str | None = None,
                        environ: Mapping[str, str] | None = None) -> ServeCommand:
    """Parse a ``vllm serve`` command line (as typed after ``attn-select check --``).

    ``model`` overrides MODEL (a preset name or a directory with config.json) for a
    command whose MODEL is a path on another machine; ``environ`` adds process
    variables (only ``VLLM_*`` ones are read).
    """
    engine, image_note = _image_engine(argv, catalog, engine)
    engine_data = catalog.engine(engine, _platform_of(device, catalog))
    table = serve_flags(catalog, engine_data)
    raw = tokenize(argv, table, _elsewhere(catalog, table))
    if raw.model is None and model is None:
        raise bad_value("MODEL", "no MODEL in the command line",
                   hint="write vllm serve MODEL [flags], or pass attn-select check --model PRESET")
    env = {k: v for k, v in (environ or {}).items() if k.startswith("VLLM_")}
    env.update(raw.env)
    notes: list[ServeNote] = list(raw.notes)
    if image_note is not None:
        notes.append(image_note)
    flag_notes(raw, notes, catalog, table,
                str(engine_data.version) if engine_data.family == "vllm" else "")
    settings = build_settings(raw, catalog, engine_data, notes, table)
    read_environment(env, settings, notes, catalog, engine_data, table,
                     _platform_of(device, catalog))
    data, file, name, how = load_model_config(raw.model or "", model)
    notes.append(ServeNote("info", "AS105", "--model" if model else "MODEL", how))
    if settings.hf_overrides:
        data = deep_merge(data, settings.hf_overrides)
        notes.append(ServeNote("info", "AS107", "--hf-overrides",
                               "applied to the model's config: "
                               + ", ".join(sorted(settings.hf_overrides))))
    facts = parse_config(data, file=file, name=name)
    if settings.disable_sliding_window:
        if any(layer.sliding_window for layer in facts.layers):
            notes.append(ServeNote("info", "AS107", "--disable-sliding-window",
                                   "--disable-sliding-window: sliding-window layers are checked "
                                   "as full attention"))
        facts = _without_sliding_window(facts)
    if any(layer.attention_chunk_size for layer in facts.layers):
        notes.append(ServeNote("info", "AS104", "model",
                               "chunked local-attention layers are checked as full attention"))
    model_ref = name if is_shipped_preset(file) else file
    deployment = _deployment(facts, model_ref, settings, engine, device)
    rank = {"error": 0, "warning": 1, "info": 2}
    ordered = sorted(notes, key=lambda n: (rank[n.level], notes.index(n)))
    return ServeCommand(
        argv=tuple(argv), model=raw.model or (model or ""), model_source=facts.name,
        environment=env, settings=_summary(settings), deployment=deployment, model_facts=facts,
        notes=tuple(ordered), kv_options=dict(settings.kv_options),
        dtype_auto=settings.dtype == "auto",
    )
