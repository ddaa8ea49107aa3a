#!/usr/bin/env python3
"""vLLM's own answer for a model: build its real model class from a config.json
on CPU (no GPU, no weights) and record what vLLM's KV-cache manager reads.

Run with an oracle interpreter (vLLM installed, CPU only)::

    /work/venvs/oracle-0.33.0/bin/python tools/vllm_model_reference.py \\
        --out tests/golden/vllm_models/vllm-0.33.0.jsonl.gz \\
        schemas/models/*.json tests/fixtures/hf_configs/*.json

For every config.json it

1. imports vLLM as a CUDA platform of compute capability 9.0 with the shared
   oracle's ``bootstrap`` (``$ORACLE_DIR``, default ``../shared/oracle``:
   compiled extensions stubbed, ``current_platform`` = vLLM's NvmlCudaPlatform);
2. builds the ``VllmConfig`` exactly as ``vllm serve`` does
   (``EngineArgs(...).create_engine_config()``: model-wide sliding window,
   hybrid block-size alignment, the models' ``verify_and_update_config``) from
   the file (a copy in a temporary directory, ``quantization_config`` removed:
   weight quantisation does not change the attention layout, and the CPU cannot
   build quantised kernels);
3. instantiates the class vLLM's registry resolves
   (``get_model_architecture``) under ``torch.device("meta")``, so no weight
   memory is allocated;
4. reads every ``AttentionLayerBase`` module in the static forward context and
   calls its ``get_kv_cache_spec(vllm_config)`` followed by the runner's
   ``customize_attention_spec`` (exactly as ``GPUModelRunner.get_kv_cache_spec``),
   recording KV sharing targets;
5. groups the specs with ``vllm.v1.core.kv_cache_planning.get_kv_cache_groups``;
6. takes the engine's next step once the model is built,
   ``current_platform.update_block_size_for_backend`` (the backends' preferred block
   size, the hybrid Mamba alignment on the emulated platform), and records the
   block sizes, the specs' pages and the groups again (``aligned``).

An answer is vLLM's build (``status: ok``) or vLLM's refusal (``status: refused``:
a ``ValueError`` / ``AssertionError`` / ``NotImplementedError`` raised by vLLM's or
transformers' own code). Anything else (a missing module, a device access on the
CPU, a stub answering wrongly) is the harness failing: it is printed, the exit
status is 1 and nothing is written, so a failure is never recorded as vLLM's answer.

The answers are written as compact JSON lines (gzip) so that CI compares the
project's model reader with vLLM without vLLM installed. Nothing here is
copied from vLLM; every value is what vLLM's code returned.

Patches beyond the shared oracle's (all CPU-only necessities):

* ``torch.ops._C`` (and the other extension namespaces) answer capability
  queries whose names contain ``support`` with ``False`` during import, and,
  after import, any missing op with an inert stub (model constructors keep
  references to kernels such as ``silu_and_mul`` but never call them here);
* ``triton.Config`` (when vLLM's Triton placeholder is in use) keeps its
  arguments, because kernel modules filter their autotune configs on import, and
  ``triton.set_allocator`` is inert (OLMo-Hybrid's GDN layer calls it while built);
* ``torchvision._meta_registrations`` is an empty module (torchvision's
  compiled ops cannot load against a CPU torch; multimodal model modules only
  need its image transforms);
* ``ORACLE_EXTRA_PATH`` adds a directory of pure-Python packages some model
  modules import and the oracle venv lacks (``compressed-tensors``, ``loguru``,
  ``torchvision``, installed there with ``pip install --no-deps --target``);
* ``sparse_attn_indexer.has_deep_gemm`` answers True (the DeepSeek-V3.2
  indexer refuses to be built without the DeepGEMM library, which a GPU
  deployment has; it changes no cache shape);
* ``current_platform.log_warnings`` is silent (it asks NVML about the GPUs);
* ``registry._run_in_subprocess`` runs in this process (the subprocess would
  lack these patches), and ``registry._try_inspect_model_cls`` lets an error while
  importing a model module through (vLLM logs it and refuses the architecture as
  "failed to be inspected": for a package the venv lacks that is the harness failing,
  not vLLM refusing); ``ORACLE_EXTRA_PATH`` then also needs ``mistral_common``
  (Pixtral, Llava, Mistral-3, Voxtral) and ``timm`` (Gemma-3n, OpenVLA);
* ``torch.cuda.Stream``/``Event`` are inert, and tensors a constructor puts on
  the GPU explicitly (a factory's ``device=``, ``nn.Module.to(device)``) go to
  ``meta``; torch's ``_device_constructors`` cache is filled before those wrappers
  are installed, so ``torch.device("meta")`` still routes every parameter to
  ``meta`` (no weight memory);
* kernel modules only a JIT warm-up imports at construction time are inert
  (``_INERT_MODULES``: DeepSeek-V4's mHC TileLang kernels, which need TileLang);
* DeciLM's and QWen's remote config classes are replaced by a stand-in that keeps every key
  (``_register_remote_configs``);
* a one-process gloo "distributed" group of world size 1 (port 29533, or
  ``ORACLE_DIST_PORT`` when several oracles run at once).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import re
import shutil
import sys
import tempfile
import traceback
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ORACLE_DIR = Path(os.environ.get("ORACLE_DIR") or next(
    (p for p in (REPO.parent / "shared" / "oracle", Path("/work/shared/oracle")) if p.is_dir()),
    REPO.parent / "shared" / "oracle",
))
"""The shared oracle (``../shared/oracle``) whose ``bootstrap`` imports vLLM CPU-only."""
CAPABILITY = (9, 0)
DEFAULT_MAX_MODEL_LEN = 8192
"""Every model is built with this ``max_model_len`` (clamped to the config's
own maximum by vLLM): the layer layout does not depend on it, and a fixed
value keeps the answers comparable."""

MODEL_DTYPE = "bfloat16"
"""``--dtype``: fixed, so that every answer is for the same activation dtype
(float32 configs would otherwise be refused by every MLA backend)."""

_STATE = {"permissive": False}
"""After vLLM's import-time capability queries, any missing op is an inert stub."""


