"""KV-cache layout resolution (reference 2.4) with vLLM's exact messages."""

from __future__ import annotations

import pytest

from selector.catalog import load_catalog
from selector.kv import EngineStartupError, resolve_layout, supported_layouts
from selector.kv.layout import validate_layout

FI_SM100 = ("LBHNC", "BLHNC")
ONE_SHAPE = {(8, 16, 65536)}
TWO_SHAPES = {(8, 16, 65536), (1, 1, 65536)}
_CATALOG = load_catalog()
DEFAULT = _CATALOG.default_layout_preference
ALIASES = _CATALOG.layout_aliases


def test_no_declarations_use_the_default_preference() -> None:
    assert tuple(supported_layouts([None, None], DEFAULT)) == DEFAULT
    assert resolve_layout(supported_layouts([None], DEFAULT), ONE_SHAPE, aliases=ALIASES).layout == "LBNHC"


def test_flashinfer_on_sm100_forces_hnd() -> None:
    supported = supported_layouts([None, FI_SM100, FI_SM100], DEFAULT)  # type: ignore[list-item]
    assert supported == ["LBHNC", "BLHNC"]
    resolution = resolve_layout(supported, ONE_SHAPE, aliases=ALIASES)
    assert resolution.layout == "LBHNC" and resolution.info == "Using LBHNC KV cache layout."


def test_disjoint_declarations_error() -> None:
    with pytest.raises(EngineStartupError) as info:
        supported_layouts([("LBNHC",), FI_SM100], DEFAULT)  # type: ignore[list-item]
    assert info.value.message == (
        "No KV cache layout satisfies every supported set: [['LBNHC'], ['LBHNC', 'BLHNC']]."
    )


def test_intersection_ranked_by_first_choice_then_enum_order() -> None:
    votes = supported_layouts([("LBNHC", "LBHNC"), ("LBHNC", "LBNHC"), ("LBNHC", "LBHNC")], DEFAULT)  # type: ignore[list-item]
    assert votes == ["LBNHC", "LBHNC"]
    tie = supported_layouts([("LBNHC", "LBHNC"), ("LBHNC", "LBNHC")], DEFAULT)  # type: ignore[list-item]
    assert tie == ["LBHNC", "LBNHC"]  # one vote each: enum order (LBHNC first)


def test_mixed_hnc_shapes_keep_block_compact_layouts() -> None:
    resolution = resolve_layout(["LHBNC", "LBNHC"], TWO_SHAPES, aliases=ALIASES)  # type: ignore[list-item]
    assert resolution.candidates == ("LBNHC",)
    with pytest.raises(EngineStartupError) as info:
        resolve_layout(["LHBNC", "BHLNC"], TWO_SHAPES, aliases=ALIASES)  # type: ignore[list-item]
    assert info.value.message == (
        "Specs with mixed HNC shapes need a block-compact layout, but none is in every "
        "supported set: [['LHBNC', 'BHLNC']]."
    )


def test_env_override_and_aliases() -> None:
    supported = supported_layouts([None], DEFAULT)
    assert resolve_layout(supported, ONE_SHAPE, requested="HND", aliases=ALIASES).layout == "LBHNC"
    assert resolve_layout(supported, ONE_SHAPE, requested="blnhc", aliases=ALIASES).layout == "BLNHC"
    with pytest.raises(EngineStartupError) as info:
        resolve_layout(["LBNHC"], ONE_SHAPE, requested="BLHNC", aliases=ALIASES)
    assert info.value.message == (
        "VLLM_KV_CACHE_LAYOUT=BLHNC does not satisfy every supported set; valid layouts: ['LBNHC']."
    )


def test_connector_preference() -> None:
    assert resolve_layout(list(FI_SM100), ONE_SHAPE, connector="BLHNC", aliases=ALIASES).layout == "BLHNC"
    resolution = resolve_layout(["LBNHC"], ONE_SHAPE, connector="HND", aliases=ALIASES)
    assert resolution.layout == "LBNHC"
    assert resolution.warnings == (
        "KV connector cache layout HND does not satisfy every supported set; valid layouts: "
        "['LBNHC']. Using LBNHC instead.",
    )


def test_validate_mixed_page_sizes() -> None:
    validate_layout("LBNHC", {65536}, 3)
    validate_layout("LBNHC", {8448, 73728}, 1)  # one group: block-compact is enough
    validate_layout("BLHNC", {8448, 73728}, 2)
    with pytest.raises(EngineStartupError) as info:
        validate_layout("LBNHC", {8448, 73728}, 2)
    assert info.value.message == (
        "KV cache layout LBNHC cannot express this model's mixed page sizes ([8448, 73728]); "
        "a backend should declare block-outermost supported layouts (e.g. BLHNC), or set "
        "VLLM_KV_CACHE_LAYOUT=BLHNC."
    )
