"""The solver: validate every backend, select one, explain why.

Pure and deterministic: no I/O, no printing, never imports torch.  The per-
backend reasons come from the compiled engine data (:mod:`.compiled`);
everything here is generic and has no backend-specific branch.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from selector import expr as E
from selector.catalog import Catalog, EngineData
from selector.kv import kvshape
from selector.kv.cudagraph import resolve_cudagraph_mode
from selector.request import RequestFacts
from selector.result import (
    BackendVerdict,
    Diagnostic,
    FactTrace,
    MLAPrefillResult,
    RuntimePlan,
    SolveResult,
    Suggestion,
)
from selector.schema.backend import BackendSpec
from selector.schema.types import MultipleOf
from selector.solver.compiled import CompiledEngine, Reason, capability_expressions, compiled_for
from selector.solver.derive import derive_facts
from selector.solver.derive import expression as _expr

__all__ = [
    "SelectionOutcome",
    "decide",
    "derive_facts",
    "evaluate_runtime",
    "explain_backend",
    "explicit_error",
    "kernel_block_sizes_of",
    "no_valid_error",
    "no_valid_hint",
    "no_valid_message",
    "no_valid_reasons",
    "pinned",
    "select",
    "solve",
    "trace_fact",
]

def _py(value: Any) -> str:
    return str(value)


def _config_repr(template: str, facts: Mapping[str, Any]) -> str:
    fields = _template_fields(template)
    values = {k: _py(facts[k]) for k in fields if k in facts}
    if "attn_type_upper" in fields:
        values["attn_type_upper"] = str(facts["attn_type"]).upper()
    return template.format(**values)


@functools.cache
def _template_fields(template: str) -> tuple[str, ...]:
    return tuple(f for _, f, _, _ in string.Formatter().parse(template) if f)


_ITEM_CACHE: dict[tuple[object, ...], str] = {}
_REPR_CACHE: dict[tuple[object, ...], str] = {}


def no_valid_error(engine: EngineData, facts: Mapping[str, Any],
                   invalid: list[tuple[str, list[Reason]]]) -> str:
    """vLLM's "No valid attention backend found ..." text (pieces cached: they repeat)."""
    return no_valid_message(engine, facts, no_valid_reasons(engine, invalid),
                            no_valid_hint(engine, invalid))


def no_valid_hint(engine: EngineData, invalid: list[tuple[str, list[Reason]]]) -> str:
    """The ``kv_dtypes_hint`` of the message (empty when the engine states none or no
    backend refused the KV-cache dtype): the KV-cache dtypes of every backend whose
    reasons name ``kv_cache_dtype``, sorted (ROCm, 0.30.0 ``rocm.py:777-792``)."""
    template = engine.profile.messages.kv_dtypes_hint
    if not template:
        return ""
    dtypes = sorted({dtype for name, reasons in invalid
                     if any("kv_cache_dtype" in message for _, message in reasons)
                     for dtype in (engine.backends[name].kv_cache_dtypes or ())})
    return template.format(dtypes=", ".join(dtypes)) if dtypes else ""


def no_valid_reasons(engine: EngineData, invalid: list[tuple[str, list[Reason]]]) -> str:
    """The reasons part of :func:`no_valid_error` (it depends on the reasons alone)."""
    messages = engine.profile.messages
    items = []
    for name, rs in invalid:
        key = (messages.reasons_item, name, *rs)
        item = _ITEM_CACHE.get(key)
        if item is None:
            item = messages.reasons_item.format(name=name, reasons=", ".join(m for _, m in rs))
            if len(_ITEM_CACHE) < 100_000:
                _ITEM_CACHE[key] = item
        items.append(item)
    return messages.reasons_join.join(items)


def no_valid_message(engine: EngineData, facts: Mapping[str, Any], reasons: str,
                     hint: str = "") -> str:
    """:func:`no_valid_error` from its reasons part (:func:`no_valid_reasons`) and its
    KV-cache dtype hint (:func:`no_valid_hint`)."""
    messages = engine.profile.messages
    template = messages.config_repr
    repr_key = (template, *map(facts.get, _template_fields(template)), facts.get("attn_type"))
    try:
        config = _REPR_CACHE.get(repr_key)
    except TypeError:  # a value that cannot be a key (a list given for a fact): not cached
        return messages.no_valid_backend.format(config=_config_repr(template, facts),
                                                reasons=reasons, kv_hint=hint,
                                                device_name=engine.platform)
    if config is None:
        config = _config_repr(template, facts)
        if len(_REPR_CACHE) < 100_000:
            _REPR_CACHE[repr_key] = config
    return messages.no_valid_backend.format(config=config, reasons=reasons, kv_hint=hint,
                                            device_name=engine.platform)


