#!/usr/bin/env python3
"""Compare ``selector.kv`` with vLLM's own KV-cache functions.

Run with the oracle interpreter (vLLM 0.33.0 installed, no GPU needed)::

    /work/oracle/.venv/bin/python tools/kv_oracle.py [--json report.json] [-v]

For every preset x backend set x option set it plans the model with
``selector.kv.plan_model`` and asks vLLM, through its unmodified functions,
the same questions:

* ``Platform._preferred_block_size_for_backends`` and
  ``Platform._align_hybrid_block_size`` (manager block size, Mamba padding);
* ``KVCacheSpec.page_size_bytes`` for every layer spec;
* ``get_supported_kv_cache_layouts`` and ``resolve_kv_cache_layout``;
* ``get_kv_cache_groups`` (grouping, page unification, padding warnings);
* ``select_common_block_size`` per group;
* ``_get_kv_cache_bytes_per_block`` and ``max_memory_usage_bytes`` (capacity);
* ``CompilationConfig.resolve_cudagraph_mode_and_sizes`` (resolved mode, warnings,
  error), also over the whole (mode x support x spec-decode x compile) grid.

Backends are stand-in ``AttentionBackend`` subclasses carrying the same kernel
block sizes and layouts as the ``BackendKVFacts`` given to the planner, so
vLLM's own ``supports_block_size`` / ``get_preferred_block_size`` run. The
harness supplies duck-typed config objects; vLLM code is called, never copied.
Exit status 0 when everything agrees.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import oracle  # noqa: F401  (the checkout's selector/ first on sys.path)
import torch
from kv_oracle_backends import SCENARIO
from vllm.config.compilation import (
    CompilationConfig,
    CompilationMode,
    CUDAGraphMode,
)
from vllm.model_executor.layers.mamba.mamba_utils import (
    MambaStateDtypeCalculator,
    MambaStateShapeCalculator,
)
from vllm.model_executor.models import ModelRegistry
from vllm.platforms.interface import Platform
from vllm.v1 import kv_cache_interface as kvi
from vllm.v1.attention import backend as vbackend
from vllm.v1.attention.backends import utils as vutils
from vllm.v1.core import kv_cache_planning as planning
from vllm.v1.kv_cache_layout import KVCacheLayout
from vllm.v1.kv_cache_spec_registry import KVCacheSpecRegistry
from vllm.v1.worker.utils import select_common_block_size

from selector.catalog import load_catalog
from selector.kv import BackendKVFacts, KVOptions, ModelPlan, MultipleOf, plan_model
from selector.kv.cudagraph import resolve_cudagraph_mode
from selector.kv.specs import AnySpec
from selector.models import LayerFacts, ModelFacts, list_presets, load_model

TORCH_DTYPES = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "fp8": torch.uint8,
    "fp8_e4m3": torch.uint8,
    "fp8_e5m2": torch.uint8,
    "uint8": torch.uint8,
    "fp8_ds_mla": torch.uint8,
    "nvfp4_ds_mla": torch.uint8,
    "nvfp4": torch.uint8,
}


def _m(n: int) -> MultipleOf:
    return MultipleOf(multiple_of=n)


def _b(name: str, cls: str, sizes: tuple[Any, ...], cg: str, **kw: Any) -> BackendKVFacts:
    return BackendKVFacts(
        name=name, class_name=cls, kernel_block_sizes=sizes, cudagraph_support=cg, **kw
    )  # type: ignore[arg-type]


BACKEND_SETS: dict[str, dict[str, BackendKVFacts]] = {
    "FA3(H100)": {
        "attn": _b("FLASH_ATTN", "FlashAttentionBackend", (_m(16),), "ALWAYS"),
        "mla": _b(
            "FLASHMLA",
            "FlashMLABackend",
            (64,),
            "UNIFORM_BATCH",
            reorder_batch_threshold=128,
            is_mla=True,
        ),
        "sparse": _b(
            "FLASHMLA_SPARSE", "FlashMLASparseBackend", (_m(64),), "UNIFORM_BATCH", is_mla=True
        ),
    },
    "FLASHINFER(SM90)": {
        "attn": _b(
            "FLASHINFER",
            "FlashInferBackend",
            (16, 32, 64),
            "UNIFORM_BATCH",
            reorder_batch_threshold=1,
        ),
        "mla": _b(
            "CUTLASS_MLA", "CutlassMLABackend", (128,), "UNIFORM_SINGLE_TOKEN_DECODE", is_mla=True
        ),
        "sparse": _b(
            "FLASHINFER_MLA_SPARSE",
            "FlashInferMLASparseTRTLLMBackend",
            (_m(32),),
            "UNIFORM_BATCH",
            is_mla=True,
        ),
    },
    "FLASHINFER(SM100)": {
        "attn": _b(
            "FLASHINFER",
            "FlashInferBackend",
            (16, 32, 64, 128, 256, 512, 1024),
            "UNIFORM_BATCH",
            supported_layouts=("LBHNC", "BLHNC"),
        ),
        "mla": _b("FLASHINFER_MLA", "FlashInferMLABackend", (32, 64), "ALWAYS", is_mla=True),
        "sparse": _b(
            "FLASHINFER_MLA_SPARSE",
            "FlashInferMLASparseTRTLLMBackend",
            (_m(32),),
            "UNIFORM_BATCH",
            is_mla=True,
        ),
    },
    "TRITON+FLEX": {
        "attn": _b("TRITON_ATTN", "TritonAttentionBackend", (_m(16),), "ALWAYS"),
        "sw": _b(
            "FLEX_ATTENTION",
            "FlexAttentionBackend",
            (_m(16),),
            "NEVER",
            supported_layouts=("LBNHC",),
        ),
        "mla": _b("TRITON_MLA", "TritonMLABackend", (_m(16),), "UNIFORM_BATCH", is_mla=True),
        "sparse": _b(
            "FLASHMLA_SPARSE", "FlashMLASparseBackend", (64,), "UNIFORM_BATCH", is_mla=True
        ),
    },
}

BACKEND_SETS["FLEX(SW)+FLASHINFER(SM100)"] = {
    **BACKEND_SETS["FLASHINFER(SM100)"],
    "sw": BACKEND_SETS["TRITON+FLEX"]["sw"],
}

OPTION_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "block128": {"block_size": 128},
    "fp8+spec2": {"kv_cache_dtype": "fp8", "num_speculative_tokens": 2},
    "nocache+FULL": {"enable_prefix_caching": False, "cudagraph_mode": "FULL"},
    "block48": {"block_size": 48},
}


def chooser(backends: dict[str, BackendKVFacts]) -> Callable[[LayerFacts], BackendKVFacts]:
    def choose(layer: LayerFacts) -> BackendKVFacts:
        if layer.kind == "mla":
            return backends["sparse" if layer.is_sparse else "mla"]
        if layer.sliding_window and "sw" in backends:
            return backends["sw"]
        return backends["attn"]

    return choose


# ---------------------------------------------------------------- stand-ins


_CLASSES: dict[BackendKVFacts, type] = {}


def vllm_backend(facts: BackendKVFacts) -> type:
    """An ``AttentionBackend`` subclass declaring the same kernel sizes and layouts."""
    key = facts
    if key not in _CLASSES:
        sizes = [
            vbackend.MultipleOf(r.multiple_of) if isinstance(r, MultipleOf) else r
            for r in facts.kernel_block_sizes
        ]
        layouts = (
            None
            if facts.supported_layouts is None
            else tuple(KVCacheLayout[name] for name in facts.supported_layouts)
        )
        _CLASSES[key] = type(
            facts.class_name,
            (vbackend.AttentionBackend,),
            {
                "get_name": staticmethod(lambda n=facts.name: n),
                "get_supported_kernel_block_sizes": staticmethod(
                    lambda kv_cache_spec=None, s=sizes: list(s)
                ),
                "supported_kv_cache_layouts": classmethod(lambda cls, lay=layouts: lay),
                "is_ssm": classmethod(lambda cls, ssm=facts.is_ssm: ssm),
                "is_mla": classmethod(lambda cls, mla=facts.is_mla: mla),
                "get_impl_cls": staticmethod(lambda: None),
                "get_builder_cls": staticmethod(lambda: None),
            },
        )
    return _CLASSES[key]


def vllm_spec(spec: AnySpec) -> kvi.KVCacheSpec:
    """The vLLM spec object with the same fields (page size computed by vLLM)."""
    if spec.kind == "mamba":
        return kvi.MambaSpec(
            block_size=spec.block_size,
            shapes=spec.shapes,
            dtypes=tuple(TORCH_DTYPES[d] for d in spec.dtypes),
            page_size_padded=spec.page_size_padded,
            mamba_cache_mode=spec.mamba_cache_mode,
            num_speculative_blocks=spec.num_speculative_blocks,
            num_prefill_checkpoint_blocks=spec.num_prefill_checkpoint_blocks,
            prefill_checkpoint_alignment=spec.prefill_checkpoint_alignment,
        )
    common: dict[str, Any] = {
        "block_size": spec.block_size,
        "num_kv_heads": spec.num_kv_heads,
        "head_size": spec.head_size,
        "dtype": TORCH_DTYPES[spec.kv_cache_dtype],
        "kv_quant_mode": kvi.get_kv_quant_mode(spec.kv_cache_dtype),
        "page_size_padded": spec.page_size_padded,
        "num_head_slots": spec.num_head_slots,
        "state_content_bytes": spec.state_content_bytes,
        "block_stride_alignment": (
            None
            if spec.block_stride_alignment is None
            else vbackend.MultipleOf(spec.block_stride_alignment)
        ),
    }
    if spec.kind == "mla_attention":
        return kvi.MLAAttentionSpec(
            **common,
            max_tp_shards=1,
            cache_dtype_str=spec.cache_dtype_str,
            topk_buffer_width=spec.topk_buffer_width,
            cache_role=kvi.SparseCacheRole(spec.cache_role),
            is_index_group_leader=spec.is_index_group_leader,
        )
    common["head_size_v"] = spec.head_size_v
    if spec.kind == "sliding_window":
        return kvi.SlidingWindowSpec(**common, sliding_window=spec.sliding_window)
    if spec.kind == "chunked_local_attention":
        return kvi.ChunkedLocalAttentionSpec(
            **common, attention_chunk_size=spec.attention_chunk_size
        )
    if spec.kind == "cross_attention":
        return kvi.CrossAttentionSpec(**common)
    return kvi.FullAttentionSpec(**common)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured(*names: str) -> Iterator[list[str]]:
    handler = _Capture()
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield handler.messages
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def fake_config(
    model: ModelFacts, options: KVOptions, plan: ModelPlan, backends: list[type]
) -> Any:
    """Duck-typed ``VllmConfig`` with the fields the called functions read."""
    first_attn = next(layer for layer in model.layers if layer.is_attention)
    ssm = next((layer for layer in model.layers if layer.is_ssm), None)
    hf = SimpleNamespace()
    arch = model.architecture
    if ssm is not None and ssm.ssm is not None and ssm.ssm.ssm_type == "mamba1":
        dims = ssm.ssm
        hf = SimpleNamespace(
            hidden_size=model.hidden_size,
            mamba_expand=dims.intermediate_size // model.hidden_size,
            mamba_d_state=dims.state_size,
            mamba_d_conv=dims.conv_kernel,
        )
    elif ssm is not None and ssm.ssm is not None:
        dims = ssm.ssm
        hf = SimpleNamespace(
            linear_num_key_heads=dims.num_k_heads,
            linear_num_value_heads=dims.num_v_heads,
            linear_key_head_dim=dims.head_k_dim,
            linear_value_head_dim=dims.head_v_dim,
            linear_conv_kernel_dim=dims.conv_kernel,
        )
    decision = plan.block_size
    mode = decision.mamba_cache_mode if decision else "none"
    block = options.block_size or (decision.preferred if decision else 16)
    model_config = SimpleNamespace(
        architecture=arch,
        hf_config=hf,
        hf_text_config=hf,
        use_mla=model.use_mla,
        model_impl="vllm",
        runner_type="generate",
        convert_type="none",
        dtype=TORCH_DTYPES[model.runtime_dtype],
        max_model_len=options.max_model_len or model.max_position_embeddings,
        is_hybrid=model.is_hybrid,
        get_num_kv_heads=lambda pc: first_attn.num_kv_heads,
        get_head_size=lambda: first_attn.head_size,
    )
    cache_config = SimpleNamespace(
        block_size=block,
        cache_dtype=options.kv_cache_dtype,
        mamba_cache_mode=mode,
        mamba_page_size_padded=None,
        mamba_block_size=None,
        mamba_cache_dtype=options.mamba_cache_dtype,
        mamba_ssm_cache_dtype=options.mamba_ssm_cache_dtype,
        kv_cache_dtype_skip_layers=[],
        user_specified_block_size=options.block_size is not None,
        kv_cache_layout=None,
        get_resolved_kv_cache_layout=lambda: (
            KVCacheLayout[plan.layout.layout] if plan.layout else KVCacheLayout.LBNHC
        ),
    )
    spec_config = (
        SimpleNamespace(num_speculative_tokens=options.num_speculative_tokens)
        if options.num_speculative_tokens
        else None
    )
    return SimpleNamespace(
        model_config=model_config,
        cache_config=cache_config,
        parallel_config=SimpleNamespace(
            tensor_parallel_size=model.tp_size, decode_context_parallel_size=1
        ),
        scheduler_config=SimpleNamespace(
            disable_hybrid_kv_cache_manager=False,
            max_num_batched_tokens=options.max_num_batched_tokens,
        ),
        attention_config=SimpleNamespace(hisparse_config=None),
        kv_transfer_config=None,
        compilation_config=SimpleNamespace(static_forward_context={}),
        speculative_config=spec_config,
        max_in_flight_tokens=options.max_in_flight_tokens,
        num_speculative_tokens=options.num_speculative_tokens,
        _backends=backends,
    )


class _JambaStandIn:
    """``JambaForCausalLM``'s two state classmethods, calling vLLM's calculators
    with the same arguments (the real module needs packages the oracle venv lacks)."""

    @classmethod
    def get_mamba_state_shape_from_config(cls, cfg: Any) -> Any:
        hf = cfg.model_config.hf_config
        return MambaStateShapeCalculator.mamba1_state_shape(
            tp_world_size=cfg.parallel_config.tensor_parallel_size,
            intermediate_size=hf.mamba_expand * hf.hidden_size,
            state_size=hf.mamba_d_state,
            conv_kernel=hf.mamba_d_conv,
        )

    @classmethod
    def get_mamba_state_dtype_from_config(cls, cfg: Any) -> Any:
        return MambaStateDtypeCalculator.mamba1_state_dtype(
            cfg.model_config.dtype,
            cfg.cache_config.mamba_cache_dtype,
            cfg.cache_config.mamba_ssm_cache_dtype,
        )


class _Qwen3NextStandIn:
    """``Qwen3NextForCausalLM``'s two state classmethods (see ``_JambaStandIn``)."""

    @classmethod
    def get_mamba_state_shape_from_config(cls, cfg: Any) -> Any:
        hf = cfg.model_config.hf_text_config
        spec = cfg.speculative_config.num_speculative_tokens if cfg.speculative_config else 0
        return MambaStateShapeCalculator.gated_delta_net_state_shape(
            cfg.parallel_config.tensor_parallel_size,
            hf.linear_num_key_heads,
            hf.linear_num_value_heads,
            hf.linear_key_head_dim,
            hf.linear_value_head_dim,
            hf.linear_conv_kernel_dim,
            spec,
        )

    @classmethod
    def get_mamba_state_dtype_from_config(cls, cfg: Any) -> Any:
        return MambaStateDtypeCalculator.gated_delta_net_state_dtype(
            cfg.model_config.dtype,
            cfg.cache_config.mamba_cache_dtype,
            cfg.cache_config.mamba_ssm_cache_dtype,
        )


