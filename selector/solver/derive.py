"""Derive an engine profile's facts with the condition interpreter (the explaining path;
the compiled evaluator of :mod:`selector.solver.compiled` gives the same values)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from selector import expr as E
from selector.schema.engine import FactSpec

__all__ = ["derive_facts", "expression"]


def expression(value: object) -> E.Expr:
    """A rule's value as an expression: a string is parsed, anything else is a literal."""
    if isinstance(value, str):
        return E.parse(value)
    return E.Literal(value)  # type: ignore[arg-type]


def derive_facts(facts: Iterable[FactSpec], scope: dict[str, Any],
                 until: str | None = None) -> dict[str, tuple[str, ...]]:
    """Derive ``facts`` into ``scope``, stopping after ``until``; returns, per fact, the
    notes of the steps that applied."""
    applied: dict[str, tuple[str, ...]] = {}
    for fact in facts:
        scope[fact.name] = E.evaluate(expression(fact.value), scope)
        notes: list[str] = []
        for step in fact.steps:
            if E.evaluate(expression(step.when), scope):
                scope[fact.name] = E.evaluate(expression(step.set), scope)
                notes.append(step.note or f"when {step.when}")
        applied[fact.name] = tuple(notes)
        if fact.name == until:
            break
    return applied