def explicit_error(engine: EngineData, backend: str, reasons: list[Reason]) -> str:
    """vLLM's "Selected backend ... is not valid" text (the reasons as a Python list repr;
    a module that fails to import in the platform's own words where it has them)."""
    messages = engine.profile.messages
    if messages.selected_import_error and len(reasons) == 1 and reasons[0][0].startswith("IM"):
        return messages.selected_import_error.format(backend=backend, reason=reasons[0][1])
    return messages.selected_invalid.format(
        backend=backend, reasons=repr([m for _, m in reasons])
    )


class SelectionOutcome:
    """The raw outcome of one evaluation (used by both ``solve`` and ``sweep``)."""

    __slots__ = ("derived", "error", "order", "reasons", "selected")

    def __init__(self, reasons: dict[str, list[Reason]], order: list[str],
                 derived: dict[str, Any], selected: str | None, error: str | None) -> None:
        self.reasons = reasons
        self.order = order
        self.derived = derived
        self.selected = selected
        self.error = error


def select(compiled: CompiledEngine, facts: Mapping[str, Any],
           attention_backend: str | None, *, through_config: bool = True) -> SelectionOutcome:
    """Evaluate every backend and apply vLLM's auto / explicit selection."""
    reasons, order, derived = compiled.evaluate(facts)
    return decide(compiled.engine, reasons, order, derived, facts, attention_backend,
                  through_config=through_config)


def decide(engine: EngineData, reasons: dict[str, list[Reason]], order: list[str],
           derived: dict[str, Any], facts: Mapping[str, Any],
           attention_backend: str | None, *, through_config: bool = True) -> SelectionOutcome:
    """vLLM's auto / explicit selection from every backend's reasons and the priority list.
    ``through_config``: the pin is ``AttentionConfig.backend`` (a flat config's
    ``attention_backend``, as vLLM's recorded answers give it: ``AttentionConfig(backend=...)``),
    so a name whose ``__post_init__`` rewrite makes it no backend (``pin_selects_auto``) is
    automatic selection; false: ``--attention-backend``, which vLLM sets after that rewrite
    (0.33.0 ``engine/arg_utils.py:2727-2737``), so the platform validates the class."""
    pinned = engine.backends.get(attention_backend) if attention_backend else None
    if through_config and pinned is not None and pinned.pin_selects_auto:
        attention_backend = None
    asked = (attention_backend,) if attention_backend else order
    for name in asked:
        own = reasons[name]
        if own and own[0][0].startswith("EX"):
            return SelectionOutcome(reasons, order, derived, None, own[0][1])
    if attention_backend:
        own = reasons[attention_backend]
        if not own:
            return SelectionOutcome(reasons, order, derived, attention_backend, None)
        kv_only = [code for code, _ in own] == ["KV001"]
        if not (_explicit_fallback(engine, facts, _ANY_FALLBACK_FACT)
                or (kv_only and _explicit_fallback(engine, facts))):
            return SelectionOutcome(reasons, order, derived, None,
                                    explicit_error(engine, attention_backend, own))
        # the packed-KV run's fallback: the layer gets the auto-selected backend
    for name in order:
        if not reasons[name]:
            return SelectionOutcome(reasons, order, derived, name, None)
    invalid = [(name, reasons[name]) for name in order]
    return SelectionOutcome(reasons, order, derived, None, no_valid_error(engine, facts, invalid))


def _performance_hints(engine: EngineData, catalog: Catalog, scope: Mapping[str, Any],
                       outcome: SelectionOutcome) -> list[Diagnostic]:
    """The profile's performance hints that hold for this selection (the first valid
    faster backend named)."""
    found = []
    for hint in engine.profile.performance_hints:
        if outcome.selected not in hint.selected or not E.evaluate(E.parse(hint.when), scope):
            continue
        faster = next((name for name in hint.faster
                       if name in outcome.reasons and not outcome.reasons[name]), None)
        if faster is None:
            continue
        entry = catalog.code(hint.code)
        values = {"selected": outcome.selected, "faster": faster, "why": hint.why,
                  "fix": hint.fix.format(faster=faster), "source": hint.source}
        found.append(Diagnostic(code=hint.code, name=entry.name, severity="warning",
                                message=entry.message.format(**values),
                                hint=entry.hint.format(**values), backend=faster))
    return found


