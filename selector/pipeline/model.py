"""The whole model through the stages: every attention layer's backend selected by the
solver with that layer's own request facts (layers with identical facts are solved
once), then the KV cache negotiated across all layers.

Pure: model facts + deployment facts in, a frozen :class:`ModelCheckResult` out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from selector.catalog import Catalog, EngineData
from selector.check.model import LayerSelection, ModelCheckResult, architecture_notes, backend_kv_facts
from selector.errors import InputError
from selector.kv import (
    BackendKVFacts,
    KVOptions,
    model_driven,
    plan_model,
    prefill_checkpoint_alignment,
    spec_checkpoint_alignment,
)
from selector.models import LayerFacts, ModelFacts
from selector.request import RequestFacts, as_request, layer_request
from selector.result import Diagnostic, SolveResult
from selector.solver import solve

__all__ = ["check_model", "rewritten_cache_dtypes"]


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


_Key = tuple[tuple[str, Any], ...]
"""A layer view's request facts and what else decides its selection (one solve per key)."""


@dataclass
class _Views:
    """Every attention view of a model grouped by its request (layers with identical
    facts are solved once), in build order, with the cache dtype an earlier layer wrote
    back (the profile's ``kv_cache_dtype_rewrite``) applied to the layers after it."""

    engine: EngineData
    catalog: Catalog
    cudagraph_mode: str
    groups: dict[_Key, list[int]] = field(default_factory=dict)
    facts_of: dict[_Key, RequestFacts] = field(default_factory=dict)
    kind_of: dict[_Key, str] = field(default_factory=dict)
    view_of: dict[_Key, str] = field(default_factory=dict)
    own_layers: dict[str, list[int]] = field(default_factory=dict)
    rewritten: dict[int, str] = field(default_factory=dict)
    """Layer index -> the KV-cache dtype it is built with, where an earlier layer wrote it."""
    solved: dict[_Key, SolveResult] = field(default_factory=dict)

    def solve_key(self, key: _Key) -> SolveResult:
        if key not in self.solved:
            self.solved[key] = solve(self.facts_of[key], engine=self.engine,
                                     attention_backend=dict(key).get("__backend__"),
                                     cudagraph_mode=self.cudagraph_mode, catalog=self.catalog,
                                     model_backend=dict(key).get("__model_backend__"),
                                     sink_backend=dict(key).get("__sink_backend__"))
        return self.solved[key]

    def rewritten_model(self, model: ModelFacts) -> ModelFacts:
        """``model`` with each rewritten layer's dtype (its KV spec stores with it)."""
        if not self.rewritten:
            return model
        return model.model_copy(update={"layers": tuple(
            layer.model_copy(update={"kv_cache_dtype": self.rewritten[layer.index]})
            if layer.index in self.rewritten else layer for layer in model.layers)})


def _select_views(model: ModelFacts, base: RequestFacts, engine: EngineData, catalog: Catalog, *,
                  per_kind: Mapping[str, str], attention_backend: str | None,
                  draft_backend: str | None, cudagraph_mode: str) -> _Views:
    views = _Views(engine=engine, catalog=catalog, cudagraph_mode=cudagraph_mode)
    rewrite = engine.profile.kv_cache_dtype_rewrite
    shared_dtype: str | None = None  # the cache dtype an earlier layer wrote back
    for view in _attention_views(model):
        if view.own_backend:  # never the priority list: the layer's code names it
            views.own_layers.setdefault(view.own_backend, []).append(view.index)
            continue
        own_dtype = view.kv_cache_dtype is not None  # its own cache config (a draft's)
        layer = view
        if shared_dtype is not None and not own_dtype:
            layer = view.model_copy(update={"kv_cache_dtype": shared_dtype})
            views.rewritten[layer.index] = shared_dtype
        facts = layer_request(base, layer, model)
        # a layer whose module passes its own backend is never selected (the family's
        # attention.backend): that backend, unchecked, whatever was asked
        backend = None if layer.model_backend else per_kind.get(
            layer.spec_kind, draft_backend if layer.draft else attention_backend)
        key = (*_signature(facts.stated), ("__backend__", backend), ("__kind__", layer.layer_kind),
               ("__draft__", layer.draft), ("__view__", layer.kind),
               ("__model_backend__", layer.model_backend),
               ("__sink_backend__", layer.sink_backend))
        views.groups.setdefault(key, []).append(layer.index)
        views.facts_of[key] = facts
        views.kind_of[key] = layer.layer_kind
        views.view_of.setdefault(key, layer.kind)
        if rewrite is not None and not own_dtype:
            written = _written_cache_dtype(views.solve_key(key), rewrite.backends, catalog)
            if written is not None and written != facts.kv_cache_dtype:
                shared_dtype = written
    return views