class _InertOp:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, item: str) -> _InertOp:
        return _InertOp(f"{self._name}.{item}")

    def __call__(self, *args: Any, **kwargs: Any) -> bool:
        return False


class _OpNamespace:
    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, item: str) -> Any:
        try:
            return getattr(self._real, item)
        except AttributeError:
            if _STATE["permissive"] or "support" in item:
                return _InertOp(item)
            raise


class _NoStream:
    """``torch.cuda.Stream`` / ``Event`` on a CPU: MoE layers create an
    auxiliary stream in their constructor and never use it here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, item: str) -> Any:
        return lambda *args, **kwargs: None


class _TritonConfig:
    """Stands in for ``triton.Config`` when Triton cannot load (no GPU): kernel
    modules inspect their autotune configs at import time."""

    def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, num_stages: int = 2,
                 **extra: Any) -> None:
        self.kwargs = kwargs
        self.num_warps = num_warps
        self.num_stages = num_stages


_FACTORIES = ("empty", "zeros", "ones", "full", "arange", "tensor", "empty_strided",
              "randn", "rand", "randint", "zeros_like", "empty_like", "ones_like")


def _on_gpu(device: Any) -> bool:
    if isinstance(device, int) and not isinstance(device, bool):
        return True
    return str(device).startswith("cuda")


@contextlib.contextmanager
def _device_tensors_on_meta() -> Any:
    """During model construction: tensors a constructor places on the GPU
    explicitly (``device=current_platform.current_device()``, a CUDA index) are
    created on ``meta`` like every other parameter, and the current device is 0."""
    import torch
    import torch.utils._device as device_mode

    # ``torch.device("meta")`` routes the constructors it cached on first use; filled
    # here, that cache holds torch's own functions (which the wrappers call), not the
    # wrappers, so every parameter still lands on ``meta``.
    device_mode._device_constructors()
    saved = {name: getattr(torch, name) for name in _FACTORIES}
    saved_current = torch.cuda.current_device
    saved_to = torch.nn.Module.to

    def wrap(fn: Any) -> Any:
        def inner(*args: Any, **kwargs: Any) -> Any:
            if _on_gpu(kwargs.get("device")):
                kwargs["device"] = "meta"
            return fn(*args, **kwargs)

        return inner

    def module_to(self: Any, *args: Any, **kwargs: Any) -> Any:
        # a tower moved to the GPU explicitly (Kimi-K2.5's vision tower) stays on meta
        if _on_gpu(kwargs.get("device")):
            kwargs["device"] = "meta"
        if args and not isinstance(args[0], torch.dtype | torch.Tensor) and _on_gpu(args[0]):
            args = ("meta", *args[1:])
        return saved_to(self, *args, **kwargs)

    try:
        for name, fn in saved.items():
            setattr(torch, name, wrap(fn))
        torch.cuda.current_device = lambda: 0
        torch.nn.Module.to = module_to  # type: ignore[method-assign]
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        torch.cuda.current_device = saved_current
        torch.nn.Module.to = saved_to  # type: ignore[method-assign]


class _AttrDict(dict):  # type: ignore[type-arg]
    """A JSON-serialisable dict whose keys also read as attributes."""

    def __getattr__(self, item: str) -> Any:
        try:
            return self[item]
        except KeyError:
            raise AttributeError(item) from None


def _attr(value: Any) -> Any:
    if isinstance(value, dict):
        return _AttrDict({k: _attr(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_attr(v) for v in value]
    return value


def _register_remote_configs() -> None:
    """DeciLM (Nemotron NAS) and MiniCPM3 ship their config class as
    remote code, which an offline harness cannot fetch. A stand-in config class
    keeps every key and gives ``block_configs`` the attribute access vLLM's
    ``nemotron_nas.py`` uses (``block_config.attention.n_heads_in_group``);
    every layer decision is still vLLM's. The config's ``auto_map`` is removed
    so transformers uses it."""
    from transformers import AutoConfig, PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for model_type in sorted(_STAND_IN_MODEL_TYPES):
        if model_type in CONFIG_MAPPING:
            continue  # transformers has the class itself: only auto_map is dropped

        class StandInConfig(PretrainedConfig):  # type: ignore[misc]
            def __init__(self, block_configs: list[Any] | None = None, **kwargs: Any) -> None:
                for key, value in kwargs.items():  # before the base class reads them
                    self.__dict__[key] = value
                super().__init__(**kwargs)
                for key, value in kwargs.items():
                    self.__dict__.setdefault(key, value)
                if block_configs is not None:
                    self.block_configs = _attr(block_configs)

        StandInConfig.model_type = model_type
        StandInConfig.__name__ = f"StandInConfig_{model_type}"
        AutoConfig.register(model_type, StandInConfig)


_STAND_IN_MODEL_TYPES = frozenset({"nemotron-nas", "minicpm3", "qwen"})
"""Model types whose config class is remote code: DeciLM (Nemotron NAS),
MiniCPM3 (transformers has its class: only ``auto_map`` is dropped) and QWen
(v1, ``QWenLMHeadModel``: vLLM's answer is then its own, the architecture's refusal). The
stand-in keeps every key of the config.json as an attribute. MiMo is not
stood in: its remote class (a Qwen2Config) rewrites ``sliding_window``."""


class _InertModule(types.ModuleType):
    """A kernel module whose every attribute is an inert stub."""

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        return _InertOp(item)


_INERT_MODULES = ("vllm.model_executor.kernels.mhc.tilelang_kernels", "flashinfer.comm")
"""Kernel modules that model construction imports but never calls here, and that cannot
load on a CPU: DeepSeek-V4's mHC TileLang kernels (only the JIT warm-up imports them,
``kernel_config.enable_jit_warmup``; TileLang has no CPU build) and FlashInfer's
communication kernels (the all-reduce fusion pass imports them; they need libcudart:
the oracle venvs of releases that install FlashInfer). Neither decides a cache shape."""


def _bootstrap() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(ORACLE_DIR))
    for extra in filter(None, os.environ.get("ORACLE_EXTRA_PATH", "").split(os.pathsep)):
        sys.path.append(extra)
    # torchvision's compiled ops do not load against a CPU torch; its fake-op
    # registrations (needed only to trace detection ops) are skipped, the image
    # transforms that multimodal model modules import still work.
    sys.modules["torchvision._meta_registrations"] = types.ModuleType(
        "torchvision._meta_registrations"
    )
    import oracle  # the shared CPU-only vLLM importer

    oracle.bootstrap(CAPABILITY)
    import torch

    for module in _INERT_MODULES:
        sys.modules[module] = _InertModule(module)

    for name in ("_C", "_moe_C", "_C_cache_ops", "_rocm_C", "_vllm_fa2_C", "_vllm_fa3_C"):
        setattr(torch.ops, name, _OpNamespace(getattr(torch.ops, name)))
    import vllm._custom_ops  # noqa: F401  (import-time capability queries)
    from vllm.triton_utils import importing, triton

    if isinstance(triton, importing.TritonPlaceholder):
        triton.Config = _TritonConfig
        # OLMo-Hybrid's GDN layer registers Triton's allocator in its constructor
        triton.set_allocator = lambda allocator: None

    _STATE["permissive"] = True
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()
    # the registry logs and swallows any error while importing a model module, then
    # refuses the architecture as "failed to be inspected": here that error (a package
    # the venv lacks) reaches the harness, which then fails instead of recording it
    registry._try_inspect_model_cls = lambda arch, model: model.inspect_model_cls()
    from vllm.platforms import current_platform

    type(current_platform).log_warnings = classmethod(lambda cls: None)  # type: ignore[method-assign]
    from vllm.model_executor.layers import sparse_attn_indexer

    sparse_attn_indexer.has_deep_gemm = lambda: True
    torch.cuda.Stream = _NoStream  # type: ignore[misc]
    torch.cuda.Event = _NoStream  # type: ignore[misc]
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    init_distributed_environment(
        world_size=1,
        rank=0,
        local_rank=0,
        distributed_init_method=f"tcp://127.0.0.1:{os.environ.get('ORACLE_DIST_PORT', '29533')}",
        backend="gloo",
    )
    with set_current_vllm_config(VllmConfig()):
        initialize_model_parallel(1, 1)
    _register_remote_configs()


_LAYER_INDEX = re.compile(r"\.(?:layers|layer|h|blocks|decoder\.layers)\.(\d+)\.")
"""A layer's index in its module name (``encoder.layer.<i>.`` is BERT's naming)."""


_TOP_INDEX = re.compile(r"^model\.(\d+)\.")
"""Falcon-H1 registers its Mamba mixers as ``model.<num_hidden_layers + i>.mixer``."""


def _layer_index(name: str) -> int | None:
    match = _LAYER_INDEX.search("." + name) or _TOP_INDEX.search(name)
    return int(match.group(1)) if match else None


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _spec_record(spec: Any) -> dict[str, Any]:
    from vllm.v1 import kv_cache_interface as kvi

    record: dict[str, Any] = {
        "spec": type(spec).__name__,
        "block_size": spec.block_size,
        "page_size_bytes": spec.page_size_bytes,
    }
    if isinstance(spec, kvi.AttentionSpec):
        record.update(
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            head_size_v=getattr(spec, "head_size_v", spec.head_size),
            dtype=_dtype_name(spec.dtype),
        )
        for key in ("sliding_window", "attention_chunk_size"):
            value = getattr(spec, key, None)
            if value is not None:
                record[key] = value
        for key in ("cache_dtype_str", "sink_len", "compress_ratio"):
            value = getattr(spec, key, None)
            if value not in (None, 0, False):
                record[key] = value if isinstance(value, int | str) else str(value)
    elif isinstance(spec, kvi.MambaSpec):
        record.update(
            shapes=[list(shape) for shape in spec.shapes],
            dtypes=[_dtype_name(d) for d in spec.dtypes],
            mamba_type=str(getattr(spec.mamba_type, "value", spec.mamba_type)),
        )
        if spec.page_size_padded is not None:
            record["page_size_padded"] = spec.page_size_padded
        for key in ("num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment"):
            value = getattr(spec, key, None)
            if value:
                record[key] = value
    return record


def _prepare_dir(config_path: Path, workdir: Path) -> tuple[Path, list[str]]:
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    notes: list[str] = []
    for key in ("quantization_config", "compression_config"):
        if key in raw:
            del raw[key]
            notes.append(f"{key} removed")
    for section in ("text_config", "llm_config"):
        sub = raw.get(section)
        if isinstance(sub, dict) and "quantization_config" in sub:
            del sub["quantization_config"]
            notes.append(f"{section}.quantization_config removed")
    if raw.get("model_type") in _STAND_IN_MODEL_TYPES and "auto_map" in raw:
        del raw["auto_map"]
        notes.append("auto_map removed (stand-in config class for the remote code)")
    target = workdir / config_path.stem
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    (target / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    return target, notes


def _groups(vllm_config: Any, specs: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        from vllm.v1.core import kv_cache_planning as planning
    except ImportError:  # before 0.29.0 the planning lived in kv_cache_utils
        from vllm.v1.core import kv_cache_utils as planning

    out = []
    for group in planning.get_kv_cache_groups(vllm_config, dict(specs)):
        spec = group.kv_cache_spec
        out.append(
            {
                "spec": type(spec).__name__,
                "block_size": spec.block_size,
                "page_size_bytes": spec.page_size_bytes,
                "layers": [_layer_index(n) for n in group.layer_names],
            }
        )
    return out


def _layer_specs(vllm_config: Any, layers: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every module's spec as ``GPUModelRunner.get_kv_cache_spec`` builds it (the
    module's ``get_kv_cache_spec``, then ``customize_attention_spec``), and a record
    per module (KV-sharing target, no cache, or the spec and the backend)."""
    from vllm.v1.kv_cache_interface import AttentionSpec

    try:
        from vllm.v1.worker.utils import customize_attention_spec
    except ImportError:  # releases whose runner takes the module's spec as it is
        def customize_attention_spec(backend: Any, spec: Any) -> Any:
            return spec

    specs: dict[str, Any] = {}
    records = []
    for name, module in layers.items():
        record: dict[str, Any] = {
            "name": name,
            "index": _layer_index(name),
            "module": type(module).__name__,
        }
        target = getattr(module, "kv_sharing_target_layer_name", None)
        if target:
            record["kv_sharing_target"] = _layer_index(target)
            records.append(record)
            continue
        spec = module.get_kv_cache_spec(vllm_config)
        if spec is None:
            record["spec"] = None
            records.append(record)
            continue
        if isinstance(spec, AttentionSpec):
            spec = customize_attention_spec(module.get_attn_backend(), spec)
        specs[name] = spec
        record["backend"] = module.get_attn_backend().get_name()
        record.update(_spec_record(spec))
        records.append(record)
    return specs, records


