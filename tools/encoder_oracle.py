#!/usr/bin/env python3
"""vLLM's own answers for the multimodal encoder at start-up: the vision encoder's attention
backend and the encoder budget check.

Run with an oracle interpreter (vLLM installed, CPU only), once per release (the extra
path holds torchvision and compressed-tensors, which the multimodal model modules import)::

    ORACLE_DIR=/work/oracle ORACLE_EXTRA_PATH=/work/oracle-extra \\
        /work/.venvs/oracle-0.33.0/bin/python tools/encoder_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/encoder.json.gz

``vit``: vLLM is made to believe it runs on a CUDA GPU (the bootstrap of
tools/vllm_model_reference.py, the oracle's emulated ``NvmlCudaPlatform``); for every
capability, head size and dtype the unmodified ``current_platform.get_vit_attn_backend``
(vllm/platforms/cuda.py, what ``MMEncoderAttention`` and the ViT models reach through
``vllm/model_executor/models/vision.py:get_vit_attn_backend``) answers with the selected
backend, and for every explicit ``--mm-encoder-attn-backend`` choice with the backend or
the ``AssertionError`` text it raises.

``budget``: for each multimodal config (the fixtures and presets the tool maps), vLLM's
``ModelConfig`` (``skip_tokenizer_init``; optional ``limit_mm_per_prompt`` /
``mm_processor_kwargs``), its ``is_mm_prefix_lm``, the processing info's
``allowed_mm_limits`` and ``get_mm_max_tokens_per_item`` (None: the family needs the
processor's dummy inputs, which need the checkpoint's processor files), the default-raise
floor ``EngineArgs._get_min_mm_batched_tokens`` (vllm/engine/arg_utils.py) and the budget
check ``compute_mm_encoder_budget`` (vllm/v1/core/encoder_cache_manager.py) for several
``max_num_batched_tokens`` with chunked multimodal input disabled, and ``profile_run``:
vLLM's ``MultiModalBudget`` (vllm/multimodal/encoder_budget.py) as the profile run builds it
(the modality it encodes, the items per batch, the encoder budget). Packages vLLM imports
but no answer here reads are stood in where an oracle venv lacks them (the structured
output grammars; the processor's tokenizer). Nothing here decides an answer:
tests/golden/test_encoder_oracle.py compares the tool with these records. A
config the harness cannot build (an architecture the CPU install cannot inspect) is
written as ``harness_error`` (no answer of vLLM's), and ``budget`` is null with
``budget_harness_error`` where the environment lacks a package those modules import.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

CAPABILITIES = ("7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0")
HEAD_SIZES = (36, 40, 64, 72, 80, 96, 128, 256, 512)
DTYPES = ("float16", "bfloat16", "float32")
CHOICES = ("FLASH_ATTN", "TRITON_ATTN", "TORCH_SDPA", "FLASHINFER", "FLEX_ATTENTION",
           "ROCM_AITER_FA", "CPU_ATTN")
BATCHED_TOKENS = (2048, 2496, 4096, 8192)

MODELS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("gemma-4-26B-A4B", "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json", {}),
    ("gemma-4-26B-A4B-video-8-frames", "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json",
     {"limit_mm_per_prompt": {"video": {"count": 1, "num_frames": 8}}}),
    ("gemma-4-26B-A4B-no-video", "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json",
     {"limit_mm_per_prompt": {"video": 0}}),
    ("gemma-4-26B-A4B-max-soft-tokens-1120",
     "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json",
     {"mm_processor_kwargs": {"max_soft_tokens": 1120}}),
    ("gemma-3-27b", "schemas/models/gemma-3-27b.json", {}),
    ("llama-4-scout", "schemas/models/llama-4-scout.json", {}),
    ("gemma-4-31B-it-nvfp4", "tests/fixtures/hf_configs/nvidia--Gemma-4-31B-IT-NVFP4.json", {}),
    ("qwen3-vl-8b", "tests/fixtures/hf_configs/Qwen--Qwen3-VL-8B-Instruct.json", {}),
)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:1500]


def vit_answers() -> dict[str, Any]:
    import oracle
    import torch
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    auto: list[dict[str, Any]] = []
    explicit: list[dict[str, Any]] = []
    supported: dict[str, list[str]] = {}
    for cap in CAPABILITIES:
        major, minor = (int(p) for p in cap.split("."))
        oracle.set_capability((major, minor))
        supported[cap] = [b.name for b in current_platform.get_supported_vit_attn_backends()]
        for head_size in HEAD_SIZES:
            for dtype in DTYPES:
                try:
                    chosen: str | None = current_platform.get_vit_attn_backend(
                        head_size, getattr(torch, dtype)).name
                    error = None
                except Exception as exc:  # recorded, never raised
                    chosen, error = None, _error(exc)
                auto.append({"capability": cap, "head_size": head_size, "dtype": dtype,
                             "backend": chosen, "error": error})
        for choice in CHOICES:
            member = AttentionBackendEnum.__members__.get(choice)
            if member is None:
                explicit.append({"capability": cap, "choice": choice, "backend": None,
                                 "error": "not an AttentionBackendEnum member"})
                continue
            try:
                got: str | None = current_platform.get_vit_attn_backend(
                    72, torch.bfloat16, backend=member).name
                error = None
            except AssertionError as exc:
                got, error = None, f"AssertionError: {exc}"
            explicit.append({"capability": cap, "choice": choice, "backend": got, "error": error})
    return {"supported": supported, "auto": auto, "explicit": explicit,
            "enum_members": [member.name for member in AttentionBackendEnum]}


def _model_dir(tmp: Path, name: str, path: str) -> Path:
    raw = json.loads((REPO / path).read_text(encoding="utf-8"))
    raw = raw.get("hf_config", raw) if "architectures" not in raw else raw
    target = tmp / name
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    return target


def budget_answer(tmp: Path, name: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    from vllm.config import ModelConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.v1.core.encoder_cache_manager import compute_mm_encoder_budget

    out: dict[str, Any] = {"id": name, "config": path, "kwargs": kwargs}
    try:
        try:
            model_config = ModelConfig(model=str(_model_dir(tmp, name, path)),
                                       skip_tokenizer_init=True, **kwargs)
        except Exception as exc:
            if type(exc).__name__ != "AmbiguousGlobalPerLayerAttributeError":
                raise
            _global_per_layer_attributes()
            model_config = ModelConfig(model=str(_model_dir(tmp, name, path)),
                                       skip_tokenizer_init=True, **kwargs)
    except Exception as exc:  # the harness could not build the config: no answer of vLLM's
        out["harness_error"] = _error(exc).replace(str(tmp), "<scratch>")  # reproducible
        return out
    out["is_multimodal_model"] = bool(model_config.is_multimodal_model)
    if not model_config.is_multimodal_model:
        return out
    out["is_mm_prefix_lm"] = bool(model_config.is_mm_prefix_lm)
    out["max_model_len"] = model_config.max_model_len
    try:
        info = MULTIMODAL_REGISTRY.get_processing_info(model_config)
        out["supported_mm_limits"] = sorted(info.supported_mm_limits)
        allowed = dict(info.allowed_mm_limits)
        out["allowed_mm_limits"] = allowed
        active = [m for m in info.supported_mm_limits if allowed.get(m, 0) > 0]
        tokens = info.get_mm_max_tokens_per_item(seq_len=model_config.max_model_len,
                                                 mm_counts=dict.fromkeys(active, 1))
        out["max_tokens_per_item"] = (None if tokens is None else
                                      {m: tokens[m] for m in active if m in tokens})
    except Exception as exc:  # the architecture could not be inspected here: no answer
        out["harness_error"] = _error(exc).replace(str(tmp), "<scratch>")  # reproducible
        return out
    min_batched = getattr(EngineArgs, "_get_min_mm_batched_tokens", None)
    out["default_raise"] = min_batched is not None  # the raise of the default exists
    floor = min_batched(model_config) if min_batched is not None else None
    out["default_raise_floor"] = list(floor) if floor is not None else None
    checks: dict[str, Any] = {}
    if out.get("max_tokens_per_item"):
        for batched in BATCHED_TOKENS:
            scheduler = SimpleNamespace(disable_chunked_mm_input=True,
                                        max_num_batched_tokens=batched,
                                        max_num_encoder_input_tokens=batched,
                                        encoder_cache_size=batched)
            try:
                compute, cache = compute_mm_encoder_budget(scheduler, out["max_tokens_per_item"])
                checks[str(batched)] = {"error": None, "encoder_compute_budget": compute,
                                        "encoder_cache_size": cache}
            except ValueError as exc:
                checks[str(batched)] = {"error": str(exc)}
    out["budget_check"] = checks
    if out.get("max_tokens_per_item"):
        out["profile_run"] = {str(batched): _profile_run(model_config, batched)
                              for batched in BATCHED_TOKENS}
    return out


def _global_per_layer_attributes() -> None:
    """vLLM 0.25.1-0.27.1 read ``hf_text_config.head_dim`` of a config whose layers
    differ (Gemma-4), as the transformers releases of their time answered it: the global
    value. The oracle venvs' newer transformers refuses that read unless the config allows
    it (``allow_global_per_layer_attribute_access``); the harness allows it, as those
    transformers did. No encoder or budget answer reads the head size."""
    from transformers.integrations.heterogeneity import configuration_utils

    for cls in vars(configuration_utils).values():
        if isinstance(cls, type) and isinstance(
                vars(cls).get("allow_global_per_layer_attribute_access"), property):
            cls.allow_global_per_layer_attribute_access = property(  # type: ignore[attr-defined]
                lambda self: True, lambda self, value: None)


class _TokenizerStandIn:
    """Handed to the multimodal processor where vLLM would load the checkpoint's
    tokenizer (``skip_tokenizer_init``: the records hold no tokenizer files). The
    budget reads only the processing info (``get_mm_max_tokens_per_item``) and the
    scheduler's limits; nothing here tokenizes."""


