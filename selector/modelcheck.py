"""The whole-model check: every attention layer's backend selected by the solver
with that layer's own facts, then the KV cache negotiated across all layers.

Pure: model facts + deployment facts in, a frozen :class:`ModelCheckResult` out.
Layers with identical attention facts are solved once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selector.catalog import Catalog, load_catalog
from selector.config import deployment_model
from selector.kv import BackendKVFacts, KVOptions, plan_model
from selector.model_result import LayerSelection, ModelCheckResult
from selector.models import LayerFacts, ModelFacts
from selector.result import SolveResult
from selector.solver import derive_facts, kernel_block_sizes_of, solve

__all__ = ["check_model", "check_model_deployment", "layer_facts"]


_LEGACY_LAYOUTS = {"NHD": "LBNHC", "HND": "LBHNC"}
"""Engines before the 5-D layouts (vLLM 0.25.1) name layouts NHD / HND."""


def layer_facts(layer: LayerFacts, model: ModelFacts) -> dict[str, Any]:
    """The request facts of one attention layer (vLLM's caller-side facts, section 5.1)."""
    mla = layer.mla
    facts: dict[str, Any] = {
        "head_size": layer.head_size,
        "head_size_v": None if mla or layer.head_size_v in (0, layer.head_size) else layer.head_size_v,
        "use_mla": mla is not None,
        "use_sparse": layer.indexer is not None,
        "has_sink": layer.has_sink,
        "has_sliding_window": layer.sliding_window is not None,
        "attn_type": layer.attn_type,
        "use_mm_prefix": model.is_mm_prefix_lm,
        "model_mm_prefix_lm": model.is_mm_prefix_lm,
        "num_heads": layer.num_q_heads if mla is not None else None,
        "model_present": True,
        "model_num_q_heads": layer.num_q_heads,
        "model_num_kv_heads": layer.num_kv_heads,
        "layer_alibi": layer.alibi,
        "layer_softcap": layer.logits_soft_cap is not None,
        "model_softcap": layer.logits_soft_cap is not None,
        "tp_size": model.tp_size,
    }
    if mla is not None:
        facts.update({
            "kv_lora_rank": mla.kv_lora_rank,
            "qk_nope_head_dim": mla.qk_nope_head_dim,
            "qk_rope_head_dim": mla.qk_rope_head_dim,
            "v_head_dim": mla.v_head_dim,
            "index_topk": layer.indexer.index_topk if layer.indexer else None,
        })
    return facts


def _signature(facts: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(facts.items()))


def _local_facts(result: SolveResult, catalog: Catalog) -> dict[str, Any]:
    """The selected backend's local facts (``kv_packing``, ``canonical_kv_cache_dtype``)."""
    assert result.selected is not None
    spec = catalog.engine(result.engine).backends[result.selected]
    scope = {**result.facts, **result.derived}
    derive_facts(spec.facts, scope)
    return scope


def _kv_facts(result: SolveResult, catalog: Catalog) -> BackendKVFacts:
    assert result.selected is not None and result.runtime is not None
    spec = catalog.engine(result.engine).backends[result.selected]
    scope = {**result.facts, **result.derived}
    sizes = kernel_block_sizes_of(spec, scope)
    local = _local_facts(result, catalog)
    packing = local.get("kv_packing") or "dense"
    runtime = result.runtime
    layouts = (tuple(_LEGACY_LAYOUTS.get(x, x) for x in runtime.kv_layouts)
               if runtime.kv_layouts else None)
    fa_trace = runtime.fact("fa_version")
    return BackendKVFacts(
        name=spec.name,
        class_name=spec.class_name,
        kernel_block_sizes=sizes,
        supported_layouts=layouts,
        cudagraph_support=runtime.cudagraph_support,
        reorder_batch_threshold=runtime.reorder_batch_threshold,
        is_mla=spec.family == "mla",
        packing=packing,
        canonical_kv_cache_dtype=local.get("canonical_kv_cache_dtype"),
        fa_version=fa_trace.value if fa_trace else None,
    )


def check_model(
    model: ModelFacts,
    base_facts: Mapping[str, Any],
    *,
    engine: str | None = None,
    attention_backend: str | None = None,
    backend_per_kind: Mapping[str, str] | None = None,
    cudagraph_mode: str = "FULL_AND_PIECEWISE",
    options: KVOptions | None = None,
    catalog: Catalog | None = None,
) -> ModelCheckResult:
    """Select each attention layer's backend and negotiate the KV cache."""
    catalog = catalog or load_catalog()
    engine_data = catalog.engine(engine)
    per_kind = {k: v for k, v in (backend_per_kind or {}).items() if v}
    groups: dict[tuple[tuple[str, Any], ...], list[int]] = {}
    facts_of: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    kind_of: dict[tuple[tuple[str, Any], ...], str] = {}
    for layer in model.layers:
        if not layer.is_attention:
            continue
        facts = {**base_facts, **layer_facts(layer, model)}
        backend = per_kind.get(layer.spec_kind, attention_backend)
        key = (*_signature(facts), ("__backend__", backend), ("__kind__", layer.layer_kind))
        groups.setdefault(key, []).append(layer.index)
        facts_of[key] = facts
        kind_of[key] = layer.layer_kind
    selections = []
    by_layer: dict[int, SolveResult] = {}
    for key, layers in groups.items():
        backend = dict(key).get("__backend__")
        result = solve(facts_of[key], engine=engine_data.engine, attention_backend=backend,
                       cudagraph_mode=cudagraph_mode, catalog=catalog)
        selections.append(LayerSelection(layers=tuple(layers), kind=kind_of[key], facts=facts_of[key],
                                         result=result))
        for index in layers:
            by_layer[index] = result
    plan = None
    if all(s.result.valid for s in selections):
        kv_cache = {}

        def choose(layer: LayerFacts) -> BackendKVFacts:
            if layer.index not in kv_cache:
                kv_cache[layer.index] = _kv_facts(by_layer[layer.index], catalog)
            return kv_cache[layer.index]

        options = options or KVOptions()
        plan = plan_model(model, choose, options)
    return ModelCheckResult(model=model, engine=engine_data.engine, selections=tuple(selections),
                            plan=plan)


def check_model_deployment(loaded: Any, catalog: Catalog | None = None, *,
                           engine: str | None = None) -> ModelCheckResult:
    """:func:`check_model` for a loaded deployment file that names a ``model:``."""
    catalog = catalog or load_catalog()
    deployment = loaded.deployment
    model, facts, kv_options = deployment_model(loaded, catalog)
    return check_model(model, facts, engine=engine or deployment.engine,
                       attention_backend=deployment.attention_backend,
                       backend_per_kind=deployment.attention_config.backend_per_kind,
                       cudagraph_mode=deployment.cudagraph_mode, options=kv_options,
                       catalog=catalog)
