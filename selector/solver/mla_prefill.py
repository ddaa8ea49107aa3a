"""vLLM's MLA prefill-backend selection, evaluated from ``mla_prefill.yaml``.

MLA layers pick the kernel that runs prefill with a second, smaller selector
(``get_mla_prefill_backend``): every prefill backend answers
``validate_configuration`` (compute capability, dtype, package presence, the
model's ``(qk_nope_head_dim, qk_rope_head_dim, v_head_dim)``), then an explicit
``-ac.mla_prefill_backend`` is checked alone, or the first valid backend of the
capability's priority list wins.  This module is pure: no I/O besides reading the
engine's data file once, no printing, no torch, and no backend-specific branch.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from selector import expr as E
from selector.catalog import (
    MLA_PREFILL_FILE,
    Catalog,
    CatalogError,
    EngineData,
    validation_message,
)
from selector.errors import InputError
from selector.result import Diagnostic, MLAPrefillResult, MLAPrefillVerdict
from selector.schema.backend import BackendSpec
from selector.schema.mla_prefill import MLAPrefillBackendSpec, MLAPrefillProfile
from selector.solver.derive import derive_facts

__all__ = [
    "DATA_FILE",
    "load_mla_prefill",
    "mla_environment",
    "prefill_backend_name",
    "select_mla_prefill",
]

DATA_FILE = MLA_PREFILL_FILE

_CAP_NAMES = frozenset({
    "cap.compute_capability", "cap.dtype", "cap.available", "cap.dimensions", "cap.dimensions_listed",
})
_LOCAL_NAMES = frozenset({"decode_backend"})
_LOADED: dict[str, MLAPrefillProfile | None] = {}


@functools.cache
def _parse(text: str | bool) -> E.Expr:
    return E.parse(text)


def _truth(condition: str | bool, scope: Mapping[str, Any]) -> bool:
    return bool(E.evaluate(_parse(condition), scope))


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def load_mla_prefill(engine: EngineData, catalog: Catalog) -> MLAPrefillProfile | None:
    """The engine's MLA prefill selector (None when neither the engine nor a profile it
    extends ships one), validated and cross-checked once per process."""
    if engine.mla_prefill is None or engine.mla_prefill_path is None:
        return None
    key = f"{engine.engine}:{engine.platform}:{engine.mla_prefill_path}"
    if key not in _LOADED:
        _LOADED[key] = _load(engine.mla_prefill_path, engine.mla_prefill, engine, catalog)
    return _LOADED[key]


def _load(path: Path, raw: dict[str, Any], engine: EngineData, catalog: Catalog) -> MLAPrefillProfile:
    try:
        data = MLAPrefillProfile.model_validate(raw)
    except ValidationError as exc:
        raise CatalogError(validation_message(path, exc)) from None
    if data.engine != engine.engine:
        raise CatalogError(f"{path}: engine {data.engine!r} is not {engine.engine!r}")
    known = set(engine.profile.inputs) | set(engine.profile.environment)
    known |= {f.name for f in engine.profile.facts}

    def check(where: str, condition: object, extra: Iterable[str] = ()) -> None:
        if isinstance(condition, str):
            unknown = E.names_in(_parse(condition)) - known - set(extra)
            if unknown:
                raise CatalogError(f"{path}: {where}: unknown name(s) {sorted(unknown)} in {condition!r}")

    for fact in data.facts:
        for value in (fact.value, *(s.set for s in fact.steps), *(s.when for s in fact.steps)):
            check(f"fact {fact.name}", value, {fact.name})
        known.add(fact.name)
    codes = set(catalog.codes)
    for spec in data.checks:
        check(f"check {spec.code}", spec.fails_when, _CAP_NAMES)
        if spec.code not in codes:
            raise CatalogError(f"{path}: check code {spec.code} is not registered")
    names = {b.name for b in data.backends}
    for backend in data.backends:
        where = f"backend {backend.name}"
        for condition in (backend.compute_capability, backend.available, backend.import_error,
                          *(r.when for r in backend.extra_reasons)):
            check(where, condition)
        for code in (*(r.code for r in backend.extra_reasons), *backend.replace_reasons.values()):
            if code not in codes:
                raise CatalogError(f"{path}: {where}: code {code} is not registered")
    for branch in data.priorities:
        check("priority branch", branch.when)
        for name in branch.order:
            if name not in names:
                raise CatalogError(f"{path}: priority list names unknown backend {name!r}")
    check("consulted", data.consulted, _LOCAL_NAMES)
    check("auto_failure_fatal", data.auto_failure_fatal)
    if data.auto_failure_warning is not None and data.auto_failure_warning not in codes:
        raise CatalogError(f"{path}: code {data.auto_failure_warning} is not registered")
    message_scope = known | {"prefill_dims", "prefill_supported_dims", "backend_name"}
    used_codes = {c.code for c in data.checks} | {
        code for b in data.backends
        for code in (*(r.code for r in b.extra_reasons), *b.replace_reasons.values())}
    for code in used_codes:
        unknown = _fields(catalog.code(code).message) - message_scope
        if unknown:
            raise CatalogError(f"{path}: code {code}: unknown placeholder(s) {sorted(unknown)}")
    return data


def prefill_backend_name(engine: EngineData, name: str, catalog: Catalog) -> str:
    """Normalise ``-ac.mla_prefill_backend`` as vLLM does (case-insensitive enum name);
    an unknown name is vLLM's configuration error (engines without the data: unchecked)."""
    data = load_mla_prefill(engine, catalog)
    if data is None:  # not modelled for this engine: nothing to check against
        return name.upper()
    names = [b.name for b in data.backends]
    upper = name.upper()
    if upper in names:
        return upper
    raise InputError(
        data.messages.unknown_backend.format(name=upper, options=", ".join(names)),
        field="attention_config.mla_prefill_backend",
        hint="leave mla_prefill_backend out for automatic selection (vLLM does not accept 'auto' here)",
    )