def _profile_run(model_config: Any, batched: int) -> dict[str, Any]:
    """vLLM's ``MultiModalBudget`` (vllm/multimodal/encoder_budget.py), as the GPU model
    runner builds it for the profile run: the encoder budget and how many items of
    which modality the profile run encodes (``gpu_model_runner.profile_run``), with
    ``max_num_seqs`` 256, chunked multimodal input disabled."""
    from vllm.config import SchedulerConfig, VllmConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal import registry as mm_registry_module
    from vllm.multimodal.encoder_budget import MultiModalBudget

    mm_registry_module.cached_tokenizer_from_config = (
        lambda *args, **kwargs: _TokenizerStandIn())
    given = {"max_num_batched_tokens": batched, "max_num_seqs": 256,
             "max_model_len": model_config.max_model_len, "is_encoder_decoder": False,
             "disable_chunked_mm_input": True}
    try:
        scheduler = SchedulerConfig(**given)
        vllm_config = VllmConfig(model_config=model_config, scheduler_config=scheduler)
        try:
            budget = MultiModalBudget(vllm_config, MULTIMODAL_REGISTRY, enable_cache=False)
        except TypeError:  # releases without the keyword
            budget = MultiModalBudget(vllm_config, MULTIMODAL_REGISTRY)
    except ValueError as exc:  # compute_mm_encoder_budget's refusal
        return {"error": str(exc)}
    return {"error": None, "max_num_seqs": vllm_config.scheduler_config.max_num_seqs,
            "max_model_len": model_config.max_model_len,
            "encoder_compute_budget": budget.encoder_compute_budget,
            "encoder_cache_size": budget.encoder_cache_size,
            "encoder_budget": budget.get_encoder_budget(),
            "modality": budget.get_modality_with_max_tokens(),
            "max_items_per_batch": dict(budget.mm_max_items_per_batch),
            "max_items_per_prompt": dict(budget.mm_max_items_per_prompt)}