def rewritten_cache_dtypes(
    model: ModelFacts,
    base_facts: RequestFacts | Mapping[str, Any],
    *,
    engine: str | EngineData | None = None,
    attention_backend: str | None = None,
    backend_per_kind: Mapping[str, str] | None = None,
    catalog: Catalog,
    platform: str | None = None,
    draft_backend: str | None = None,
) -> dict[int, str]:
    """Layer index -> the KV-cache dtype the layer is built with where an earlier layer's
    backend wrote it back into the shared cache config (the profile's
    ``kv_cache_dtype_rewrite``), as :func:`check_model` selects them: what one layer of
    the model asks for (``explain --layer``)."""
    engine_data = engine if isinstance(engine, EngineData) else catalog.engine(engine, platform)
    if model_driven.driven_rule(model, engine_data.engine, catalog) is not None:
        return {}
    cudagraph_mode = catalog.engine_defaults(engine_data.engine).cudagraph_mode.value
    per_kind = {k: v for k, v in (backend_per_kind or {}).items() if v}
    return _select_views(model, as_request(base_facts), engine_data, catalog,
                         per_kind=per_kind, attention_backend=attention_backend,
                         draft_backend=draft_backend, cudagraph_mode=cudagraph_mode).rewritten


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
        try:
            return _check_driven(model, base, driven, engine_data, attention_backend,
                                 options, catalog)
        except model_driven.MissingConfigFieldError as missing:
            raise InputError(missing.message, file=missing.file or model.source,
                             field=missing.field, hint=missing.hint) from None
    own = model_driven.own_backend_facts(model, engine_data.engine, catalog)
    if own:  # the backends the layers' own code wires join the engine's wired ones
        options = options.model_copy(
            update={"wired_backends": {**options.engine_rules()[0], **own}})
    views = _select_views(model, base, engine_data, catalog, per_kind=per_kind,
                          attention_backend=attention_backend, draft_backend=draft_backend,
                          cudagraph_mode=cudagraph_mode)
    model = views.rewritten_model(model)
    selections = []
    by_layer: dict[tuple[int, str], SolveResult] = {}
    for key, layers in views.groups.items():
        result = views.solve_key(key)
        selections.append(LayerSelection(layers=tuple(layers), kind=views.kind_of[key],
                                         facts=views.facts_of[key], result=result,
                                         draft=bool(dict(key).get("__draft__"))))
        for index in layers:
            by_layer[(index, views.view_of[key])] = result
    selections.extend(_own_selection(model, base, name, layers, engine_data.engine)
                      for name, layers in views.own_layers.items())
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
        if options.state_spec_checkpoint_alignment is None:
            options = options.model_copy(update={
                "state_spec_checkpoint_alignment": spec_checkpoint_alignment(
                    model, cc=base.cc, engine=engine_data.engine)})
        plan = plan_model(model, choose, options)
    return ModelCheckResult(model=model, engine=engine_data.engine, selections=tuple(selections),
                            plan=plan, platform=engine_data.platform,
                            architecture=architecture_notes(model, engine_data, catalog))



