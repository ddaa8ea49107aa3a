"""Turn a check's plan into smoke plans: the groups that run FlashAttention or FlashInfer,
with exactly the negotiated backend, FlashAttention version, kernel block size, KV
layout and CUDA-graph mode (pure; no torch)."""

from __future__ import annotations

from typing import Any

from selector.result import SolveResult
from selector.smoke.plan import SmokePlan

__all__ = ["SMOKE_BACKENDS", "layout_alias", "plans_from_model", "plans_from_result"]

SMOKE_BACKENDS = ("FLASH_ATTN", "FLASHINFER")
"""The backends the smoke check has kernel runners for."""

_LAYOUT_ALIAS = {"LBNHC": "NHD", "LBHNC": "HND", "BLNHC": "NHD", "BLHNC": "HND"}


def layout_alias(layout: str) -> str:
    """vLLM's 5-D layout as the per-layer NHD/HND view the kernels see."""
    return _LAYOUT_ALIAS.get(layout, "NHD")


def _plan(result: SolveResult, backend: str, *, name: str, sliding_window: int | None,
          logits_soft_cap: float | None, kernel_block_size: int | None = None,
          kv_layout: str | None = None, cudagraph_mode: str | None = None) -> SmokePlan:
    from selector.solver import solve

    facts = result.facts
    if result.selected != backend:
        result = solve(facts, engine=result.engine, attention_backend=backend, suggest=False)
    runtime = result.runtime
    assert runtime is not None
    fa = runtime.fact("fa_version")
    q_heads = int(facts.get("model_num_q_heads") or 0)
    kv_heads = int(facts.get("model_num_kv_heads") or q_heads)
    return SmokePlan(
        name=name,
        backend=backend,
        fa_version=fa.value if fa is not None and backend == "FLASH_ATTN" else None,
        kernel_block_size=kernel_block_size or runtime.block_size,
        kv_layout=layout_alias(kv_layout or runtime.kv_layout),
        cudagraph_mode=(cudagraph_mode or runtime.cudagraph_mode),
        num_q_heads=q_heads,
        num_kv_heads=kv_heads,
        head_size=int(facts["head_size"]),
        dtype=facts["dtype"],
        kv_cache_dtype=str(facts.get("kv_cache_dtype") or "auto"),
        sliding_window=sliding_window,
        logits_soft_cap=logits_soft_cap,
        reorder_batch_threshold=runtime.reorder_batch_threshold or 1,
    )


def plans_from_result(result: SolveResult, *, name: str, sliding_window: int | None = None,
                      logits_soft_cap: float | None = None) -> list[SmokePlan]:
    """The selected backend's plan, plus the other smoke backend when it is valid too
    (so the report can compare FlashAttention with FlashInfer)."""
    plans = []
    if result.selected in SMOKE_BACKENDS:
        plans.append(_plan(result, result.selected, name=f"{name} {result.selected}",
                           sliding_window=sliding_window, logits_soft_cap=logits_soft_cap))
    for backend in SMOKE_BACKENDS:
        if backend != result.selected and result.verdict(backend).valid and plans:
            plans.append(_plan(result, backend, name=f"{name} {backend} (parity)",
                               sliding_window=sliding_window, logits_soft_cap=logits_soft_cap))
    return plans


def plans_from_model(check: Any) -> list[SmokePlan]:
    """One plan per attention group of a model check (``ModelCheckResult``) that runs a
    smoke backend, with the group's negotiated kernel block size, layout and graph mode."""
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
            if backend not in SMOKE_BACKENDS:
                continue
            first = int(attention.layers.split(",")[0].split("-")[0])
            selection = check.selection_of(first)
            layer = check.model.layer(first)
            key = (backend, attention.kernel_block_size, layer.sliding_window, layer.head_size)
            if key in seen:
                continue
            seen.add(key)
            out.append(_plan(selection.result, backend,
                             name=f"kv{group.index} layers {attention.layers} {backend}",
                             sliding_window=layer.sliding_window,
                             logits_soft_cap=layer.logits_soft_cap,
                             kernel_block_size=attention.kernel_block_size or group.manager_block_size,
                             kv_layout=layout, cudagraph_mode=mode))
    return out
