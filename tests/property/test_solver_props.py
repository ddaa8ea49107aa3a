"""Solver invariants, checked on random requests (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from selector import expr as E
from selector.catalog import load_catalog
from selector.solver import explain_backend, select, solve
from selector.solver.compiled import compiled_for

from .strategies import FLAGS, facts

ENGINE = load_catalog().engine()
COMPILED = compiled_for(ENGINE.engine, catalog=load_catalog())
BACKENDS = sorted(ENGINE.backends)
CODES = set(load_catalog().codes)


def _full(f: dict[str, Any]) -> dict[str, Any]:
    return {**COMPILED.defaults, **f}


@settings(max_examples=300, deadline=None)
@given(facts(), st.sampled_from(BACKENDS))
def test_explicit_selection_never_returns_another_backend(f: dict[str, Any], backend: str) -> None:
    outcome = select(COMPILED, _full(f), backend)
    assert outcome.selected in (backend, None)
    assert (outcome.selected is None) == bool(outcome.reasons[backend])
    if outcome.selected is None:
        assert outcome.error


@settings(max_examples=300, deadline=None)
@given(facts())
def test_auto_selection_is_the_first_valid_backend_and_has_no_reasons(f: dict[str, Any]) -> None:
    outcome = select(COMPILED, _full(f), None)
    valid = [b for b in outcome.order if not outcome.reasons[b]]
    raised = any(outcome.reasons[b] and outcome.reasons[b][0][0].startswith("EX") for b in outcome.order)
    if raised:
        assert outcome.selected is None
    elif valid:
        assert outcome.selected == valid[0]
        assert outcome.reasons[outcome.selected] == []
    else:
        assert outcome.selected is None and outcome.error.startswith("No valid attention backend found")


REQUIREMENTS = [f for f in FLAGS if f not in ("use_mla", "use_sparse")]  # those two pick a layer kind


@settings(max_examples=300, deadline=None)
@given(facts(), st.sampled_from(REQUIREMENTS))
def test_adding_a_requirement_never_makes_an_invalid_backend_valid(f: dict[str, Any], flag: str) -> None:
    without = select(COMPILED, _full({**f, flag: False}), None)
    with_flag = select(COMPILED, _full({**f, flag: True}), None)
    for backend in BACKENDS:
        if without.reasons[backend]:
            assert with_flag.reasons[backend], (backend, flag)


@settings(max_examples=200, deadline=None)
@given(facts())
def test_every_emitted_code_is_registered_and_solving_is_deterministic(f: dict[str, Any]) -> None:
    first = select(COMPILED, _full(f), None)
    second = select(COMPILED, _full(f), None)
    assert first.reasons == second.reasons and first.selected == second.selected
    for reasons in first.reasons.values():
        assert {code for code, _ in reasons} <= CODES


@settings(max_examples=60, deadline=None)
@given(facts(), st.sampled_from(BACKENDS))
def test_interpreter_agrees_with_the_compiled_evaluator(f: dict[str, Any], backend: str) -> None:
    """``explain`` re-evaluates every rule with the interpreter; it must see the same failures."""
    result = solve(f, suggest=False, catalog=load_catalog())
    compiled_codes = [d.code for d in result.verdict(backend).reasons]
    rows = explain_backend(result, backend, catalog=load_catalog())
    spec = ENGINE.backends[backend]
    if spec.facts or any(r.raises for r in spec.combination):
        return  # local facts / exceptions are compiled-only features
    interpreted = [row["code"] for row in rows if row["failed"]]
    assert interpreted == compiled_codes


@settings(max_examples=200, deadline=None)
@given(facts())
def test_fact_derivation_interpreter_equals_compiled(f: dict[str, Any]) -> None:
    full = _full(f)
    _, _, derived = COMPILED.evaluate(full)
    scope = dict(full)
    for fact in ENGINE.profile.facts:
        scope[fact.name] = E.evaluate(E.parse(fact.value) if isinstance(fact.value, str)
                                      else E.Literal(fact.value), scope)
        for step in fact.steps:
            when = E.parse(step.when) if isinstance(step.when, str) else E.Literal(step.when)
            if E.evaluate(when, scope):
                scope[fact.name] = E.evaluate(E.parse(step.set) if isinstance(step.set, str)
                                              else E.Literal(step.set), scope)
        assert scope[fact.name] == derived[fact.name], fact.name