def _written_cache_dtype(result: SolveResult, backends: tuple[str, ...],
                         catalog: Catalog) -> str | None:
    """The KV-cache dtype a layer writes back into the shared cache config (the profile's
    ``kv_cache_dtype_rewrite``): its selected backend's ``canonical_kv_cache_dtype`` when
    that backend is one of ``backends``; None: it writes nothing."""
    if result.selected is None or result.selected not in backends:
        return None
    return backend_kv_facts(result, catalog).canonical_kv_cache_dtype


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
                  engine_data: EngineData, attention_backend: str | None, options: KVOptions,
                  catalog: Catalog) -> ModelCheckResult:
    """A model whose layer code chooses its own backend (``model-driven.yaml``): the
    layer's choice for the ``--attention-backend`` given (or its refusal, or the name
    ignored), the KV-cache dtype its layout resolves (or its refusal), then the caches
    and groups vLLM builds for it."""
    data, rule = driven
    engine = engine_data.engine
    requested = attention_backend.upper() if attention_backend else None
    cc = base.cc or 0
    choice = model_driven.select_driven(rule, requested, cc // 10, config=model.config, cc=cc,
                                        tp_size=model.tp_size, pcp_size=base.pcp_size)
    error: Diagnostic | None = _platform_first(model, base, rule, engine_data, requested,
                                               options, catalog)
    warnings: list[Diagnostic] = []
    plan = None
    if error is None and choice.error is not None:
        error = _diagnostic(catalog, choice.code, detail=f"{choice.exc_type}: {choice.error}",
                            backend=requested)
    elif error is None:
        assert choice.backend is not None
        cache_dtype, detail = model_driven.resolve_cache_dtype(
            rule, model_driven.driven_backend(data, rule, choice.backend, cc // 10),
            options.kv_cache_dtype, cc // 10)
        element_bytes = detail if isinstance(detail, int) else None
        # a layer's build refused (the rule's layer_refusals, before the KV-cache dtype's
        # refusal), then a spec once every layer is built (spec_refusals)
        refused = model_driven.layer_refusal(
            rule, model.config or {}, kv_cache_dtype=options.kv_cache_dtype, cc=cc,
            tp_size=model.tp_size, element_bytes=element_bytes, specs=cache_dtype is not None,
            cache_block=model_driven.aligned_block(
                rule, data, choice.backend, model.config or {}, options.block_size,
                element_bytes=element_bytes, cache_dtype=cache_dtype or "auto",
                architecture=model.architecture, tp_size=model.tp_size, cc_major=cc // 10)
            if cache_dtype is not None else 16)
        if refused is not None:
            error = _diagnostic(catalog, refused.code,
                                detail=f"{refused.exc_type}: {refused.error}", backend=choice.backend)
        elif cache_dtype is None:
            error = _diagnostic(catalog, "MD002", detail=str(detail), backend=choice.backend)
        else:
            plan = model_driven.plan_driven(
                model, rule, data, choice.backend, cache_dtype=cache_dtype,
                element_bytes=detail if isinstance(detail, int) else None, options=options,
                cc_major=cc // 10)
    kinds: dict[str, list[int]] = {}
    facts_of: dict[str, RequestFacts] = {}
    built = (model_driven.layer_backends(rule, model.config or {}, choice.backend, model.tp_size)
             if error is None and choice.backend is not None else [None] * model.num_layers)
    layer_kinds = model_driven.layer_kinds(rule, model, built)
    if choice.ignored and error is None:  # the layers build their own: every backend they name
        warnings.append(_diagnostic(catalog, "MD003", requested=requested,
                                    built=", ".join(sorted({b for b in built if b})),
                                    backend=requested))
    backend_of: dict[str, str | None] = {}
    for layer in model.layers:  # vLLM refuses the model once: one selection then
        kind = rule.kind_prefix if error is not None else layer_kinds[layer.index]
        kinds.setdefault(kind, []).append(layer.index)
        facts_of.setdefault(kind, layer_request(base, layer, model))
        backend_of.setdefault(kind, built[layer.index])
    selections = tuple(
        LayerSelection(layers=tuple(layers), kind=kind, facts=facts_of[kind], result=SolveResult(
            engine=engine, mode="explicit" if requested else "auto", requested_backend=requested,
            facts=dict(facts_of[kind].stated), derived={}, priority=(), verdicts=(),
            selected=backend_of[kind], error=error, warnings=tuple(warnings)), own_code=True)
        for kind, layers in kinds.items())
    return ModelCheckResult(model=model, engine=engine, selections=selections, plan=plan)


def _platform_first(model: ModelFacts, base: RequestFacts, rule: model_driven.DrivenModel,
                    engine: EngineData, requested: str | None, options: KVOptions,
                    catalog: Catalog) -> Diagnostic | None:
    """The refusal of the platform's selection for the layer the model builds and discards
    (``DrivenModel.platform_first``), or None: the solver's answer for that layer."""
    if rule.platform_first != "sparse_mla":
        return None
    layer = next((x for x in model.layers if x.indexer is not None and x.indexer.own_cache), None)
    if layer is None:
        return None
    result = solve(layer_request(base, layer, model), engine=engine, attention_backend=requested,
                   cudagraph_mode=options.cudagraph_mode, catalog=catalog)
    return None if result.valid else result.error


def _diagnostic(catalog: Catalog, code: str, *, backend: str | None, **values: Any) -> Diagnostic:
    """The registered code's finding; ``backend``: the backend it concerns, ``values``: the
    message's placeholders."""
    entry = catalog.code(code)
    return Diagnostic(code=code, name=entry.name, severity=entry.severity,
                      message=entry.message.format(**values), hint=entry.hint, backend=backend)