def _aligned(vllm_config: Any, layers: dict[str, Any]) -> dict[str, Any]:
    """The engine's next step once the model is built (``UniProcExecutor`` /
    ``WorkerProc`` after ``load_model``; ``EngineCore`` then validates):
    ``current_platform.update_block_size_for_backend`` (the backends' preferred
    block size, the hybrid Mamba alignment), then the specs and groups again."""
    from vllm.config import set_current_vllm_config
    from vllm.platforms import current_platform

    with set_current_vllm_config(vllm_config):
        current_platform.update_block_size_for_backend(vllm_config)
        if hasattr(vllm_config, "validate_block_size"):  # 0.33.0 (EngineCore)
            vllm_config.validate_block_size()
    cache = vllm_config.cache_config
    out: dict[str, Any] = {
        "block_size": cache.block_size,
        "mamba_cache_mode": str(cache.mamba_cache_mode),
    }
    for key in ("mamba_block_size", "mamba_page_size_padded"):
        value = getattr(cache, key, None)
        if value is not None:
            out[key] = value
    with set_current_vllm_config(vllm_config):
        specs, records = _layer_specs(vllm_config, layers)
    out["layers"] = [
        {key: r[key] for key in ("index", "spec", "block_size", "page_size_bytes") if key in r}
        | ({"prefill_checkpoint_alignment": a} if (a := r.get("prefill_checkpoint_alignment")) else {})
        for r in records if r.get("spec")
    ]
    out["groups"] = _groups(vllm_config, specs)
    return out