STAND_INS = {"JambaForCausalLM": _JambaStandIn, "Qwen3NextForCausalLM": _Qwen3NextStandIn}


# ---------------------------------------------------------------- checks


class Report:
    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}
        self.mismatches: list[dict[str, Any]] = []

    def check(self, what: str, scenario: str, ours: Any, theirs: Any) -> None:
        ok = ours == theirs
        tally = self.counts.setdefault(what, [0, 0])
        tally[0 if ok else 1] += 1
        if not ok:
            self.mismatches.append(
                {
                    "check": what,
                    "scenario": scenario,
                    "attn_select": repr(ours),
                    "vllm": repr(theirs),
                }
            )


def _block_size(
    report: Report, name: str, cfg: Any, plan: ModelPlan, *, options: KVOptions, model: ModelFacts
) -> None:
    if plan.block_size is None:
        return
    non_ssm = [b for b in cfg._backends if not b.is_ssm()]
    if options.block_size is None:
        theirs = Platform._preferred_block_size_for_backends(non_ssm, 16, cfg)
        report.check("preferred_block_size", name, plan.block_size.preferred, theirs)
    if model.is_hybrid:
        cfg.cache_config.block_size = plan.block_size.preferred
        original = Platform._find_non_ssm_backends
        resolve = ModelRegistry.resolve_model_cls
        Platform._find_non_ssm_backends = classmethod(lambda cls, c: non_ssm)  # type: ignore
        ModelRegistry.resolve_model_cls = lambda arch, model_config: (  # type: ignore
            STAND_INS[arch],
            arch,
        )
        try:
            Platform._align_hybrid_block_size(cfg, non_ssm[0])
        finally:
            Platform._find_non_ssm_backends = original  # type: ignore[method-assign]
            ModelRegistry.resolve_model_cls = resolve  # type: ignore[method-assign]
        hybrid = plan.block_size.hybrid
        ours = (plan.block_size.block_size, hybrid.mamba_page_size_padded if hybrid else None)
        theirs = (cfg.cache_config.block_size, cfg.cache_config.mamba_page_size_padded)
        report.check("align_hybrid_block_size", name, ours, theirs)