def _scope(facts: Mapping[str, Any], engine: EngineData, data: MLAPrefillProfile) -> dict[str, Any]:
    profile = engine.profile
    scope: dict[str, Any] = {name: spec.default for name, spec in {**profile.inputs,
                                                                    **profile.environment}.items()}
    scope.update(facts)
    if any(f.name not in facts for f in profile.facts):
        derive_facts(profile.facts, scope)
    derive_facts(data.facts, scope)
    return scope


def _dimensions_text(data: MLAPrefillProfile, dims: tuple[int, int, int]) -> str:
    return data.dimensions_repr.format(*dims)


def _message(catalog: Catalog, code: str, scope: Mapping[str, Any]) -> Diagnostic:
    entry = catalog.code(code)
    return Diagnostic(code=code, name=entry.name, severity=entry.severity,
                      message=entry.message.format(**scope), hint=entry.hint,
                      backend=scope.get("backend_name"))


def _validate(spec: MLAPrefillBackendSpec, data: MLAPrefillProfile, scope: Mapping[str, Any],
              dims: tuple[int, int, int], catalog: Catalog) -> tuple[tuple[Diagnostic, ...], bool]:
    """(reasons, raises) of one backend's ``validate_configuration``."""
    local = dict(scope)
    local["backend_name"] = spec.name
    if spec.raises is not None:
        return (Diagnostic(code="MP013", name=catalog.code("MP013").name, severity="error",
                           message=spec.raises, hint=catalog.code("MP013").hint, backend=spec.name),), True
    if _truth(spec.import_error, local):
        return (_message(catalog, "MP006", local),), False
    local.update({
        "cap.compute_capability": _truth(spec.compute_capability, local),
        "cap.dtype": local.get("dtype") in spec.dtypes,
        "cap.available": _truth(spec.available, local),
        "cap.dimensions": not spec.dimensions or dims in spec.dimensions,
        "cap.dimensions_listed": bool(spec.dimensions) and spec.dimensions_listed,
        "prefill_supported_dims": data.dimensions_join.join(
            _dimensions_text(data, d) for d in spec.dimensions),
    })
    reasons = []
    for check in data.checks:
        if _truth(check.fails_when, local):
            reasons.append(_message(catalog, spec.replace_reasons.get(check.code, check.code), local))
    for rule in spec.extra_reasons:
        if _truth(rule.when, local):
            reasons.append(_message(catalog, rule.code, local))
    return tuple(reasons), False


def _outcome(data: MLAPrefillProfile, catalog: Catalog, code: str, message: str,
             backend: str | None) -> Diagnostic:
    entry = catalog.code(code)
    return Diagnostic(code=code, name=entry.name, severity=entry.severity, message=message,
                      hint=entry.hint, backend=backend)


