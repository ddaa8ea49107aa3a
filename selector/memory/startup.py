"""Will vLLM start? The memory budget, the KV fit and the other start-up checks of one
model deployment, each refusal with vLLM's own text (codes from
``schemas/reason-codes.yaml``, facts from ``schemas/engines/<engine>/startup.yaml``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from selector.catalog import Catalog
from selector.errors import InputError
from selector.kv.capacity import Capacity, group_pages_per_request
from selector.kv.plan_types import ModelPlan
from selector.memory.budget import MemoryBudget, MemoryLine, memory_budget, offloaded_weight_bytes
from selector.memory.dcp import DCP_MODEL_CHECKS, DCP_PARALLEL_CHECKS
from selector.memory.fit import KVFit, format_gib, kv_fit
from selector.memory.issues import (
    StartupIssue,
    dcp_issue,
    dtype_issue,
    kv_heads_issue,
    startup_issue,
)
from selector.memory.profile import StartupProfile
from selector.memory.weights import WeightPart, config_int, estimate_weights, text_config
from selector.models import ModelFacts
from selector.models.loader import with_quantization_sidecar
from selector.models.presets import preset_dir

__all__ = [
    "MemoryReport",
    "StartupIssue",
    "auto_fit_length",
    "auto_fit_log",
    "auto_fit_tokens",
    "captured_graph_count",
    "derived_max_model_len",
    "device_total_memory",
    "dtype_bytes",
    "dtype_issue",
    "max_model_len_issue",
    "memory_report",
    "plan_budget",
    "raw_config",
    "tensor_parallel_issue",
]

_GIB = 1024**3
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


class MemoryReport(BaseModel):
    """The memory section of a report: the budget, what the KV cache holds, vLLM's log."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: MemoryBudget
    fit: KVFit | None = None
    capacity: Capacity | None = None
    log: tuple[str, ...] = ()
    """vLLM's own start-up log lines for these figures."""
    issue: StartupIssue | None = None
    pp_stage: str | None = None
    """With pipeline parallelism: the stage these figures are of (the one vLLM refuses
    first, else the one with the fewest KV blocks, which sizes every stage's pool)."""
    not_checked: str | None = None
    """Why vLLM's fit check was not made (weights the estimate cannot count)."""
    no_kv_cache: str | None = None
    """Why the model has no KV cache at all (vLLM sizes none: no profile, the null block)."""


def raw_config(model: ModelFacts) -> Mapping[str, Any]:
    """The config.json the facts were read from (a preset or a local file), as parsed
    with ``--hf-overrides`` applied (read from the file only for facts built without it)."""
    if model.config is not None:
        return model.config
    path = Path(model.source)
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the model config: {exc}", file=str(path),
                         field="model") from None
    data = with_quantization_sidecar(data, path)
    return data if isinstance(data, dict) else {}


@lru_cache(maxsize=1)
def _device_memory_table() -> dict[str, tuple[float, str]]:
    path = preset_dir().parent / "device-memory.yaml"
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(name): (float(row["total_gib"]), str(row["source"]))
            for name, row in (data.get("devices") or {}).items()}


def device_total_memory(name: str, nominal_gib: float | None,
                        runtime: str = "CUDA") -> tuple[int, str] | None:
    """(bytes the GPU runtime reports as total, where the figure comes from) or None if
    unknown. ``runtime``: the device platform's (``schemas/platforms.yaml``: CUDA, HIP)."""
    table = _device_memory_table()
    if name in table:
        gib, source = table[name]
        return int(gib * _GIB), f"{gib:g} GiB as {runtime} reports it ({source})"
    if nominal_gib:
        return int(nominal_gib * _GIB), (f"{nominal_gib:g} GiB, the catalog's nominal figure "
                                         f"({runtime} reports a little less)")
    return None


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a model dtype (``--dtype``; 2 unless float32)."""
    return _DTYPE_BYTES.get(dtype, 2)


def captured_graph_count(mode: str | None, capture_sizes: tuple[int, ...],
                         max_num_seqs: int) -> int:
    """The CUDA graphs vLLM captures: a PIECEWISE graph per capture size, a FULL one per
    uniform-decode size (at most ``max_num_seqs`` tokens) or per size (``FULL``); the
    capture's own log counts them ("Capturing CUDA graphs (PIECEWISE): n/n")."""
    piecewise = len(capture_sizes) if mode in ("FULL_AND_PIECEWISE", "PIECEWISE") else 0
    if mode == "FULL":
        return len(capture_sizes)
    decode = sum(1 for size in capture_sizes if size <= max_num_seqs) \
        if mode in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY") else 0
    return piecewise + decode