def _groups(report: Report, name: str, cfg: Any, plan: ModelPlan) -> list[Any] | None:
    cached = [e for e in plan.entries if e.spec.kind != "encoder_only_attention"]
    specs = {e.name: vllm_spec(e.spec) for e in cached}
    for entry in cached:
        report.check(
            "page_size_bytes",
            f"{name} {entry.name}",
            entry.spec.page_size_bytes,
            specs[entry.name].page_size_bytes,
        )
    with captured("vllm.v1.core.kv_cache_planning") as logs:
        try:
            groups = planning.get_kv_cache_groups(cfg, dict(specs))
        except Exception as exc:
            report.check(
                "grouping", name, [e.message for e in plan.errors], [f"{type(exc).__name__}: {exc}"]
            )
            return None
    ours = [list(g.layer_names) for g in plan.groups if g.kind != "encoder_only_attention"]
    report.check("grouping", name, ours, [list(g.layer_names) for g in groups])
    report.check(
        "group_block_size",
        name,
        [g.manager_block_size for g in plan.groups],
        [g.kv_cache_spec.block_size for g in groups],
    )
    pad = [m for m in logs if m.startswith("Add ")]
    report.check("padding_warning", name, [w for w in plan.warnings if w.startswith("Add ")], pad)
    return groups