REFUSAL_TYPES = (ValueError, AssertionError, NotImplementedError)
"""What vLLM (or transformers, reading the config for it) raises when it refuses a
config: ``ValueError`` (pydantic's ``ValidationError`` of a config class among them),
``AssertionError``, ``NotImplementedError``."""

_ANSWERING_PACKAGES = ("vllm", "transformers", "pydantic", "pydantic_core")
"""Whose ``ValueError`` is an answer: vLLM, transformers (its config classes) and pydantic
validating vLLM's config classes."""


class HarnessError(Exception):
    """The harness, not vLLM, failed on a config: a bug to fix, never an answer."""


def _refusal(exc: BaseException) -> bool:
    """vLLM's refusal: a refusal type raised by vLLM's or transformers' own code (the
    innermost frame is theirs), itself or as the cause of what reached the harness
    (transformers' strict config validation wraps its ValueError in huggingface_hub's
    ``StrictDataclassClassValidationError``). Anything else (a missing module, a
    device access on the CPU, a stub answering the wrong thing) is the harness failing."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, REFUSAL_TYPES):
            frames = traceback.extract_tb(link.__traceback__)
            if frames:
                parts = Path(frames[-1].filename).parts
                if ("site-packages" in parts
                        and parts[parts.index("site-packages") + 1] in _ANSWERING_PACKAGES):
                    return True
        link = link.__cause__ or link.__context__
    return False


def reference(config_path: Path, workdir: Path, *,
              enable_prefix_caching: bool | None = None) -> dict[str, Any]:
    """vLLM's answer for one config.json (or vLLM's refusal); raises
    :class:`HarnessError` when the harness fails."""
    import torch
    import vllm
    from vllm.config import set_current_vllm_config
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.utils.torch_utils import set_default_torch_dtype
    try:
        from vllm.v1.attention.backends.utils import (
            get_supported_kv_cache_layouts,
            resolve_kv_cache_layout,
        )
    except ImportError:  # before the per-layer layouts (0.25.1-0.28.0): not recorded
        get_supported_kv_cache_layouts = resolve_kv_cache_layout = None

    model_dir, notes = _prepare_dir(config_path, workdir)
    out: dict[str, Any] = {
        "config": _relative(config_path),
        "vllm_version": vllm.__version__,
        "capability": ".".join(map(str, CAPABILITY)),
    }
    if notes:
        out["notes"] = notes
    if enable_prefix_caching is not None:
        out["enable_prefix_caching"] = enable_prefix_caching
    stage = "EngineArgs"
    try:
        stage = "EngineArgs.create_engine_config"
        vllm_config = EngineArgs(
            model=str(model_dir),
            skip_tokenizer_init=True,
            dtype=MODEL_DTYPE,
            max_model_len=_max_len(model_dir),
            **({} if enable_prefix_caching is None
               else {"enable_prefix_caching": enable_prefix_caching}),
        ).create_engine_config()
        model_config = vllm_config.model_config
        stage = "model class"
        model_cls, arch = get_model_architecture(model_config)
        out["architecture"] = arch
        out["model_class"] = f"{model_cls.__module__}.{model_cls.__qualname__}"
        out["dtype"] = _dtype_name(model_config.dtype)
        out["block_size"] = vllm_config.cache_config.block_size
        padded = getattr(vllm_config.cache_config, "mamba_page_size_padded", None)
        if padded:
            out["mamba_page_size_padded"] = padded
        stage = "model construction"
        with (
            set_current_vllm_config(vllm_config),
            set_default_torch_dtype(model_config.dtype),
            torch.device("meta"),
            _device_tensors_on_meta(),
        ):
            model_cls(vllm_config=vllm_config, prefix="")
        stage = "get_kv_cache_spec"
        layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
        specs, out["layers"] = _layer_specs(vllm_config, layers)
        stage = "resolve_kv_cache_layout"
        if resolve_kv_cache_layout is not None:
            backends = {m.get_attn_backend() for n, m in layers.items() if n in specs}
            layouts = [layout.name for layout in get_supported_kv_cache_layouts(backends)]
            out["kv_cache_layout"] = resolve_kv_cache_layout(
                vllm_config, [layouts], list(specs.values())
            ).name
        stage = "get_kv_cache_groups"
        try:
            out["groups"] = _groups(vllm_config, specs)
        except REFUSAL_TYPES as exc:
            # the engine groups only after the alignment; before it a hybrid's pages
            # may not unify (vLLM 0.26.0-0.28.0 raise): recorded, not a refusal
            out["groups"] = None
            out["groups_error"] = f"{type(exc).__name__}: {exc}"[:500]
        stage = "update_block_size_for_backend"
        out["aligned"] = _aligned(vllm_config, layers)
        out["status"] = "ok"
    except Exception as exc:
        tail = traceback.format_exc().splitlines()[-12:]
        if not _refusal(exc):
            raise HarnessError(
                f"{out['config']}: the harness failed at {stage}: {type(exc).__name__}: {exc}"
                + "\n" + "\n".join(tail)
            ) from exc
        out["status"] = "refused"  # vLLM's refusal is an answer too
        out["stage"] = stage
        out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        out["traceback_tail"] = tail
    return out


def _max_len(model_dir: Path) -> int:
    """``DEFAULT_MAX_MODEL_LEN``, or the config's own maximum when smaller
    (vLLM refuses a longer ``max_model_len``)."""
    raw = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    for key in ("max_position_embeddings", "seq_length", "n_positions"):
        value = text.get(key) or raw.get(key)
        if isinstance(value, int | float) and value > 0:
            return min(DEFAULT_MAX_MODEL_LEN, int(value))
    return DEFAULT_MAX_MODEL_LEN


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    parser.add_argument("--merge", action="store_true",
                        help="keep the answers already in --out for configs not given")
    parser.add_argument("--enable-prefix-caching", action="store_true",
                        help="--enable-prefix-caching (else vLLM's default for the model)")
    args = parser.parse_args(argv)
    _bootstrap()
    results = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(set(args.configs)):
            if path.stem in {"broken_layer_types"}:
                continue
            try:
                result = reference(path, Path(tmp), enable_prefix_caching=(
                    True if args.enable_prefix_caching else None))
            except HarnessError as exc:
                failures.append(str(exc))
                print(f"HARNESS FAILURE {exc}", file=sys.stderr)
                continue
            results.append(result)
            summary = result.get("error") or f"{len(result['layers'])} layers"
            print(f"{result['status']:7} {path}: {summary}"[:300], file=sys.stderr)
    if failures:
        print(f"{len(failures)} harness failure(s): nothing written (fix the harness; a "
              "failure is never recorded as vLLM's answer)", file=sys.stderr)
        return 1
    if args.merge and args.out.is_file():
        fresh = {r["config"] for r in results}
        with gzip.open(args.out, "rt", encoding="utf-8") as handle:
            kept = [json.loads(line) for line in handle if line.strip()]
        results = sorted([r for r in kept if r["config"] not in fresh] + results,
                         key=lambda r: str(r["config"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(args.out.open("wb"))
        gz = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))
        for result in results:
            gz.write((json.dumps(result, separators=(",", ":"), sort_keys=True) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