_FALLBACK_FACT = "explicit_kv_fallback"
_ANY_FALLBACK_FACT = "explicit_fallback"


def _explicit_fallback(engine: EngineData, facts: Mapping[str, Any],
                       name: str = _FALLBACK_FACT) -> bool:
    """Whether an invalid ``--attention-backend`` gives way to the auto-selected backend:
    the profile's fact ``explicit_kv_fallback`` when it is refused for its KV-cache dtype
    alone, ``explicit_fallback`` whatever its reasons (none: never). vLLM's ROCm platform
    keeps a packed-KV run's boundary layers at the native dtype (any reason in 0.30.0,
    ``rocm.py:684-735``; the KV-cache dtype reason alone from 0.31.0)."""
    fact = next((f for f in engine.profile.facts if f.name == name), None)
    if fact is None:
        return False
    return bool(E.evaluate(E.parse(str(fact.value)), facts))


def _platform_report_facts(engine: EngineData, spec: BackendSpec) -> tuple[str, ...]:
    """The backend's ``report_facts`` the loaded platform derives (ROCM_ATTN's decode kernel
    is a ROCm fact: pinned on an NVIDIA GPU, the class is validated, the fact not reported)."""
    known = {fact.name for fact in engine.profile.facts}
    return tuple(name for name in spec.runtime.report_facts if name in known)


def trace_fact(engine: EngineData, env: Mapping[str, Any], name: str) -> FactTrace:
    """Re-derive one fact with the interpreter and record which steps applied."""
    scope = dict(env)
    applied = derive_facts(engine.profile.facts, scope, until=name)
    if name not in applied:
        raise KeyError(name)
    return FactTrace(name=name, value=scope[name], steps=applied[name])


def _first(rules: Any, scope: Mapping[str, Any]) -> Any:
    for rule in rules:
        if E.evaluate(_expr(rule.when), scope):
            return rule
    return None


def kernel_block_sizes_of(spec: BackendSpec, scope: Mapping[str, Any]) -> tuple[int | MultipleOf, ...]:
    """The backend's kernel block sizes for these facts (its first matching variant)."""
    variant = _first(spec.kernel_block_sizes, scope)
    return variant.sizes if variant else ()


def _size_text(size: int | MultipleOf) -> str:
    return f"%{size.multiple_of}" if isinstance(size, MultipleOf) else str(size)


def _preferred_block_size(sizes: tuple[int | MultipleOf, ...], default: int = 16) -> int:
    """``get_preferred_block_size``: the default if accepted, else the smallest base."""
    if not sizes:
        return default
    bases = [s.multiple_of if isinstance(s, MultipleOf) else s for s in sizes]
    if any(default % b == 0 for b in bases):
        return default
    return min(bases)


def evaluate_runtime(spec: BackendSpec, scope: Mapping[str, Any],
                     requested_cg_mode: str, default_kv_layout: str | None = None) -> RuntimePlan:
    """The selected backend's KV-cache and CUDA-graph consequences
    (``default_kv_layout``: the engine's process-wide layout for backends that
    shape their own KV cache)."""
    sizes = kernel_block_sizes_of(spec, scope)
    preferred = _preferred_block_size(sizes)
    block_size = scope.get("block_size") or preferred
    layouts_rule = _first(spec.runtime.kv_layouts, scope)
    layouts = tuple(layouts_rule.layouts) if layouts_rule and layouts_rule.layouts else None
    level_rule = _first(spec.runtime.cudagraph_support, scope)
    support = level_rule.level if level_rule else "NEVER"
    threshold_rule = _first(spec.runtime.reorder_batch_threshold, scope)
    threshold = None
    if threshold_rule is not None and threshold_rule.value is not None:
        value = E.evaluate(_expr(threshold_rule.value), scope)
        threshold = int(value) if isinstance(value, int) else None
    resolution = resolve_cudagraph_mode(
        requested_cg_mode, support, spec.class_name,  # type: ignore[arg-type]
        uniform_decode_query_len=1 + int(scope.get("num_speculative_tokens") or 0),
    )
    cg_messages = (*resolution.warnings, *((resolution.error,) if resolution.error else ()))
    geometry = kvshape.geometry(spec, scope, block_size=int(block_size),
                                default_layout=default_kv_layout or "NHD")
    if geometry is not None:
        layouts = (geometry.required_layout,) if geometry.required_layout else None
    cascade_rule = _first(spec.runtime.cascade_attention, scope)
    return RuntimePlan(
        kernel_block_sizes=tuple(_size_text(s) for s in sizes),
        preferred_block_size=preferred,
        block_size=int(block_size),
        kv_layouts=layouts,
        kv_layout=(layouts[0] if layouts else geometry.layout if geometry else "LBNHC"),
        cudagraph_support=support,
        cudagraph_mode_requested=requested_cg_mode,
        cudagraph_mode=str(resolution.resolved) if resolution.error is None else "ERROR",
        cudagraph_messages=cg_messages,
        cudagraph_cost=resolution.cost,
        reorder_batch_threshold=threshold,
        update_block_table=spec.runtime.update_block_table,
        kv_cache_shape=geometry.shape.template if geometry else None,
        kv_cache_shape_values=geometry.shape.render() if geometry else None,
        kv_cache_layout=geometry.layout if geometry else None,
        kv_cache_stride_order=geometry.stride_order if geometry else None,
        cascade_attention=cascade_rule.supported if cascade_rule else None,
        cascade_attention_note=cascade_rule.note if cascade_rule else "",
    )


