"""KV-cache tensor geometry of engines whose backends shape their own KV cache
(vLLM 0.25.1): ``get_kv_cache_shape``, ``get_kv_cache_stride_order`` and
``get_required_kv_cache_layout``, evaluated from a backend's ``runtime.kv_cache`` data.

Pure: no I/O, no torch.  Used by the solver (the report's KV-cache row) and by the
tests that compare with the oracle's ``kv_cache`` reports.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from selector import expr as E
from selector.schema.backend import BackendSpec, KVCacheShapeRule, split_shape

__all__ = [
    "CALL_NAMES",
    "KVCacheGeometryPlan",
    "KVCacheShape",
    "geometry",
    "kv_cache_shape",
    "required_layout",
    "stride_order",
]

CALL_NAMES = frozenset({"num_blocks", "block_size", "num_kv_heads", "head_size", "cache_dtype_str"})
"""Names a shape rule may read besides the request facts (the call's arguments)."""


@functools.cache
def _parse(text: str) -> E.Expr:
    return E.parse(text)


def _holds(condition: object, scope: Mapping[str, Any]) -> bool:
    if isinstance(condition, bool):
        return condition
    return bool(E.evaluate(_parse(str(condition)), scope))


@dataclass(frozen=True)
class KVCacheShape:
    """One ``get_kv_cache_shape`` answer: the rule's template and its values (an
    item whose inputs are unknown, e.g. ``num_blocks``, stays symbolic), or the
    exception text."""

    template: str | None
    values: tuple[int | str, ...] | None
    error: str | None

    def render(self) -> str:
        if self.error is not None:
            return self.error
        assert self.values is not None
        return "(" + ", ".join(str(v) for v in self.values) + ")"


@dataclass(frozen=True)
class KVCacheGeometryPlan:
    """What the selected backend allocates under the process-wide layout."""

    layout: str
    """``NHD`` or ``HND``: the backend's required layout, else the engine's default."""
    required_layout: str | None
    shape: KVCacheShape
    stride_order: tuple[int, ...] | None
    """Physical order of the shape's axes under ``layout`` (None: not implemented,
    i.e. the logical order)."""


def _first_shape_rule(rules: tuple[KVCacheShapeRule, ...],
                      scope: Mapping[str, Any]) -> KVCacheShapeRule | None:
    for rule in rules:
        if _holds(rule.when, scope):
            return rule
    return None


def kv_cache_shape(spec: BackendSpec, facts: Mapping[str, Any], *,
                   num_blocks: int | None, block_size: int,
                   num_kv_heads: int | None, head_size: int,
                   cache_dtype_str: str = "auto") -> KVCacheShape | None:
    """``get_kv_cache_shape(...)`` of ``spec`` (None when the data has no geometry)."""
    geometry_data = spec.runtime.kv_cache
    if geometry_data is None:
        return None
    scope = {**facts, "num_blocks": num_blocks, "block_size": block_size,
             "num_kv_heads": num_kv_heads, "head_size": head_size,
             "cache_dtype_str": cache_dtype_str}
    rule = _first_shape_rule(geometry_data.shape, scope)
    if rule is None:
        return KVCacheShape(None, None, "no shape rule applies")
    if rule.raises is not None:
        return KVCacheShape(None, None, rule.raises)
    assert rule.shape is not None
    values: list[int | str] = []
    for item in split_shape(rule.shape):
        parsed = _parse(item)
        if any(scope.get(name) is None for name in E.names_in(parsed)):
            values.append(item)
            continue
        value = E.evaluate(parsed, scope)
        values.append(int(value) if isinstance(value, (int, bool)) else str(value))
    return KVCacheShape(rule.shape, tuple(values), None)


def stride_order(spec: BackendSpec, layout: str) -> tuple[int, ...] | None:
    """``get_kv_cache_stride_order()`` under ``layout`` (None: not implemented)."""
    geometry_data = spec.runtime.kv_cache
    if geometry_data is None or geometry_data.stride_order is None:
        return None
    order = geometry_data.stride_order.get(layout)  # type: ignore[call-overload]
    return tuple(order) if order is not None else None


def required_layout(spec: BackendSpec, facts: Mapping[str, Any]) -> str | None:
    """``get_required_kv_cache_layout()``."""
    geometry_data = spec.runtime.kv_cache
    if geometry_data is None:
        return None
    for rule in geometry_data.required_layout:
        if _holds(rule.when, facts):
            return rule.layout
    return None


def geometry(spec: BackendSpec, facts: Mapping[str, Any], *, block_size: int,
             default_layout: str, num_blocks: int | None = None) -> KVCacheGeometryPlan | None:
    """The selected backend's KV-cache tensor: the layout the selector leaves in
    effect, the shape the model runner asks for (``cache_dtype_str`` = the KV-cache
    dtype; heads per rank from the model facts) and the stride order."""
    if spec.runtime.kv_cache is None:
        return None
    required = required_layout(spec, facts)
    layout = required or default_layout
    kv_dtype = facts.get("kv_cache_dtype")
    heads = facts.get("model_num_kv_heads")
    shape = kv_cache_shape(
        spec, facts, num_blocks=num_blocks, block_size=block_size,
        num_kv_heads=heads if isinstance(heads, int) else None,
        head_size=int(facts["head_size"]),
        cache_dtype_str=str(kv_dtype) if kv_dtype else "auto",
    )
    assert shape is not None
    return KVCacheGeometryPlan(layout=layout, required_layout=required, shape=shape,
                               stride_order=stride_order(spec, layout))
