"""KV-cache layout resolution (reference 2.4; ``vllm/v1/attention/backends/utils.py``
and ``validate_kv_cache_layout`` in ``kv_cache_planning.py``)."""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from selector.kv.backend_facts import KVLayout
from selector.kv.errors import EngineStartupError

__all__ = [
    "ENUM_ORDER",
    "LayoutResolution",
    "is_block_compact",
    "is_block_outermost",
    "is_layer_compact",
    "resolve_layout",
    "supported_layouts",
    "validate_layout",
]

ENUM_ORDER: tuple[KVLayout, ...] = typing.get_args(KVLayout)
"""``KVCacheLayout`` member order."""


def is_layer_compact(layout: str) -> bool:
    return layout[0] == "L"


def is_block_compact(layout: str) -> bool:
    return set(layout[:2]) == {"L", "B"}


def is_block_outermost(layout: str) -> bool:
    return layout[0] == "B"


class LayoutResolution(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    layout: KVLayout
    candidates: tuple[KVLayout, ...]
    supported_sets: tuple[tuple[KVLayout, ...], ...]
    source: str
    """``cache_config``, ``VLLM_KV_CACHE_LAYOUT``, ``connector`` or ``default``."""
    warnings: tuple[str, ...] = ()
    info: str = ""


def _names(layouts: Sequence[str]) -> str:
    return "[" + ", ".join(repr(layout) for layout in layouts) + "]"


def supported_layouts(declared: Sequence[tuple[KVLayout, ...] | None],
                      default_preference: tuple[KVLayout, ...]) -> list[KVLayout]:
    """``get_supported_kv_cache_layouts``: the layouts every backend accepts, most
    preferred first; ``default_preference`` (``kv-layouts.yaml``) when none declares a set."""
    lists = [layouts for layouts in declared if layouts is not None] or [default_preference]
    first = lists[0]
    if all(layouts == first for layouts in lists[1:]):
        return list(first)
    votes: dict[str, int] = {}
    for layouts in lists:
        if layouts:
            votes[layouts[0]] = votes.get(layouts[0], 0) + 1
    common = set.intersection(*(set(layouts) for layouts in lists))
    candidates = sorted(
        (layout for layout in ENUM_ORDER if layout in common),
        key=lambda layout: votes.get(layout, 0),
        reverse=True,
    )
    if not candidates:
        listing = "[" + ", ".join(_names(layouts) for layouts in lists) + "]"
        raise EngineStartupError(
            f"No KV cache layout satisfies every supported set: {listing}.", stage="layout"
        )
    return candidates


def _canonical(name: str, aliases: Mapping[str, KVLayout]) -> KVLayout:
    upper = name.strip().upper()
    if upper in aliases:
        return aliases[upper]
    for layout in ENUM_ORDER:
        if layout == upper:
            return layout
    raise EngineStartupError(f"Unknown KV cache layout {name!r}.", stage="layout")


def resolve_layout(
    supported: Sequence[KVLayout],
    hnc_shapes: set[tuple[int, int, int]],
    *,
    requested: str | None = None,
    connector: str | None = None,
    aliases: Mapping[str, KVLayout],
) -> LayoutResolution:
    """``resolve_kv_cache_layout``: mixed ``(H, N, page)`` shapes keep only
    block-compact layouts; an explicit ``VLLM_KV_CACHE_LAYOUT`` must be a
    candidate; a connector's preference is taken when compatible. ``aliases``: the legacy
    names vLLM accepts for either (``kv-layouts.yaml``)."""
    sets = (tuple(supported),)
    candidates = list(supported)
    if len(hnc_shapes) > 1:
        candidates = [layout for layout in candidates if is_block_compact(layout)]
        if not candidates:
            raise EngineStartupError(
                "Specs with mixed HNC shapes need a block-compact layout, but none is in every "
                f"supported set: [{_names(supported)}].",
                stage="layout",
            )
    warnings: list[str] = []
    if requested is not None:
        layout = _canonical(requested, aliases)
        if layout not in candidates:
            raise EngineStartupError(
                f"VLLM_KV_CACHE_LAYOUT={requested} does not satisfy every supported set; "
                f"valid layouts: {_names(candidates)}.",
                stage="layout",
            )
        source = "VLLM_KV_CACHE_LAYOUT"
    elif connector is not None:
        layout = _canonical(connector, aliases)
        source = "connector"
        if layout not in candidates:
            warnings.append(
                f"KV connector cache layout {connector} does not satisfy every supported set; "
                f"valid layouts: {_names(candidates)}. Using {candidates[0]} instead."
            )
            layout = candidates[0]
            source = "default"
    else:
        layout = candidates[0]
        source = "default"
    return LayoutResolution(
        layout=layout,
        candidates=tuple(candidates),
        supported_sets=sets,
        source=source,
        warnings=tuple(warnings),
        info=f"Using {layout} KV cache layout.",
    )


def validate_layout(layout: str, page_sizes: set[int], num_groups: int) -> None:
    """``validate_kv_cache_layout``: mixed page sizes need a block-compact
    layout and, with several groups, one that is not layer-compact."""
    if len(page_sizes) <= 1:
        return
    if not is_block_compact(layout) or (num_groups > 1 and is_layer_compact(layout)):
        raise EngineStartupError(
            f"KV cache layout {layout} cannot express this model's mixed page sizes "
            f"({sorted(page_sizes)}); a backend should declare block-outermost supported "
            "layouts (e.g. BLHNC), or set VLLM_KV_CACHE_LAYOUT=BLHNC.",
            stage="layout",
        )