def _diagnostics(catalog: Catalog, backend: str, reasons: list[Reason]) -> tuple[Diagnostic, ...]:
    out = []
    for code, message in reasons:
        entry = catalog.code(code)
        out.append(Diagnostic(code=code, name=entry.name, severity=entry.severity,
                              message=message, hint=entry.hint, backend=backend))
    return tuple(out)


def _suggest(compiled: CompiledEngine, facts: Mapping[str, Any],
             attention_backend: str | None, limit: int = 5) -> tuple[Suggestion, ...]:
    """Re-run the solver on changed requests; keep only changes that pass."""
    found: list[Suggestion] = []
    seen: set[tuple[str, Any]] = set()
    for change in compiled.engine.profile.suggestions:
        field, value = change.input, change.value
        if facts.get(field) == value or (field, value) in seen:
            continue
        changed = dict(facts)
        changed[field] = value
        outcome = select(compiled, changed, attention_backend)
        if outcome.selected is not None:
            seen.add((field, value))
            found.append(Suggestion(summary=change.text, changes={field: value},
                                    selected=outcome.selected, flags=(change.flag,)))
    if attention_backend:
        outcome = select(compiled, facts, None)
        if outcome.selected is not None:
            found.append(Suggestion(
                summary=f"remove --attention-backend (auto-selects {outcome.selected})",
                changes={"attention_backend": None}, selected=outcome.selected,
                flags=("--attention-backend auto",)))
    for name, spec in compiled.engine.backends.items():
        if name == attention_backend or not spec.suggestable or (
                spec.suggested_on is not None
                and compiled.engine.platform not in spec.suggested_on):
            continue
        outcome = select(compiled, facts, name)
        if outcome.selected is not None and not any(s.selected == name for s in found):
            found.append(Suggestion(summary=f"use --attention-backend {name}",
                                    changes={"attention_backend": name}, selected=name,
                                    flags=(f"--attention-backend {name}",)))
    return tuple(found[:limit])


def _sink_binding(compiled: CompiledEngine, full: dict[str, Any], outcome: SelectionOutcome,
                  sink_backend: str) -> str | None:
    """The backend a module binds for its learnable sink (HY-V4's ``_resolve_sink_backend``,
    vllm/models/hy_v4/nvidia/attention.py:544-641 in 0.33.0): None where the selected
    backend applies sinks itself (it keeps it) or ``sink_backend`` fails its checks (the
    sink is disabled); ``sink_backend``'s subclass declares sink support, so its checks
    are the layer's own without a sink."""
    assert outcome.selected is not None
    with_sink, _, _ = compiled.evaluate({**full, "has_sink": True})
    if not with_sink[outcome.selected] or outcome.reasons[sink_backend]:
        return None
    return sink_backend