def _layout(report: Report, name: str, cfg: Any, plan: ModelPlan) -> None:
    distinct = list(dict.fromkeys(cfg._backends))
    try:
        supported = vutils.get_supported_kv_cache_layouts(distinct)
        specs = [vllm_spec(e.spec) for e in plan.entries if e.spec.kind != "encoder_only_attention"]
        cfg.cache_config.kv_cache_layout = None
        theirs = vutils.resolve_kv_cache_layout(cfg, [[x.name for x in supported]], specs).name
    except ValueError as exc:
        report.check(
            "layout", name, [e.message for e in plan.errors if e.stage == "layout"], [str(exc)]
        )
        return
    report.check("layout", name, plan.layout.layout if plan.layout else None, theirs)


def _kernel_and_capacity(
    report: Report, name: str, cfg: Any, plan: ModelPlan, groups: list[Any]
) -> None:
    for ours, group in zip(plan.groups, groups, strict=False):
        if ours.kind in ("mamba", "encoder_only_attention"):
            continue
        backends = [vllm_backend(a.backend) for a in ours.attention_groups]
        specs = [group.kv_cache_spec] * len(backends)
        try:
            theirs: Any = select_common_block_size(group.kv_cache_spec.block_size, backends, specs)
        except ValueError as exc:
            theirs = str(exc)
        report.check(
            "select_common_block_size",
            f"{name} g{ours.index}",
            ours.kernel_block_size or ours.kernel_block_error,
            theirs,
        )
    layout = KVCacheLayout[plan.layout.layout] if plan.layout else KVCacheLayout.LBNHC
    if plan.capacity is not None:
        report.check(
            "bytes_per_block",
            name,
            plan.capacity.bytes_per_block,
            planning._get_kv_cache_bytes_per_block(groups, layout),
        )
        cfg.cache_config.mamba_cache_mode = (
            plan.block_size.mamba_cache_mode if plan.block_size else "none"
        )
        theirs = sum(
            -(-g.kv_cache_spec.max_memory_usage_bytes(cfg) // g.kv_cache_spec.page_size_bytes)
            for g in groups
        )
        report.check("blocks_per_request", name, plan.capacity.blocks_per_request, theirs)


def vllm_cudagraph(
    mode: str | None,
    support: str,
    backend: str | None,
    *,
    spec_len: int,
    split: bool,
    compile_: bool,
) -> tuple[str | None, list[str], str | None]:
    cc = CompilationConfig()
    cc.cudagraph_mode = None if mode is None else CUDAGraphMode[mode]
    cc.mode = CompilationMode.VLLM_COMPILE if compile_ else CompilationMode.NONE
    cc.splitting_ops = list(cc._attention_ops) if split else []
    cc.use_inductor_graph_partition = False
    with captured("vllm.config.compilation") as logs:
        try:
            resolved = cc.resolve_cudagraph_mode_and_sizes(
                vbackend.AttentionCGSupport[support], backend, spec_len
            )
        except ValueError as exc:
            return None, list(logs), str(exc)
    return resolved.name, [m for m in logs if "cudagraph" in m.lower()], None


def _cudagraph(report: Report, name: str, plan: ModelPlan, options: KVOptions) -> None:
    cg = plan.cudagraph
    if cg is None:
        return
    theirs = vllm_cudagraph(
        options.cudagraph_mode,
        cg.min_support,
        cg.min_support_backend,
        spec_len=options.uniform_decode_query_len,
        split=options.attention_in_splitting_ops,
        compile_=options.vllm_compile,
    )
    report.check("cudagraph", name, (cg.resolved, list(cg.warnings), cg.error), theirs)


def cudagraph_grid(report: Report) -> None:
    for mode in ("FULL_AND_PIECEWISE", "FULL", "FULL_DECODE_ONLY", "PIECEWISE", "NONE", None):
        for support in ("ALWAYS", "UNIFORM_BATCH", "UNIFORM_SINGLE_TOKEN_DECODE", "NEVER"):
            for spec_len in (1, 3):
                for split in (True, False):
                    for compile_ in (True, False):
                        ours = resolve_cudagraph_mode(
                            mode,
                            support,
                            "XBackend",
                            uniform_decode_query_len=spec_len,  # type: ignore[arg-type]
                            attention_in_splitting_ops=split,
                            vllm_compile=compile_,
                        )
                        theirs = vllm_cudagraph(
                            mode,
                            support,
                            "XBackend",
                            spec_len=spec_len,
                            split=split,
                            compile_=compile_,
                        )
                        key = f"{mode}/{support}/q{spec_len}/split={split}/compile={compile_}"
                        report.check(
                            "cudagraph_grid",
                            key,
                            (ours.resolved, list(ours.warnings), ours.error),
                            theirs,
                        )


def run(verbose: bool) -> Report:
    KVCacheSpecRegistry._ensure_registered(SimpleNamespace())
    report = Report()
    for preset in list_presets():
        for set_name, backends in BACKEND_SETS.items():
            for opt_name, extra in OPTION_SETS.items():
                name = f"{preset} | {set_name} | {opt_name}"
                options = KVOptions(**{**SCENARIO, "max_model_len": 32768, **extra})
                model = load_model(preset)
                plan = plan_model(model, chooser(backends), (options).for_engine(load_catalog().engine()))
                entry_backends = [vllm_backend(e.backend) for e in plan.entries]
                cfg = fake_config(model, options, plan, list(dict.fromkeys(entry_backends)))
                _block_size(report, name, cfg, plan, options=options, model=model)
                if plan.block_size is None or not plan.entries:
                    continue
                _layout(report, name, cfg, plan)
                if plan.layout is None:
                    continue
                groups = _groups(report, name, cfg, plan)
                if groups is not None and plan.groups:
                    _kernel_and_capacity(report, name, cfg, plan, groups)
                    _cudagraph(report, name, plan, options)
                if verbose:
                    print(name, "ok" if plan.ok else plan.errors[0].message)
    cudagraph_grid(report)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    logging.getLogger("vllm").setLevel(logging.DEBUG)
    report = run(args.verbose)
    total_ok = sum(ok for ok, _ in report.counts.values())
    total_bad = sum(bad for _, bad in report.counts.values())
    width = max(len(k) for k in report.counts)
    for what, (ok, bad) in sorted(report.counts.items()):
        print(f"{what:<{width}}  agree {ok:5d}  differ {bad:4d}")
    print(f"{'TOTAL':<{width}}  agree {total_ok:5d}  differ {total_bad:4d}")
    for mismatch in report.mismatches[:20]:
        print(json.dumps(mismatch))
    if args.json:
        args.json.write_text(
            json.dumps({"counts": report.counts, "mismatches": report.mismatches}, indent=2)
        )
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