def plan_budget(model: ModelFacts, profile: StartupProfile, *, device: str, cc: int,
                total: tuple[int, str] | None, dtype: str, cudagraphs: bool,
                gpu_memory_utilization: float, utilization_default: bool,
                max_num_batched_tokens: int, max_num_seqs: int, kv_cache_memory_bytes: int | None,
                reserved_bytes: int | None, moe_backend: str | None = None,
                quantization: str | None = None, cpu_offload_gib: float = 0.0,
                stage: tuple[int, int] | None = None, max_model_len: int | None = None,
                block_size: int | None = None,
                captured_graphs: int = 0,
                encoder_profile: MemoryLine | None = None,
                extra_weights: tuple[WeightPart, ...] = (),
                model_runner: str | None = None,
                pooling: bool = False) -> MemoryBudget | None:
    """The budget of one GPU of a model deployment (``model`` sharded with ``shard_model``;
    ``total``: the GPU's total memory and its source, :func:`device_total_memory`; the
    batch limits and memory fraction resolved once for the whole report; ``stage``: the
    layers of one pipeline stage; ``captured_graphs``: the CUDA graphs vLLM captures,
    :func:`captured_graph_count`). The speculative draft's layers (``LayerFacts.draft``)
    are not the model's decoder layers: their weights come in ``extra_weights``
    (selector/memory/speculative.py, ``draft_weight_part``). ``model_runner``: the GPU
    model runner vLLM starts (``v1`` / ``v2``, :mod:`selector.memory.runner`); ``pooling``:
    the pooling runner (its profile run pools, no dummy sampler run: ``memory_budget``)."""
    if total is None:
        return None
    raw = raw_config(model)
    runner = model_runner.upper() if model_runner else None
    dtype_bytes = _DTYPE_BYTES.get(dtype, 2)
    if any(layer.draft for layer in model.layers):
        model = model.model_copy(update={
            "layers": tuple(layer for layer in model.layers if not layer.draft)})
    weights = estimate_weights(raw, layer_kinds=tuple(layer.kind for layer in model.layers),
                               tp=model.tp_size, dtype_bytes=dtype_bytes, cc=cc, profile=profile,
                               moe_backend=moe_backend, quantization=quantization, stage=stage,
                               model=model)
    if extra_weights:
        weights = weights.model_copy(update={"parts": (*weights.parts, *extra_weights)})
    return memory_budget(raw, weights, profile, device=device, total_memory_bytes=total[0],
                         total_memory_source=total[1],
                         gpu_memory_utilization=gpu_memory_utilization,
                         utilization_default=utilization_default,
                         num_layers=stage[1] - stage[0] if stage else len(model.layers),
                         dtype_bytes=dtype_bytes,
                         cudagraphs=cudagraphs, max_num_batched_tokens=max_num_batched_tokens,
                         max_num_seqs=max_num_seqs, kv_cache_memory_bytes=kv_cache_memory_bytes,
                         reserved_bytes=reserved_bytes,
                         cpu_offload_bytes=int(cpu_offload_gib * _GIB),
                         max_model_len=max_model_len, block_size=block_size,
                         model_runner=runner, captured_graphs=captured_graphs,
                         encoder_profile=encoder_profile, include_sampler=not pooling)


def auto_fit_length(budget: MemoryBudget, plan: ModelPlan | None, profile: StartupProfile, *,
                    in_flight_tokens: int) -> int | None:
    """``--max-model-len auto``: the largest length whose KV cache fits the memory vLLM's
    fit check uses (its ``_auto_fit_max_model_len``: the derived length when it fits, else
    the binary search of ``estimate_max_model_len``); 0 when not one token fits; None when
    the plan has no KV cache (an attention-free model keeps the derived length)."""
    if plan is None or plan.capacity is None or not plan.entries:
        return None
    cap = plan.capacity
    check = budget.available_kv_bytes - (cap.bytes_per_block if profile.memory.reserve_null_block
                                         else 0)
    return auto_fit_tokens(plan, check, cap.max_model_len, in_flight_tokens)


