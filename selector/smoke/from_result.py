"""Turn a check's plan into smoke plans: the groups that run FlashAttention or FlashInfer,
with exactly the negotiated backend, FlashAttention version, kernel block size, KV
layout and CUDA-graph mode (pure; no torch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selector.catalog import Catalog
from selector.platforms import DEFAULT_PLATFORM
from selector.result import SolveResult
from selector.smoke.contract import load_contract
from selector.smoke.plan import FP8_KV_DTYPES, SmokePlan, kernel_calls_file

__all__ = [
    "FP8_SMOKE_SCALES",
    "SMOKE_BACKENDS",
    "layout_alias",
    "parity_backends",
    "parity_choice",
    "plans_from_model",
    "plans_from_result",
    "smoke_plan",
]

SMOKE_BACKENDS = ("FLASH_ATTN", "FLASHINFER")
"""Backends compared with each other in a parity run (same data, same answer)."""
FP8_SMOKE_SCALES = (1.0, 0.5, 2.0)
"""(q, k, v) per-tensor scales of an fp8 smoke plan: vLLM passes ``layer._k_scale_float``
etc. (1.0 unless the checkpoint is calibrated); the smoke uses non-unit K and V scales so a
kernel that ignores or swaps a scale fails."""

def layout_alias(layout: str, catalog: Catalog) -> str:
    """vLLM's 5-D layout as the per-layer NHD/HND view the kernels see
    (``schemas/kv-layouts.yaml``; NHD for a layout that has none)."""
    return catalog.per_layer_layouts.get(layout, "NHD")


def smoke_plan(result: SolveResult, backend: str, *, catalog: Catalog, name: str,
               sliding_window: int | None, logits_soft_cap: float | None,
               kernel_block_size: int | None = None, kv_layout: str | None = None,
               cudagraph_mode: str | None = None) -> SmokePlan:
    """The plan of ``backend``, which ``result`` selected (pin it when solving:
    :func:`selector.solver.pinned`)."""
    if result.selected != backend:
        raise ValueError(f"the result selected {result.selected}, not {backend}: "
                         "solve with the backend pinned first")
    facts = result.facts
    runtime = result.runtime
    assert runtime is not None
    fa = runtime.fact("fa_version")
    fa_version = fa.value if fa is not None else None
    if backend == "FLASH_ATTN_MLA" and fa_version is None and int(facts.get("cc") or 0) // 10 == 9:
        fa_version = 3  # get_flash_attn_version() on SM90 (FLASH_ATTN_MLA runs FA3 only)
    q_heads = int(facts.get("model_num_q_heads") or facts.get("num_heads") or 0)
    kv_heads = int(facts.get("model_num_kv_heads") or q_heads)
    kv_cache_dtype = str(facts.get("kv_cache_dtype") or "auto")
    fp8 = kv_cache_dtype in FP8_KV_DTYPES
    q_scale, k_scale, v_scale = FP8_SMOKE_SCALES if fp8 else (1.0, 1.0, 1.0)
    mla: dict[str, Any] = {}
    if facts.get("use_mla"):
        rank, rope = int(facts["kv_lora_rank"]), int(facts["qk_rope_head_dim"])
        nope = int(facts.get("qk_nope_head_dim") or 0)
        # vLLM's MLA layer scale: (qk_nope_head_dim + qk_rope_head_dim) ** -0.5
        mla = {"kv_lora_rank": rank, "qk_rope_head_dim": rope,
               "softmax_scale": (nope + rope) ** -0.5 if nope else None}
        kv_heads = 1
    return SmokePlan(
        name=name,
        backend=backend,
        engine=result.engine,
        kernel_calls=kernel_calls_file(result.engine, catalog),
        platform=result.platform or DEFAULT_PLATFORM,
        capability=int(facts.get("cc") or 90),
        fa_version=fa_version if backend in ("FLASH_ATTN", "FLASH_ATTN_MLA") else None,
        kernel_block_size=kernel_block_size or runtime.block_size,
        kv_layout=layout_alias(kv_layout or runtime.kv_layout, catalog),
        cudagraph_mode=(cudagraph_mode or runtime.cudagraph_mode),
        num_q_heads=q_heads,
        num_kv_heads=kv_heads,
        head_size=int(facts["head_size"]),
        dtype=facts["dtype"],
        kv_cache_dtype=kv_cache_dtype,
        q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
        has_sinks=bool(facts.get("has_sink")),
        sliding_window=sliding_window,
        logits_soft_cap=logits_soft_cap,
        reorder_batch_threshold=runtime.reorder_batch_threshold or 1,
        **mla,
    )


def parity_backends(result: SolveResult) -> list[str]:
    """The other parity backends that are valid too when ``result`` selected one (the
    report compares FlashAttention with FlashInfer)."""
    if result.selected not in SMOKE_BACKENDS:
        return []
    return [backend for backend in SMOKE_BACKENDS
            if backend != result.selected and result.verdict(backend).valid]


def parity_choice(result: SolveResult, catalog: Catalog, parity: bool | None = None
                  ) -> tuple[list[str], list[str]]:
    """The parity backends to run and those left out, by ``parity``: ``True`` runs every
    :func:`parity_backends`, ``False`` none, ``None`` (the default) those whose kernels run
    without a compile (a backend whose every provider JIT-compiles on first use, FlashInfer,
    is left out: its first use costs 20-110 s; ``kernel-calls.yaml``'s
    ``compiles_on_first_use``)."""
    candidates = parity_backends(result)
    if parity is True:
        return candidates, []
    if parity is False:
        return [], candidates
    contract = load_contract(kernel_calls_file(result.engine, catalog))
    run = [b for b in candidates if not contract.compiles_on_first_use(b)]
    return run, [b for b in candidates if b not in run]


def plans_from_result(result: SolveResult, *, catalog: Catalog, name: str, sliding_window: int | None = None,
                      logits_soft_cap: float | None = None,
                      parity: Mapping[str, SolveResult] | None = None) -> list[SmokePlan]:
    """The selected backend's plan, plus one per parity backend in ``parity`` (backend ->
    the result solved with it pinned; each must be one of :func:`parity_backends`)."""
    if not result.selected:
        return []
    plans = [smoke_plan(result, result.selected, catalog=catalog, name=f"{name} {result.selected}",
                        sliding_window=sliding_window, logits_soft_cap=logits_soft_cap)]
    pinned_results = parity or {}
    for backend in [b for b in parity_backends(result) if b in pinned_results]:
        plans.append(smoke_plan(pinned_results[backend], backend, catalog=catalog,
                                name=f"{name} {backend} (parity)",
                                sliding_window=sliding_window, logits_soft_cap=logits_soft_cap))
    return plans


def plans_from_model(check: Any, catalog: Catalog) -> list[SmokePlan]:
    """One plan per attention group of a model check (``ModelCheckResult``) that runs a
    smoke backend, with the group's negotiated kernel block size, layout and graph mode
    (groups of a backend the solver did not select for their layers, the Mamba / GDN
    state groups and the sparse indexer's cache, have no attention kernel and get none)."""
    plan = check.plan
    if plan is None:
        return []
    layout = plan.layout.layout if plan.layout is not None else "LBNHC"
    mode = str(plan.cudagraph.resolved) if plan.cudagraph is not None else None
    out: list[SmokePlan] = []
    seen: set[tuple[Any, ...]] = set()
    for group in plan.groups:
        for attention in group.attention_groups:
            backend = attention.backend.name
            first = int(attention.layers.split(",")[0].split("-")[0])
            layer = check.model.layer(first)
            selection = next((s for s in check.selections if first in s.layers), None)
            if selection is None or selection.result.selected != backend:
                continue  # a state group (Mamba, GDN) or a side cache (the sparse indexer)
            key = (backend, attention.kernel_block_size, layer.sliding_window, layer.head_size)
            if key in seen:
                continue
            seen.add(key)
            out.append(smoke_plan(selection.result, backend, catalog=catalog,
                             name=f"kv{group.index} layers {attention.layers} {backend}",
                             sliding_window=layer.sliding_window,
                             logits_soft_cap=layer.logits_soft_cap,
                             kernel_block_size=attention.kernel_block_size or group.manager_block_size,
                             kv_layout=layout, cudagraph_mode=mode))
    return out