def _stub_structured_output_grammar() -> None:
    """``vllm.v1.core.encoder_cache_manager`` imports ``vllm.v1.request``, whose structured
    output package annotates a class with ``llguidance.LLMatcher``
    (``vllm/v1/structured_output/backend_guidance.py``) and xgrammar's classes
    (``backend_xgrammar.py``) at import; the oracle venvs of 0.25.1-0.29.0 lack llguidance
    and xgrammar. No encoder or budget answer reads a grammar: an inert stand-in is
    importable in their place (only where a package is missing)."""
    import importlib.util
    import types

    class _Annotations(types.ModuleType):
        def __getattr__(self, item: str) -> type:
            if item.startswith("__"):
                raise AttributeError(item)
            return type(item, (), {})  # a class: ``X | None`` annotations evaluate

    for package, modules in (("llguidance", ("", ".hf", ".torch")), ("xgrammar", ("",))):
        if importlib.util.find_spec(package) is None:
            for name in modules:
                sys.modules[package + name] = _Annotations(package + name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .json.gz file")
    args = parser.parse_args(argv)
    import vllm_model_reference

    vllm_model_reference._bootstrap()
    _stub_structured_output_grammar()
    import vllm

    answer: dict[str, Any] = {"vllm_version": vllm.__version__, "vit": vit_answers()}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            answer["budget"] = [budget_answer(Path(tmp), *row) for row in MODELS]
    except ImportError as exc:  # the oracle environment lacks a package vLLM imports here
        answer["budget"] = None
        answer["budget_harness_error"] = _error(exc)
    for row in answer["budget"] or []:
        print(f"{row['id']}: {row.get('harness_error') or row.get('max_tokens_per_item')}"[:300],
              file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(answer, sort_keys=True, separators=(",", ":"))
    with contextlib.ExitStack() as stack:  # reproducible: no timestamp in the gzip header
        raw = stack.enter_context(args.out.open("wb"))
        gz = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))
        gz.write((text + "\n").encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