def auto_fit_tokens(plan: ModelPlan, check_bytes: int, original: int, in_flight_tokens: int) -> int:
    """vLLM's ``_estimate_max_model_len_from_groups``: the largest length in 1..original
    whose blocks (every group's blocks for one request, times the pool's bytes per block:
    ``_max_memory_usage_bytes_from_groups``, vllm/v1/core/kv_cache_planning.py:1253-1335 in
    0.33.0) fit ``check_bytes``; 0 when not one token does. By groups, so a hybrid
    model's padded groups count, which the fit check's per-layer sum does not."""
    cap = plan.capacity
    if cap is None:
        return 0
    groups = [(group.spec, group.layer_specs) for group in plan.groups]

    def fits(length: int) -> bool:
        pages = sum(group_pages_per_request(spec, layers, length, in_flight_tokens)
                    for spec, layers in groups)
        return cap.bytes_per_block * pages <= check_bytes

    if not fits(1):
        return 0
    left, right, best = 1, original, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            best, left = mid, mid + 1
        else:
            right = mid - 1
    return best


def auto_fit_log(profile: StartupProfile, *, original: int, fitted: int,
                 check_bytes: int) -> str:
    """vLLM's auto-fit log line: the whole derived length fits, or it was shortened."""
    auto = profile.auto_fit()
    if auto is None:
        return ""
    words = auto.full if fitted >= original else auto.reduced
    return words.format(original=original, fitted=fitted, gib=format_gib(check_bytes))


def _without_kv_cache(budget: MemoryBudget, plan: ModelPlan | None,
                      profile: StartupProfile) -> MemoryReport | None:
    """vLLM's start-up for a plan none of whose layers has a KV-cache spec (its cache-less
    and encoder-only layers only): no memory profile, no KV memory, a pool of the null
    block (``no_kv_cache`` of the release's start-up data); None for any other plan."""
    rule = profile.memory.no_kv_cache
    if rule is None or plan is None or not plan.ok or plan.capacity is None:
        return None
    if any(entry.spec.kind != "encoder_only_attention" for entry in plan.entries):
        return None
    cap = plan.capacity.model_copy(update={
        "available_bytes": 0, "num_blocks": rule.num_blocks, "max_concurrency": None,
        "kv_cache_tokens": None})
    return MemoryReport(budget=budget.model_copy(update={"available_kv_bytes": 0}),
                        capacity=cap, no_kv_cache=(
        "no layer has a KV-cache spec: vLLM profiles no memory for the KV cache and its "
        f"block pool holds {rule.num_blocks} block ({rule.source})"))


def memory_report(budget: MemoryBudget, plan: ModelPlan | None, profile: StartupProfile,
                  catalog: Catalog, *, in_flight_tokens: int,
                  auto_fit_from: int | None = None, platform: str | None = None) -> MemoryReport:
    """The budget, vLLM's fit check on the plan, and the capacity vLLM logs.
    ``auto_fit_from``: ``--max-model-len auto``'s derived length (the plan is then
    planned at the length auto-fit chose: :func:`auto_fit_length`); ``platform``: the
    device's (default: the catalog's first), whose torch words an out-of-memory refusal
    uses (``schemas/platforms.yaml``: ``out_of_memory``)."""
    weights = budget.weights.bytes_per_gpu - offloaded_weight_bytes(
        budget.weights, budget.inputs.cpu_offload_bytes)
    cacheless = _without_kv_cache(budget, plan, profile)
    if budget.weights.unknown and cacheless is None:
        return MemoryReport(budget=budget, not_checked=(
            f"the weights of {', '.join(budget.weights.unknown)} are not counted, so the "
            "memory left for the KV cache is unknown"))
    if weights > budget.inputs.total_memory_bytes and budget.inputs.reserved_bytes is None:
        issue = startup_issue(catalog, profile.memory.oom_code, ("parallel", "tensor_parallel_size"),
                       weights_gib=format_gib(weights),
                       total_gib=format_gib(budget.inputs.total_memory_bytes),
                       out_of_memory=catalog.platform(
                           platform or catalog.default_platform).out_of_memory)
        return MemoryReport(budget=budget, issue=issue)
    if cacheless is not None:
        return cacheless
    log = [profile.memory.log["available"].format(gib=format_gib(budget.available_kv_bytes))]
    if plan is not None and plan.capacity is None and plan.entries and plan.ok:
        # a model whose layers choose their own backend (kv/model_driven/), or whose
        # block-outermost layout packs its groups (kv/packed.py): vLLM's pool of the packed
        # groups is not modelled, so neither is the fit
        kind = ("a model-driven backend's KV-cache groups" if plan.grouping_path != "packed"
                else "the block-outermost layout's packed KV-cache groups")
        return MemoryReport(budget=budget, log=tuple(log), not_checked=(
            "the KV cache's fit and capacity are not checked: vLLM's block pool of "
            f"{kind} ({plan.grouping_path}) is not modelled"))
    if plan is None or plan.capacity is None or not plan.entries:
        return MemoryReport(budget=budget, log=tuple(log))
    cap = plan.capacity
    specs = [entry.spec for entry in plan.entries]
    fit = kv_fit(specs, available_bytes=budget.available_kv_bytes,
                 pool_block_bytes=cap.bytes_per_block if profile.memory.reserve_null_block else 0,
                 max_model_len=cap.max_model_len,
                 in_flight_tokens=in_flight_tokens)
    mem = profile.memory
    auto = profile.auto_fit() if auto_fit_from is not None else None
    if auto is not None and auto_fit_from is not None:
        fitted = auto_fit_tokens(plan, fit.check_bytes, cap.max_model_len, in_flight_tokens)
        if fitted < 1:
            issue = startup_issue(catalog, auto.code, ("max_model_len",))
            return MemoryReport(budget=budget, fit=fit, log=tuple(log), issue=issue)
        log.append(auto_fit_log(profile, original=auto_fit_from, fitted=fitted,
                                check_bytes=fit.check_bytes))
    if fit.outcome == "no_memory":
        issue = startup_issue(catalog, mem.no_memory_code, ("gpu_memory_utilization",))
        return MemoryReport(budget=budget, fit=fit, log=tuple(log), issue=issue)
    if fit.outcome == "too_long":
        estimated = (mem.estimated_max_len.format(estimated=fit.estimated_max_len)
                     if fit.estimated_max_len > 0 else "")
        issue = startup_issue(catalog, mem.too_long_code, ("max_model_len",),
                       max_model_len=fit.max_model_len, needed_gib=format_gib(fit.needed_bytes),
                       available_gib=format_gib(fit.check_bytes), estimated_msg=estimated)
        return MemoryReport(budget=budget, fit=fit, log=tuple(log), issue=issue)
    for key in ("capacity", "size", "concurrency"):
        if key in mem.log and cap.kv_cache_tokens is not None and cap.max_concurrency is not None:
            log.append(mem.log[key].format(
                pool="GPU", tokens=f"{cap.kv_cache_tokens:,}",
                max_model_len=f"{cap.max_model_len:,}",
                concurrency=f"{cap.max_concurrency:.2f}"))
    return MemoryReport(budget=budget, fit=fit, capacity=cap, log=tuple(log))