def solve(facts: RequestFacts | Mapping[str, Any], *, engine: str | EngineData | None = None,
          attention_backend: str | None = None,
          cudagraph_mode: str | None = None,
          suggest: bool = True, catalog: Catalog,
          platform: str | None = None,
          model_backend: str | None = None,
          sink_backend: str | None = None) -> SolveResult:
    """Validate every backend, select one and explain the decision (``cudagraph_mode``
    None: the engine's default, ``defaults.yaml``; ``engine``: the loaded engine of the
    target's platform, or a release name loaded for ``platform``, None: the catalog's
    default platform; ``catalog``: the loaded catalog, passed down from the command).
    ``model_backend``: the backend the layer's own module passes to its attention
    (``LayerFacts.model_backend``): it is the layer's backend whatever its checks say and
    whatever ``attention_backend`` asks, since vLLM asks no selector for it (mode
    ``model``); every backend's verdict is still evaluated, for the record.
    ``sink_backend``: the backend the layer's module binds to apply its learnable sink
    (``LayerFacts.sink_backend``): where the selected backend (asked without a sink) cannot
    apply sinks and ``sink_backend`` passes its checks, it is the layer's backend (mode
    ``model``)."""
    engine_data = engine if isinstance(engine, EngineData) else catalog.engine(engine, platform)
    cudagraph_mode = cudagraph_mode or catalog.engine_defaults(engine_data.engine).cudagraph_mode.value
    compiled = compiled_for(engine_data, catalog=catalog)
    if attention_backend:
        # --attention-backend: set after AttentionConfig's alias rewrite, so even a
        # pin_selects_auto name is validated as its class (the config path's rewrite is the
        # input's: selector.inputs.serve.config_flags)
        attention_backend = engine_data.backend(attention_backend).name
    stated = facts.stated if isinstance(facts, RequestFacts) else facts
    full = {**compiled.defaults, **stated}
    if model_backend is not None:
        attention_backend = None
        reasons, order, derived = compiled.evaluate(full)
        outcome = SelectionOutcome(reasons, order, derived, engine_data.backend(model_backend).name,
                                   None)
    else:
        outcome = select(compiled, full, attention_backend, through_config=False)
        if sink_backend is not None and outcome.selected is not None:
            bound = _sink_binding(compiled, full, outcome, engine_data.backend(sink_backend).name)
            if bound is not None:
                model_backend, attention_backend = bound, None
                outcome = SelectionOutcome(outcome.reasons, outcome.order, outcome.derived,
                                           bound, None)
    order = outcome.order
    verdicts = []
    for name, spec in engine_data.backends.items():
        verdicts.append(BackendVerdict(
            backend=name,
            reasons=_diagnostics(catalog, name, outcome.reasons[name]),
            priority_index=order.index(name) if name in order else None,
            selection=spec.selection,
        ))
    verdicts.sort(key=lambda v: (v.priority_index is None, v.priority_index or 0, v.backend))
    error = None
    warnings: list[Diagnostic] = []
    runtime = None
    scope = {**full, **outcome.derived}
    if outcome.error is not None:
        code = "SE002" if attention_backend else "SE001"
        entry = catalog.code(code)
        error = Diagnostic(code=code, name=entry.name, severity="error",
                           message=outcome.error, hint=entry.hint, backend=attention_backend)
    else:
        assert outcome.selected is not None
        spec = engine_data.backends[outcome.selected]
        runtime = evaluate_runtime(spec, scope, cudagraph_mode,
                                   engine_data.profile.kv_cache_layout_default)
        reported = _platform_report_facts(engine_data, spec)
        if reported:
            runtime = _with(runtime, explained_facts=tuple(
                trace_fact(engine_data, full, name) for name in reported))
        if not attention_backend and model_backend is None and full.get("block_size") is not None:
            precluded = [n for n in order[: order.index(spec.name)]
                         if [c for c, _ in outcome.reasons[n]] == ["BS001"]]
            if precluded:
                entry = catalog.code("SE003")
                text = engine_data.profile.messages.block_size_precluded.format(
                    block_size=full["block_size"], precluded=", ".join(precluded), winner=spec.name)
                warnings.append(Diagnostic(code="SE003", name=entry.name, severity="warning",
                                           message=text, hint=entry.hint))
        if model_backend is None:  # no faster backend to pick where the module picked its own
            warnings.extend(_performance_hints(engine_data, catalog, scope, outcome))
    suggestions = _suggest(compiled, full, attention_backend) if (suggest and error) else ()
    # MLA layers: vLLM's second selector, for the prefill kernel (selector.solver.mla_prefill).
    mla_prefill = _mla_prefill(engine_data, scope, outcome.selected, catalog)
    if mla_prefill is not None:
        if mla_prefill.fatal and error is None:
            error = mla_prefill.error
        if mla_prefill.warning is not None:
            warnings.append(mla_prefill.warning)
    env_defaults = {k: v.default for k, v in engine_data.profile.environment.items()}
    platform_spec = catalog.platform(engine_data.platform)
    return SolveResult(
        engine=engine_data.engine,
        mode="model" if model_backend is not None else ("explicit" if attention_backend else "auto"),
        requested_backend=attention_backend,
        facts=dict(full),
        derived=dict(outcome.derived),
        priority=tuple(order),
        verdicts=tuple(verdicts),
        selected=outcome.selected,
        error=error,
        warnings=tuple(warnings),
        runtime=runtime,
        suggestions=suggestions,
        environment_defaults=env_defaults,
        environment_basis=platform_spec.environment_basis,
        environment_summary=platform_spec.environment_summary,
        mla_prefill=mla_prefill,
        platform=engine_data.platform,
    )


