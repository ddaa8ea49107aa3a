#!/usr/bin/env python3
"""vLLM's own answer for a speculative-decoding deployment: the draft's layers, the
attention backend vLLM selects for them, their KV specs in the KV-cache groups, the
block sizes after the engine's alignment, the CUDA-graph sizes, the draft's parameters,
or vLLM's refusal in its words.

Run with an oracle interpreter (vLLM installed, CPU only)::

    ORACLE_EXTRA_PATH=/work/oracle-extra ORACLE_DIR=/work/oracle \\
        /work/.venvs/oracle-0.33.0/bin/python tools/draft_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/draft.jsonl.gz

For every case of :data:`CASES` (a real target config.json, a ``--speculative-config``
and the environment it runs under) it

1. imports vLLM as a CUDA platform of compute capability 9.0
   (``tools/vllm_model_reference.py``'s ``_bootstrap``: the shared oracle, the CPU-only
   patches);
2. builds the ``VllmConfig`` as ``vllm serve`` does
   (``EngineArgs(..., speculative_config=...).create_engine_config()``: vLLM's
   ``SpeculativeConfig`` reads the draft's config, rewrites an MTP target's config into
   its MTP draft (``SpeculativeConfig.hf_config_override``), picks the model runner and
   validates the method for it);
3. builds the target's model class on ``meta``, then the draft's as the runner in use
   loads it: Model Runner V2 (``v1/worker/gpu/spec_decode/eagle/utils.py``
   ``load_eagle_model``) overlays ``SpeculativeConfig.apply_draft_overrides`` on the
   target's config (the draft keeps the target's ``--attention-backend`` unless
   ``attention_backend`` is given); the V1 runner's proposer
   (``v1/spec_decode/llm_base_proposer.py`` ``_create_draft_vllm_config``) sets the
   draft's backend to ``attention_backend`` (None: selected afresh). Both with
   ``initialize_model(model_config=draft_model_config)`` as ``get_model`` does;
4. reads every attention layer of the static forward context (target and draft
   register in the same one, as ``load_model`` finds the draft's: the names the target
   did not have) and its spec as ``GPUModelRunner.get_kv_cache_spec`` builds it, groups
   all of them with vLLM's ``get_kv_cache_groups`` and takes the engine's alignment step
   (``update_block_size_for_backend``), as ``vllm_model_reference.py`` does for a
   model alone;
5. records the draft's parameters per top-level module (what the draft holds before a
   shared embedding or lm_head is dropped).

An answer is vLLM's build (``status: ok``) or its refusal (``status: refused``: a
``ValueError`` / ``AssertionError`` / ``NotImplementedError`` / ``KeyError`` raised by
vLLM's or pydantic's own code, text kept). Anything else is the harness failing: the
exit status is 1 and nothing is written.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import sys
import tempfile
import traceback
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_model_reference as ref

REPO = ref.REPO
CONFIGS = REPO / "tests" / "fixtures" / "hf_configs"
MODELS = REPO / "schemas" / "models"
MAX_MODEL_LEN = 4096
"""Every case runs with this ``max_model_len`` (below every draft's own maximum: the
draft's length does not then lower the target's)."""

EAGLE3_DRAFT = MODELS / "drafts" / "yuhuili--EAGLE3-LLaMA3.1-Instruct-8B.json"

CASES: list[dict[str, Any]] = [
    {"id": "deepseek-v3-mtp", "target": MODELS / "deepseek-v3.json",
     "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
    {"id": "deepseek-v3-mtp-k3", "target": MODELS / "deepseek-v3.json",
     "speculative": {"method": "mtp", "num_speculative_tokens": 3}},
    {"id": "deepseek-v3-mtp-flashmla", "target": MODELS / "deepseek-v3.json",
     "speculative": {"method": "mtp", "num_speculative_tokens": 1,
                     "attention_backend": "FLASHMLA"}},
    {"id": "deepseek-v3-mtp-flash-attn", "target": MODELS / "deepseek-v3.json",
     "speculative": {"method": "mtp", "num_speculative_tokens": 1,
                     "attention_backend": "FLASH_ATTN"}},
    {"id": "deepseek-v3-mtp-target-triton-mla", "target": MODELS / "deepseek-v3.json",
     "attention_backend": "TRITON_MLA",
     "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
    {"id": "llama-3.1-8b-eagle3", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT,
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3}},
    {"id": "llama-3.1-8b-eagle3-flashinfer", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT,
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                     "attention_backend": "FLASHINFER"}},
    {"id": "llama-3.1-8b-eagle3-flashmla", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT,
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                     "attention_backend": "FLASHMLA"}},
    {"id": "llama-3.1-8b-eagle3-fp8-kv", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT,
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                     "kv_cache_dtype": "fp8"}},
    {"id": "llama-3.1-8b-eagle3-draft-tp2", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT,
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                     "draft_tensor_parallel_size": 2}},
    {"id": "llama-3.1-8b-eagle3-unknown-backend", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT,
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                     "attention_backend": "NOT_A_BACKEND"}},
    {"id": "llama-3.1-8b-eagle3-target-triton", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT, "attention_backend": "TRITON_ATTN",
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3}},
    {"id": "llama-3.1-8b-eagle3-v1-runner", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT, "attention_backend": "TRITON_ATTN",
     "env": {"VLLM_USE_V2_MODEL_RUNNER": "0"},
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3}},
    {"id": "qwen3-next-mtp", "target": MODELS / "qwen3-next-80b-a3b.json",
     "speculative": {"method": "mtp", "num_speculative_tokens": 2}},
    {"id": "qwen3.5-35b-a3b-mtp", "target": CONFIGS / "Qwen--Qwen3.5-35B-A3B.json",
     "speculative": {"method": "mtp", "num_speculative_tokens": 2}},
    {"id": "glm-5-mtp", "target": CONFIGS / "zai-org--GLM-5.json",
     "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
    {"id": "glm-4.5-air-mtp", "target": CONFIGS / "edge" / "glm-4.5-air-shape.json",
     "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
    {"id": "llama-3.1-8b-ngram", "target": MODELS / "llama-3.1-8b.json",
     "speculative": {"method": "ngram", "num_speculative_tokens": 4,
                     "prompt_lookup_max": 4}},
    {"id": "llama-3.1-8b-draft-model", "target": MODELS / "llama-3.1-8b.json",
     "draft": CONFIGS / "meta-llama--Llama-3.2-3B.json",
     "speculative": {"method": "draft_model", "num_speculative_tokens": 2}},
    {"id": "llama-3.1-8b-draft-model-triton", "target": MODELS / "llama-3.1-8b.json",
     "draft": CONFIGS / "meta-llama--Llama-3.2-3B.json",
     "speculative": {"method": "draft_model", "num_speculative_tokens": 2,
                     "attention_backend": "TRITON_ATTN"}},
    {"id": "llama-3.1-8b-eagle3-adaptive-v1-runner", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT, "env": {"VLLM_USE_V2_MODEL_RUNNER": "0"},
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                     "enable_adaptive_verification": True}},
    {"id": "llama-3.1-8b-eagle3-parallel-v2-runner", "target": MODELS / "llama-3.1-8b.json",
     "draft": EAGLE3_DRAFT, "env": {"VLLM_USE_V2_MODEL_RUNNER": "1"},
     "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                     "parallel_drafting": True}},
]
"""The grid: real configs (``schemas/models/`` presets and ``tests/fixtures/hf_configs/``
copies of Hugging Face files, SOURCES.md), each with one ``--speculative-config``."""

REFUSAL_TYPES = (*ref.REFUSAL_TYPES, KeyError)
"""``SpeculativeConfig``'s ``attention_backend`` validator looks the name up in
``AttentionBackendEnum`` (``AttentionBackendEnum[value.upper()]``): an unknown name
raises the enum's ``KeyError`` out of pydantic's validation."""


def _refusal(exc: BaseException) -> bool:
    if ref._refusal(exc):
        return True
    if isinstance(exc, KeyError):
        frames = traceback.extract_tb(exc.__traceback__)
        return any("site-packages/vllm/" in f.filename for f in frames) \
            or any(f.filename.endswith("/enum.py") for f in frames[-1:])
    return False


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Any:
    from vllm import envs

    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    if hasattr(envs, "disable_envs_cache"):
        envs.disable_envs_cache()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _Captured(Exception):
    """Raised by the stand-in for ``get_model`` once the runner's loader has built the
    config it would build the draft under."""


def _captured_config(module: Any, call: Any) -> Any:
    """The ``vllm_config`` the runner's own loader passes to ``get_model`` (``module``:
    the loader's module, whose ``get_model`` is replaced for the call; ``call``: runs the
    loader), the draft not built."""
    seen: dict[str, Any] = {}

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise _Captured

    saved = module.get_model
    module.get_model = stand_in
    try:
        call()
    except _Captured:
        pass
    finally:
        module.get_model = saved
    if "vllm_config" not in seen:
        raise ref.HarnessError(f"{module.__name__}: the loader did not reach get_model")
    return seen["vllm_config"]


_V2_DRAFT_MODEL_LOADERS = (
    "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator",
    "vllm.v1.worker.gpu.spec_decode.draft_model.speculator",
)
"""Model Runner V2's draft-model speculator, by release (0.32.0 on: standalone_ar;
0.31.0: draft_model; before 0.31.0 V2 refuses a draft model, so the V1 runner is used)."""


def _draft_vllm_config(vllm_config: Any) -> Any:
    """The config the draft's layers are built under, by the runner in use's own code:
    Model Runner V2's ``load_eagle_model`` (EAGLE, MTP) or its draft-model speculator's
    ``load_draft_model``, run up to its ``get_model`` call (each release's own overrides:
    ``apply_draft_overrides`` from 0.31.0, the inline ``attention_backend`` /
    ``kv_cache_dtype`` / ``moe_backend`` replaces of 0.30.0, none before); the V1
    runner's proposer builds it with its ``_create_draft_vllm_config`` (``EagleProposer``,
    or ``DraftModelProposer`` for a draft model), called on a proposer that holds only
    the two configs it reads."""
    import importlib

    spec = vllm_config.speculative_config
    if getattr(vllm_config, "use_v2_model_runner", False) and spec.method == "draft_model":
        for name in _V2_DRAFT_MODEL_LOADERS:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            loader = next(cls for cls in vars(module).values()
                          if isinstance(cls, type) and cls.__module__ == name
                          and "load_draft_model" in vars(cls))
            holder = types.SimpleNamespace(
                speculative_config=spec, vllm_config=vllm_config,
                draft_model_config=spec.draft_model_config)
            return _captured_config(
                module, lambda loader=loader, holder=holder: loader.load_draft_model(
                    holder, None, set()))
        raise ref.HarnessError("Model Runner V2 runs a draft model, but no loader was found")
    if getattr(vllm_config, "use_v2_model_runner", False):
        from vllm.v1.worker.gpu.spec_decode.eagle import utils as eagle_utils

        return _captured_config(eagle_utils,
                                lambda: eagle_utils.load_eagle_model(None, vllm_config))
    if spec.method == "draft_model":
        from vllm.v1.spec_decode.draft_model import DraftModelProposer as proposer_cls
    else:
        from vllm.v1.spec_decode.eagle import EagleProposer as proposer_cls
    proposer = object.__new__(proposer_cls)
    proposer.vllm_config = vllm_config
    proposer.speculative_config = spec
    return proposer._create_draft_vllm_config()


def _spec_decode_sizes(vllm_config: Any) -> list[int]:
    """The capture sizes after ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode``
    (vLLM's own method, on a copy of the compilation config), the step
    ``resolve_cudagraph_mode_and_sizes`` takes for the V1 runner with FULL decode graphs
    and a uniform decode query longer than one token (0.25.1's method also takes the
    tensor-parallel size, for sequence parallelism)."""
    import copy
    import inspect

    compilation = copy.deepcopy(vllm_config.compilation_config)
    query = 1 + int(vllm_config.speculative_config.num_speculative_tokens or 0)
    method = compilation.adjust_cudagraph_sizes_for_spec_decode
    if "tensor_parallel_size" in inspect.signature(method).parameters:
        method(query, vllm_config.parallel_config.tensor_parallel_size)
    else:
        method(query)
    return list(compilation.cudagraph_capture_sizes or [])


def _builds_draft(spec: Any) -> bool:
    """Whether the method has a draft model to build (EAGLE / MTP / a draft model);
    n-gram and suffix decoding have none (vLLM sets ``draft_model_config`` to the
    target's for them)."""
    for name in ("use_eagle", "uses_draft_model"):
        if getattr(spec, name, lambda: False)():
            return True
    return spec.method in ("eagle", "eagle3", "mtp", "draft_model") or "mtp" in str(spec.method)


def _resolve_layout(vllm_config: Any, layers: dict[str, Any], specs: dict[str, Any]) -> None:
    """The engine core's ``resolve_kv_cache_layout`` before grouping, as
    ``vllm_model_reference.reference`` calls it (releases without per-layer layouts: none)."""
    try:
        from vllm.v1.attention.backends.utils import (
            get_supported_kv_cache_layouts,
            resolve_kv_cache_layout,
        )
    except ImportError:
        return
    backends = {m.get_attn_backend() for n, m in layers.items() if n in specs}
    layouts = [layout.name for layout in get_supported_kv_cache_layouts(backends)]
    resolve_kv_cache_layout(vllm_config, [layouts], list(specs.values()))


def _groups(vllm_config: Any, specs: dict[str, Any], target_names: set[str]) -> list[dict[str, Any]]:
    """``vllm_model_reference._groups``, each group's draft layers by name (a draft's
    layer index may repeat a target's: Qwen3-Next's ``mtp.layers.0``)."""
    try:
        from vllm.v1.core import kv_cache_planning as planning
    except ImportError:  # before 0.29.0 the planning lived in kv_cache_utils
        from vllm.v1.core import kv_cache_utils as planning

    out = []
    for group in planning.get_kv_cache_groups(vllm_config, dict(specs)):
        spec = group.kv_cache_spec
        out.append({
            "spec": type(spec).__name__,
            "block_size": spec.block_size,
            "page_size_bytes": spec.page_size_bytes,
            "layers": [ref._layer_index(n) for n in group.layer_names if n in target_names],
            "draft_layers": [n for n in group.layer_names if n not in target_names],
        })
    return out


def _param_counts(model: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, param in model.named_parameters():
        head = ".".join(name.split(".")[:2]) if name.startswith("model.") else name.split(".")[0]
        if ".layers." in f".{name}":
            head = "layers"
        counts[head] = counts.get(head, 0) + param.numel()
    return dict(sorted(counts.items()))


def answer(case: dict[str, Any], workdir: Path) -> dict[str, Any]:
    import torch
    import vllm
    from vllm.config import set_current_vllm_config
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    out: dict[str, Any] = {
        "id": case["id"],
        "target": ref._relative(case["target"]),
        "speculative_config": case["speculative"],
        "vllm_version": vllm.__version__,
        "capability": ".".join(map(str, ref.CAPABILITY)),
    }
    for key in ("attention_backend", "env"):
        if key in case:
            out[key] = case[key]
    speculative = dict(case["speculative"])
    if "draft" in case:
        out["draft"] = ref._relative(case["draft"])
        draft_dir, _ = ref._prepare_dir(case["draft"], workdir / "draft")
        speculative["model"] = str(draft_dir)
    target_dir, notes = ref._prepare_dir(case["target"], workdir / "target")
    if notes:
        out["notes"] = notes
    stage = "EngineArgs.create_engine_config"
    try:
        with _environment(case.get("env", {})):
            vllm_config = EngineArgs(
                model=str(target_dir), skip_tokenizer_init=True, dtype=ref.MODEL_DTYPE,
                max_model_len=MAX_MODEL_LEN, speculative_config=speculative,
                **({"attention_backend": case["attention_backend"]}
                   if "attention_backend" in case else {}),
            ).create_engine_config()
            spec = vllm_config.speculative_config
            out["runner"] = "v2" if getattr(vllm_config, "use_v2_model_runner", False) else "v1"
            out["method"] = spec.method
            out["num_speculative_tokens"] = spec.num_speculative_tokens
            out["max_model_len"] = vllm_config.model_config.max_model_len
            compilation = vllm_config.compilation_config
            out["cudagraph_mode"] = str(getattr(compilation.cudagraph_mode, "name",
                                                compilation.cudagraph_mode))
            out["cudagraph_capture_sizes"] = list(compilation.cudagraph_capture_sizes or [])
            out["spec_decode_capture_sizes"] = _spec_decode_sizes(vllm_config)
            out["block_size"] = vllm_config.cache_config.block_size
            out["max_num_seqs"] = vllm_config.scheduler_config.max_num_seqs
            out["max_num_batched_tokens"] = vllm_config.scheduler_config.max_num_batched_tokens
            draft_model_config = spec.draft_model_config
            model_config = vllm_config.model_config
            stage = "target model construction"
            with (set_current_vllm_config(vllm_config), set_default_torch_dtype(model_config.dtype),
                  torch.device("meta"), ref._device_tensors_on_meta()):
                initialize_model(vllm_config=vllm_config, prefix="")
            target_names = set(get_layers_from_vllm_config(vllm_config, AttentionLayerBase))
            if draft_model_config is not None and _builds_draft(spec):
                out["draft_architecture"] = draft_model_config.architectures[0]
                out["draft_model_type"] = draft_model_config.hf_config.model_type
                n_predict = getattr(draft_model_config.hf_config, "n_predict", None)
                if n_predict is not None:
                    out["draft_n_predict"] = n_predict
                out["draft_max_model_len"] = draft_model_config.max_model_len
                stage = "draft model construction"
                draft_config = _draft_vllm_config(vllm_config)
                out["draft_cache_dtype"] = str(draft_config.cache_config.cache_dtype)
                out["draft_tensor_parallel_size"] = getattr(
                    spec, "draft_tensor_parallel_size", None)
                out["draft_quantization"] = getattr(spec, "quantization", None)
                out["draft_attention_config_backend"] = (
                    None if draft_config.attention_config.backend is None
                    else draft_config.attention_config.backend.name)
                with (set_current_vllm_config(draft_config),
                      set_default_torch_dtype(draft_model_config.dtype),
                      torch.device("meta"), ref._device_tensors_on_meta()):
                    draft = initialize_model(
                        vllm_config=draft_config, model_config=draft_model_config,
                        prefix="draft_model" if spec.method == "draft_model" else "")
                out["draft_model_class"] = type(draft).__qualname__
                out["draft_parameters"] = _param_counts(draft)
            stage = "get_kv_cache_spec"
            layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
            with set_current_vllm_config(vllm_config):
                specs, records = ref._layer_specs(vllm_config, layers)
            out["target_layers"] = len([r for r in records if r["name"] in target_names])
            out["draft_layers"] = [
                {**r, "index": r["index"]} for r in records if r["name"] not in target_names]
            target_backends = sorted({r["backend"] for r in records
                                      if r["name"] in target_names and "backend" in r})
            out["target_backends"] = target_backends
            stage = "resolve_kv_cache_layout"
            _resolve_layout(vllm_config, layers, specs)
            stage = "get_kv_cache_groups"
            try:
                out["groups"] = _groups(vllm_config, specs, target_names)
            except REFUSAL_TYPES as exc:
                out["groups"] = None
                out["groups_error"] = f"{type(exc).__name__}: {exc}"[:500]
            stage = "update_block_size_for_backend"
            out["aligned"] = ref._aligned(vllm_config, layers)
        out["status"] = "ok"
    except Exception as exc:
        tail = traceback.format_exc().splitlines()[-12:]
        if not _refusal(exc):
            raise ref.HarnessError(
                f"{case['id']}: the harness failed at {stage}: {type(exc).__name__}: {exc}"
                + "\n" + "\n".join(tail)) from exc
        out["status"] = "refused"
        out["stage"] = stage
        out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        out["traceback_tail"] = tail
    return out


class _ClassModule(types.ModuleType):
    """A package whose every attribute is an empty class (annotations such as
    ``llguidance.LLMatcher | None`` evaluate; nothing here calls it)."""

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        value = type(item, (), {})
        setattr(self, item, value)
        return value


_INERT_IF_ABSENT = ("llguidance", "xgrammar")
"""Packages some releases' model modules import (structured output: llguidance) that an
oracle venv may lack (xgrammar too): inert when absent (they decide no cache shape)."""


def _bootstrap() -> None:
    """``vllm_model_reference``'s bootstrap; Triton present: a CUDA host has it, and
    without it vLLM falls back to the V1 runner ("Model Runner V2 requires Triton",
    ``VllmConfig.use_v2_model_runner``), which no GPU deployment does."""
    import importlib.machinery
    import importlib.util

    for name in _INERT_IF_ABSENT:
        if importlib.util.find_spec(name) is None:
            module = _ClassModule(name)
            # a spec, so a later find_spec of the name answers rather than raising
            module.__spec__ = importlib.machinery.ModuleSpec(name, None)
            sys.modules[name] = module
    ref._bootstrap()
    import vllm.config.vllm as vllm_config_module

    if hasattr(vllm_config_module, "HAS_TRITON"):
        vllm_config_module.HAS_TRITON = True
    # FlashInfer's attention impl asks the GPU's SM count at construction (a split
    # heuristic; no cache shape): an H200's 132
    with contextlib.suppress(ImportError):
        from vllm.v1.attention.backends import flashinfer

        if hasattr(flashinfer, "get_device_sm_count"):
            flashinfer.get_device_sm_count = lambda device=None: 132


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    parser.add_argument("--only", action="append", default=[], help="case ids (default: all)")
    args = parser.parse_args(argv)
    _bootstrap()
    results = []
    failures = []
    for case in CASES:
        if args.only and case["id"] not in args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            try:
                result = answer(case, Path(tmp))
            except ref.HarnessError as exc:
                failures.append(str(exc))
                print(f"HARNESS FAILURE {exc}", file=sys.stderr)
                continue
        results.append(result)
        summary = result.get("error") or (
            f"{len(result['draft_layers'])} draft layers "
            f"{sorted({d.get('backend') for d in result['draft_layers']} - {None})}")
        print(f"{result['status']:7} {case['id']}: {summary}"[:400], file=sys.stderr)
    if failures:
        print(f"{len(failures)} harness failure(s): nothing written", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(args.out.open("wb"))
        gz = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))
        for result in results:
            gz.write((json.dumps(result, separators=(",", ":"), sort_keys=True) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