# ---------------------------------------------------------------- the other checks


def _flat_rope(cfg: Mapping[str, Any]) -> Any:
    """The config's rope parameters as written (one mapping, or one per layer type)."""
    return cfg.get("rope_scaling") or cfg.get("rope_parameters")


def _rope_entries(cfg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The rope parameters, one mapping per layer type when they are nested (vLLM's
    ``iter_rope_parameters``)."""
    rope = _flat_rope(cfg)
    if not isinstance(rope, Mapping) or not rope:
        return []
    if all(isinstance(value, Mapping) for value in rope.values()):
        return [value for value in rope.values() if value]
    return [rope]


def _pretraining_length(cfg: Mapping[str, Any], rope: Mapping[str, Any], *, nested: bool) -> Any:
    """A rope's pretraining length as transformers standardises it before vLLM reads it
    (transformers 5.24 ``modeling_rope_utils.py:835-859``): a single rope takes the
    config's top-level ``original_max_position_embeddings`` first (Phi-3 keeps it there),
    then its own; a per-layer-type rope its own; both fall back to
    ``max_position_embeddings``."""
    if not nested and "original_max_position_embeddings" in cfg:
        return cfg["original_max_position_embeddings"]
    return rope.get("original_max_position_embeddings", cfg.get("max_position_embeddings"))


def derived_max_model_len(raw: Mapping[str, Any], profile: StartupProfile) -> tuple[float, str] | None:
    """vLLM's derived max_model_len and the config key it came from, or None."""
    spec = profile.checks.max_model_len
    cfg = text_config(raw)
    derived: float | None = None
    key_used = ""
    for key in spec.keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and (derived is None or value < derived):
            derived, key_used = value, key
    if isinstance(cfg.get("model_max_length"), int):
        derived, key_used = cfg["model_max_length"], "model_max_length"
    if derived is None:
        return None
    derived = float(derived)  # ModelArchitectureConfig.derived_max_model_len_and_key is a float
    model_type = str(cfg.get("model_type", ""))
    unscaled = any(kind in model_type for kind in spec.unscaled_model_types)
    entries = _rope_entries(cfg)
    if not unscaled and entries and cfg.get("position_embedding_type") != "absolute":
        factor: float = 1.0
        for rope in entries:
            rope_type = rope.get("rope_type", rope.get("type", "default"))
            if rope_type in spec.prescaled_rope_types:
                continue
            value = rope.get("factor")
            if isinstance(value, int | float) and not isinstance(value, bool):
                factor = float(value)
            if rope_type in spec.original_length_rope_types:
                original = _pretraining_length(cfg, rope, nested=rope is not _flat_rope(cfg))
                if isinstance(original, int | float) and not isinstance(original, bool):
                    derived = float(original)
        derived = derived * factor
    return derived, key_used


def default_max_model_len(raw: Mapping[str, Any], profile: StartupProfile) -> int | None:
    """The max_model_len vLLM runs with when ``--max-model-len`` is not given (None: the
    config states no length and the release assumes none)."""
    found = derived_max_model_len(raw, profile)
    spec = profile.checks.max_model_len
    if found is None:
        return spec.default_length
    cfg = text_config(raw)
    original = cfg.get("original_max_position_embeddings")
    if any(rope.get("rope_type", rope.get("type")) in spec.default_original_length_rope_types
           for rope in _rope_entries(cfg)) \
            and isinstance(original, int | float) and not isinstance(original, bool):
        return int(original)
    return int(found[0])


def max_model_len_issue(catalog: Catalog, profile: StartupProfile, raw: Mapping[str, Any], *,
                        max_model_len: int | None,
                        environment: Mapping[str, str]) -> StartupIssue | None:
    """``--max-model-len`` above what the config allows (unless the env var allows it)."""
    spec = profile.checks.max_model_len
    if max_model_len is None or environment.get(spec.allow_env, "").strip() in ("1", "true", "True"):
        return None
    found = derived_max_model_len(raw, profile)
    if found is None or max_model_len <= found[0]:
        return None
    derived, key = found
    cfg = text_config(raw)
    model_max = cfg.get("model_max_length")
    if isinstance(model_max, int | float) and not isinstance(model_max, bool) \
            and max_model_len <= model_max:
        return None  # vLLM allows up to model_max_length (vllm/config/model.py:2661-2662 in 0.33.0)
    return startup_issue(catalog, spec.code, ("max_model_len",), max_model_len=max_model_len,
                  max_len_key=key, derived=derived, model_max_length=model_max,
                  derived_int=int(derived))


def tensor_parallel_issue(catalog: Catalog, profile: StartupProfile, model: ModelFacts,
                          tp: int, dcp: int = 1, pcp: int = 1) -> StartupIssue | None:
    """vLLM's first refusal of the TP / DCP split, in the order vLLM checks: the TP size
    not divisible by the DCP size (the parallel config), attention heads not divisible by
    ``--tensor-parallel-size``, DCP's GQA limits (the model config), then the padded
    vocabulary (while the model is built)."""
    attention = [layer for layer in model.layers if layer.is_attention]
    widest = max(attention, key=lambda layer: layer.total_q_heads or layer.num_q_heads,
                 default=None)
    heads = (widest.total_q_heads or widest.num_q_heads) if widest is not None else 0
    kv_heads = (widest.total_kv_heads or heads) if widest is not None else 0
    split = partial(dcp_issue, catalog, profile, tp_size=tp, dcp_size=dcp, num_heads=heads,
                    num_kv_heads=kv_heads, pcp_size=pcp,
                    use_mla=any(layer.mla is not None for layer in attention))
    found = split(checks=DCP_PARALLEL_CHECKS)
    if found is not None:
        return found
    if heads and heads % tp:
        return startup_issue(catalog, profile.checks.tensor_parallel_heads.code,
                      ("parallel", "tensor_parallel_size"), total_num_attention_heads=heads,
                      tensor_parallel_size=tp)
    found = split(checks=DCP_MODEL_CHECKS) if heads else None
    if found is not None or tp <= 1:
        return found
    vocab_check = profile.checks.tensor_parallel_vocab
    vocab = config_int(text_config(raw_config(model)), "vocab_size")
    padded = -(-vocab // vocab_check.padding) * vocab_check.padding
    if vocab and padded % tp:
        return startup_issue(catalog, vocab_check.code, ("parallel", "tensor_parallel_size"),
                      padded_vocab=padded, tensor_parallel_size=tp, padding=vocab_check.padding)
    for layer in attention:  # built in order, after the embedding; MLA layers have one
        if layer.mla is None and layer.kind != "mla":
            found = kv_heads_issue(catalog, profile, tp_size=tp,
                                   num_kv_heads=layer.total_kv_heads or layer.total_q_heads)
            if found is not None:
                return found
    return None
