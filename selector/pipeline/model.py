"""The whole model through the stages: every attention layer's backend selected by the
solver with that layer's own request facts (layers with identical facts are solved
once), then the KV cache negotiated across all layers.

Pure: model facts + deployment facts in, a frozen :class:`ModelCheckResult` out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selector.catalog import Catalog, EngineData, load_catalog
from selector.kv import (
    BackendKVFacts,
    KVOptions,
    plan_model,
    prefill_checkpoint_alignment,
    wired_backends,
)
from selector.modelcheck import LayerSelection, ModelCheckResult, architecture_notes, backend_kv_facts
from selector.models import LayerFacts, ModelFacts
from selector.request import RequestFacts, as_request, layer_request
from selector.result import SolveResult
from selector.solver import solve

__all__ = ["check_model"]


def _signature(facts: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(facts.items()))


def check_model(
    model: ModelFacts,
    base_facts: RequestFacts | Mapping[str, Any],
    *,
    engine: str | EngineData | None = None,
    attention_backend: str | None = None,
    backend_per_kind: Mapping[str, str] | None = None,
    cudagraph_mode: str | None = None,
    options: KVOptions | None = None,
    catalog: Catalog | None = None,
    platform: str | None = None,
) -> ModelCheckResult:
    """Select each attention layer's backend and negotiate the KV cache. ``cudagraph_mode``
    None and the values ``options`` does not give are the engine's defaults
    (``defaults.yaml``; the batch limits of a device vLLM cannot query, as a model checked
    without a device); ``platform`` None: the catalog's default platform."""
    catalog = catalog or load_catalog()
    engine_data = engine if isinstance(engine, EngineData) else catalog.engine(engine, platform)
    defaults = catalog.engine_defaults(engine_data.engine)
    cudagraph_mode = cudagraph_mode or defaults.cudagraph_mode.value
    per_kind = {k: v for k, v in (backend_per_kind or {}).items() if v}
    base = as_request(base_facts)
    groups: dict[tuple[tuple[str, Any], ...], list[int]] = {}
    facts_of: dict[tuple[tuple[str, Any], ...], RequestFacts] = {}
    kind_of: dict[tuple[tuple[str, Any], ...], str] = {}
    for layer in model.layers:
        if not layer.is_attention:
            continue
        facts = layer_request(base, layer, model)
        backend = per_kind.get(layer.spec_kind, attention_backend)
        key = (*_signature(facts.stated), ("__backend__", backend), ("__kind__", layer.layer_kind))
        groups.setdefault(key, []).append(layer.index)
        facts_of[key] = facts
        kind_of[key] = layer.layer_kind
    selections = []
    by_layer: dict[int, SolveResult] = {}
    for key, layers in groups.items():
        backend = dict(key).get("__backend__")
        result = solve(facts_of[key], engine=engine_data, attention_backend=backend,
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
                kv_cache[layer.index] = backend_kv_facts(by_layer[layer.index], catalog)
            return kv_cache[layer.index]

        if options is None:
            tokens, seqs = defaults.batch_defaults((), None, "")
            options = KVOptions(cudagraph_mode=cudagraph_mode,
                                max_num_batched_tokens=tokens, max_num_seqs=seqs,
                                gpu_memory_utilization=defaults.gpu_memory_utilization.value)
        if options.wired_backends is None:
            options = options.model_copy(update={"wired_backends": wired_backends(engine_data)})
        if options.hybrid_alignment is None:
            options = options.model_copy(
                update={"hybrid_alignment": engine_data.profile.hybrid_alignment})
        if options.mamba_prefill_checkpoint_alignment is None:
            alignment = prefill_checkpoint_alignment(model, engine_data, cc=base.cc)
            options = options.model_copy(
                update={"mamba_prefill_checkpoint_alignment": alignment})
        plan = plan_model(model, choose, options)
    return ModelCheckResult(model=model, engine=engine_data.engine, selections=tuple(selections),
                            plan=plan, platform=engine_data.platform,
                            architecture=architecture_notes(model, engine_data, catalog))

