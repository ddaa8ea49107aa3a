"""The whole model through the stages: every attention layer's backend selected by the
solver with that layer's own request facts (layers with identical facts are solved
once), then the KV cache negotiated across all layers.

Pure: model facts + deployment facts in, a frozen :class:`ModelCheckResult` out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selector.catalog import Catalog, EngineData
from selector.check.model import LayerSelection, ModelCheckResult, architecture_notes, backend_kv_facts
from selector.kv import (
    BackendKVFacts,
    KVOptions,
    model_driven,
    plan_model,
    prefill_checkpoint_alignment,
)
from selector.models import LayerFacts, ModelFacts
from selector.request import RequestFacts, as_request, layer_request
from selector.result import Diagnostic, SolveResult
from selector.solver import solve

__all__ = ["check_model"]


def _signature(facts: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(facts.items()))


def _attention_views(model: ModelFacts) -> list[LayerFacts]:
    """Every attention module the model registers, as the layer it selects a backend
    for: each attention layer and, beside an encoder-decoder's decoder layer, its
    cross-attention (``LayerFacts.cross_view``)."""
    out: list[LayerFacts] = []
    for layer in model.layers:
        if layer.is_attention:
            out.append(layer)
            if layer.cross_attention:
                out.append(layer.cross_view())
    return out


def check_model(
    model: ModelFacts,
    base_facts: RequestFacts | Mapping[str, Any],
    *,
    engine: str | EngineData | None = None,
    attention_backend: str | None = None,
    backend_per_kind: Mapping[str, str] | None = None,
    cudagraph_mode: str | None = None,
    options: KVOptions | None = None,
    catalog: Catalog,
    platform: str | None = None,
    draft_backend: str | None = None,
) -> ModelCheckResult:
    """Select each attention layer's backend and negotiate the KV cache. ``cudagraph_mode``
    None and the values ``options`` does not give are the engine's defaults
    (``defaults.yaml``; the batch limits of a device vLLM cannot query, as a model checked
    without a device); ``platform`` None: the catalog's default platform. ``draft_backend``:
    the backend of the speculative draft's layers (``LayerFacts.draft``; None: selected by
    vLLM)."""
    engine_data = engine if isinstance(engine, EngineData) else catalog.engine(engine, platform)
    defaults = catalog.engine_defaults(engine_data.engine)
    cudagraph_mode = cudagraph_mode or defaults.cudagraph_mode.value
    per_kind = {k: v for k, v in (backend_per_kind or {}).items() if v}
    base = as_request(base_facts)
    if options is None:
        tokens, seqs = defaults.batch_defaults((), None, "")
        options = KVOptions(cudagraph_mode=cudagraph_mode,
                            max_num_batched_tokens=tokens, max_num_seqs=seqs,
                            gpu_memory_utilization=defaults.gpu_memory_utilization.value)
    options = options.for_engine(engine_data)
    driven = model_driven.driven_rule(model, engine_data.engine, catalog)
    if driven is not None:
        return _check_driven(model, base, driven, engine_data.engine, attention_backend,
                             options, catalog)
    own = model_driven.own_backend_facts(model, engine_data.engine, catalog)
    if own:  # the backends the layers' own code wires join the engine's wired ones
        options = options.model_copy(
            update={"wired_backends": {**options.engine_rules()[0], **own}})
    own_layers: dict[str, list[int]] = {}
    groups: dict[tuple[tuple[str, Any], ...], list[int]] = {}
    facts_of: dict[tuple[tuple[str, Any], ...], RequestFacts] = {}
    kind_of: dict[tuple[tuple[str, Any], ...], str] = {}
    view_of: dict[tuple[tuple[str, Any], ...], str] = {}
    for layer in _attention_views(model):
        if layer.own_backend:  # never the priority list: the layer's code names it
            own_layers.setdefault(layer.own_backend, []).append(layer.index)
            continue
        facts = layer_request(base, layer, model)
        # a layer whose module passes its own backend is never selected (the family's
        # attention.backend): that backend, unchecked, whatever was asked
        backend = None if layer.model_backend else per_kind.get(
            layer.spec_kind, draft_backend if layer.draft else attention_backend)
        key = (*_signature(facts.stated), ("__backend__", backend), ("__kind__", layer.layer_kind),
               ("__draft__", layer.draft), ("__view__", layer.kind),
               ("__model_backend__", layer.model_backend),
               ("__sink_backend__", layer.sink_backend))
        groups.setdefault(key, []).append(layer.index)
        facts_of[key] = facts
        kind_of[key] = layer.layer_kind
        view_of.setdefault(key, layer.kind)
    selections = []
    by_layer: dict[tuple[int, str], SolveResult] = {}
    for key, layers in groups.items():
        backend = dict(key).get("__backend__")
        result = solve(facts_of[key], engine=engine_data, attention_backend=backend,
                       cudagraph_mode=cudagraph_mode, catalog=catalog,
                       model_backend=dict(key).get("__model_backend__"),
                       sink_backend=dict(key).get("__sink_backend__"))
        selections.append(LayerSelection(layers=tuple(layers), kind=kind_of[key], facts=facts_of[key],
                                         result=result, draft=bool(dict(key).get("__draft__"))))
        for index in layers:
            by_layer[(index, view_of[key])] = result
    selections.extend(_own_selection(model, base, name, layers, engine_data.engine)
                      for name, layers in own_layers.items())
    plan = None
    if all(s.result.valid for s in selections):
        kv_cache: dict[tuple[int, str], BackendKVFacts] = {}

        def choose(layer: LayerFacts) -> BackendKVFacts:
            key = (layer.index, layer.kind)
            if key not in kv_cache:
                kv_cache[key] = backend_kv_facts(by_layer[key], catalog)
            return kv_cache[key]

        if options.mamba_prefill_checkpoint_alignment is None:
            alignment = prefill_checkpoint_alignment(model, engine_data, cc=base.cc)
            options = options.model_copy(
                update={"mamba_prefill_checkpoint_alignment": alignment})
        plan = plan_model(model, choose, options)
    return ModelCheckResult(model=model, engine=engine_data.engine, selections=tuple(selections),
                            plan=plan, platform=engine_data.platform,
                            architecture=architecture_notes(model, engine_data, catalog))



def _own_selection(model: ModelFacts, base: RequestFacts, backend: str, layers: list[int],
                   engine: str) -> LayerSelection:
    """The layers whose own code names ``backend`` (a family's ``attention.own_sparse``):
    selected without the solver."""
    facts = layer_request(base, model.layers[layers[0]], model)
    result = SolveResult(engine=engine, mode="auto", requested_backend=None,
                         facts=dict(facts.stated), derived={}, priority=(), verdicts=(),
                         selected=backend, error=None, warnings=())
    return LayerSelection(layers=tuple(layers), kind=f"{backend} (the layers' own)",
                          facts=facts, result=result)


def _check_driven(model: ModelFacts, base: RequestFacts,
                  driven: tuple[model_driven.ModelDrivenData, model_driven.DrivenModel],
                  engine: str, attention_backend: str | None, options: KVOptions,
                  catalog: Catalog) -> ModelCheckResult:
    """A model whose layer code chooses its own backend (``model-driven.yaml``): the
    layer's choice for the ``--attention-backend`` given (or its refusal, or the name
    ignored), the KV-cache dtype its layout resolves (or its refusal), then the caches
    and groups vLLM builds for it."""
    data, rule = driven
    requested = attention_backend.upper() if attention_backend else None
    cc_major = (base.cc or 0) // 10
    choice = model_driven.select_driven(rule, requested, cc_major, config=model.config,
                                        tp_size=model.tp_size, pcp_size=base.pcp_size)
    error: Diagnostic | None = None
    warnings: list[Diagnostic] = []
    plan = None
    if choice.error is not None:
        error = _diagnostic(catalog, "MD001", detail=f"{choice.exc_type}: {choice.error}",
                            backend=requested)
    elif (refused := model_driven.layer_refusal(rule, model.config or {})) is not None:
        error = _diagnostic(catalog, "MD004", detail=refused, backend=choice.backend)
    else:
        assert choice.backend is not None
        if choice.ignored:
            warnings.append(_diagnostic(catalog, "MD003", requested=requested,
                                        built=choice.backend, backend=requested))
        cache_dtype, detail = model_driven.resolve_cache_dtype(
            rule, data.backends[choice.backend].on_gpu(cc_major), options.kv_cache_dtype,
            cc_major)
        if cache_dtype is None:
            error = _diagnostic(catalog, "MD002", detail=str(detail), backend=choice.backend)
        else:
            plan = model_driven.plan_driven(
                model, rule, data, choice.backend, cache_dtype=cache_dtype,
                element_bytes=detail if isinstance(detail, int) else None, options=options,
                cc_major=cc_major)
    kinds: dict[str, list[int]] = {}
    facts_of: dict[str, RequestFacts] = {}
    ratios = model_driven.compress_ratios(rule, model)
    for layer in model.layers:  # vLLM refuses the model once: one selection then
        kind = (rule.kind_prefix if error is not None
                else f"{rule.kind_prefix} (compress {ratios[layer.index]})")
        kinds.setdefault(kind, []).append(layer.index)
        facts_of.setdefault(kind, layer_request(base, layer, model))
    selections = tuple(
        LayerSelection(layers=tuple(layers), kind=kind, facts=facts_of[kind], result=SolveResult(
            engine=engine, mode="explicit" if requested else "auto", requested_backend=requested,
            facts=dict(facts_of[kind].stated), derived={}, priority=(), verdicts=(),
            selected=None if error is not None else choice.backend,
            error=error, warnings=tuple(warnings)))
        for kind, layers in kinds.items())
    return ModelCheckResult(model=model, engine=engine, selections=selections, plan=plan)


def _diagnostic(catalog: Catalog, code: str, *, backend: str | None, **values: Any) -> Diagnostic:
    """The registered code's finding; ``backend``: the backend it concerns, ``values``: the
    message's placeholders."""
    entry = catalog.code(code)
    return Diagnostic(code=code, name=entry.name, severity=entry.severity,
                      message=entry.message.format(**values), hint=entry.hint, backend=backend)