def select_mla_prefill(facts: Mapping[str, Any], engine: EngineData, explicit: str | None = None, *,
                       decode_backend: str | None = None,
                       catalog: Catalog) -> MLAPrefillResult:
    """vLLM's ``get_mla_prefill_backend`` for these request facts.

    ``explicit`` is ``-ac.mla_prefill_backend`` (default: the ``mla_prefill_backend``
    fact); ``decode_backend`` is the attention backend the layer selected (None: that
    selection fails, so vLLM never gets here).  Raises :class:`InputError` for an
    unknown backend name and :class:`CatalogError` when the engine has no such data.
    """
    data = load_mla_prefill(engine, catalog)
    if data is None:
        raise CatalogError(f"{engine.engine} ships no {DATA_FILE}")
    requested = explicit if explicit is not None else facts.get("mla_prefill_backend")
    if requested is not None:
        requested = prefill_backend_name(engine, str(requested), catalog)
    scope = _scope(facts, engine, data)
    dims = (int(scope["prefill_qk_nope_head_dim"]), int(scope["prefill_qk_rope_head_dim"]),
            int(scope["prefill_v_head_dim"]))
    scope["prefill_dims"] = _dimensions_text(data, dims)
    branch = next((b for b in data.priorities if _truth(b.when, scope)), None)
    order = branch.order if branch is not None else ()
    answers = {spec.name: _validate(spec, data, scope, dims, catalog) for spec in data.backends}
    verdicts = [MLAPrefillVerdict(backend=spec.name, reasons=answers[spec.name][0],
                                  priority_index=order.index(spec.name) if spec.name in order else None,
                                  raises=answers[spec.name][1])
                for spec in data.backends]
    verdicts.sort(key=lambda v: (v.priority_index is None, v.priority_index or 0))
    messages = data.messages
    selected: str | None = None
    error: Diagnostic | None = None
    if requested is not None:
        reasons, raises = answers[requested]
        if raises:
            error = _outcome(data, catalog, "MP013", reasons[0].message.split(": ", 1)[-1], requested)
        elif reasons:
            text = messages.selected_invalid.format(backend=requested,
                                                    reasons=repr([d.message for d in reasons]))
            error = _outcome(data, catalog, "MP011", text, requested)
        else:
            selected = requested
    else:
        selected = next((name for name in order if not answers[name][0]), None)
        if selected is None:
            listed = messages.reasons_join.join(
                messages.reasons_item.format(name=name,
                                             reasons=", ".join(d.message for d in answers[name][0]))
                for name in order)
            config = messages.config_repr.format(**scope)
            error = _outcome(data, catalog, "MP010",
                             messages.no_valid_backend.format(config=config, reasons=listed), None)
    consulted: bool | None = None
    if decode_backend is not None:
        consulted = _truth(data.consulted, {**scope, "decode_backend": decode_backend})
    fatal = bool(error is not None and consulted and (
        requested is not None or _truth(data.auto_failure_fatal, scope)))
    warning = None
    if error is not None and consulted and not fatal and data.auto_failure_warning:
        entry = catalog.code(data.auto_failure_warning)
        warning = Diagnostic(code=entry.code, name=entry.name, severity=entry.severity,
                             message=entry.message, hint=entry.hint)
    return MLAPrefillResult(
        engine=engine.engine,
        mode="explicit" if requested is not None else "auto",
        requested=requested,
        config=messages.config_repr.format(**scope),
        dimensions=dims,
        priority=tuple(order),
        verdicts=tuple(verdicts),
        selected=selected,
        error=error,
        consulted=consulted,
        fatal=fatal,
        warning=warning,
        environment=mla_environment(engine, catalog),
    )


def _backend_conditions(spec: BackendSpec) -> list[object]:
    return [
        spec.kv_cache_dtype_condition, spec.head_size_condition, spec.compute_capability,
        *(v.when for v in spec.kernel_block_sizes),
        *spec.features.model_dump().values(),
        *(r.when for r in spec.combination),
        *(value for fact in spec.facts
          for value in (fact.value, *(s.set for s in fact.steps), *(s.when for s in fact.steps))),
    ]


_ENVIRONMENT: dict[str, tuple[str, ...]] = {}


def _environment_of(engine: EngineData, data: MLAPrefillProfile | None) -> tuple[str, ...]:
    conditions: list[object] = []
    for spec in engine.backends.values():
        if spec.family == "mla":
            conditions.extend(_backend_conditions(spec))
    if data is not None:
        for backend in data.backends:
            conditions.extend((backend.compute_capability, backend.available, backend.import_error))
    names: set[str] = set()
    for condition in conditions:
        if isinstance(condition, str):
            names |= E.names_in(_parse(condition))
    by_fact = {f.name: f for f in engine.profile.facts}
    pending = [n for n in names if n in by_fact]
    while pending:
        fact = by_fact[pending.pop()]
        for value in (fact.value, *(s.set for s in fact.steps), *(s.when for s in fact.steps)):
            if isinstance(value, str):
                for name in E.names_in(_parse(value)) - names:
                    names.add(name)
                    if name in by_fact:
                        pending.append(name)
    return tuple(n for n in engine.profile.environment if n in names)


def mla_environment(engine: EngineData, catalog: Catalog) -> tuple[str, ...]:
    """The environment facts (package probes) that MLA attention backends and MLA prefill
    backends read, directly or through derived facts, in the profile's order."""
    key = f"{engine.engine}:{engine.platform}:{engine.directory}"
    if key not in _ENVIRONMENT:
        _ENVIRONMENT[key] = _environment_of(engine, load_mla_prefill(engine, catalog))
    return _ENVIRONMENT[key]