def pinned(result: SolveResult, backend: str, catalog: Catalog) -> SolveResult:
    """``result``'s facts solved with ``backend`` pinned (``attention_backend``), as a run
    that names it gets it; ``result`` itself when it selected ``backend``."""
    if result.selected == backend:
        return result
    return solve(result.facts, engine=catalog.engine(result.engine, result.platform),
                 attention_backend=backend, suggest=False, catalog=catalog)


def _mla_prefill(engine: EngineData, scope: Mapping[str, Any], decode_backend: str | None,
                 catalog: Catalog) -> MLAPrefillResult | None:
    """The MLA prefill-backend selection of an MLA layer (None: not MLA, or the engine
    has no such selector); a pinned name is checked for every layer, as vLLM parses it."""
    if not scope.get("use_mla") and scope.get("mla_prefill_backend") is None:
        return None  # nothing to select or to check (and no need to load the data)
    from selector.solver.mla_prefill import load_mla_prefill, prefill_backend_name, select_mla_prefill

    if load_mla_prefill(engine, catalog) is None:
        return None
    if not scope.get("use_mla"):
        prefill_backend_name(engine, str(scope["mla_prefill_backend"]), catalog)
        return None
    return select_mla_prefill(scope, engine, decode_backend=decode_backend, catalog=catalog)


def explain_backend(result: SolveResult, backend: str,
                    catalog: Catalog) -> list[dict[str, Any]]:
    """Every check of one backend in vLLM's order: the rule, the facts it read, pass/fail."""
    engine = catalog.engine(result.engine, result.platform)
    spec = engine.backend(backend)
    scope = {**result.facts, **result.derived}
    for fact in spec.facts:  # the backend's own facts, as the compiled evaluator defines them
        scope[fact.name] = E.evaluate(_expr(fact.value), scope)
        for step in fact.steps:
            if E.evaluate(_expr(step.when), scope):
                scope[fact.name] = E.evaluate(_expr(step.set), scope)
    caps = capability_expressions(spec)
    rows: list[dict[str, Any]] = []
    for check in engine.profile.checks:
        fails = _expr(check.fails_when)
        used_caps = sorted(n for n in E.names_in(fails) if n.startswith("cap."))
        rule_parts = [f"{n} := {E.render(caps[n])}" for n in used_caps]
        substituted = scope | {n: E.evaluate(caps[n], scope) for n in used_caps}
        failed = bool(E.evaluate(fails, substituted))
        names = set(E.names_in(fails))
        for n in used_caps:
            names |= E.names_in(caps[n])
        names = {n for n in names if not n.startswith("cap.")}
        entry = catalog.code(check.code)
        rows.append({
            "code": check.code, "name": entry.name, "failed": failed,
            "message": entry.message.format(**{k: scope.get(k) for k in scope}) if failed else "",
            "rule": "fails when " + E.render(fails) + ("\n" + "\n".join(rule_parts) if rule_parts else ""),
            "facts": {n: scope.get(n) for n in sorted(names)},
        })
    matched = False
    for rule in spec.combination:
        condition = _expr(rule.when)
        failed = not matched and bool(E.evaluate(condition, scope))
        matched = matched or failed
        entry = catalog.code(rule.code)
        rows.append({
            "code": rule.code, "name": entry.name, "failed": failed,
            "message": entry.message.replace("{backend_name}", spec.name).format(
                **{k: scope.get(k) for k in scope}) if failed else "",
            "rule": "supports_combination: fails when " + E.render(condition),
            "facts": {n: scope.get(n) for n in sorted(E.names_in(condition))},
        })
    return rows


def _with(plan: RuntimePlan, **changes: Any) -> RuntimePlan:
    return replace(plan, **changes)
