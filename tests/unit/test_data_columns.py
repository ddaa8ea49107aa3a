"""Facts that moved from Python into the data files give what the code used to state.

Each table below is the value the code hard-coded before it became data; the catalog
must give the same for every engine profile (behaviour unchanged)."""

from __future__ import annotations

from typing import Any

import pytest

from selector.catalog import load_catalog

ENGINES = load_catalog().engine_names

_SUGGESTIONS_IN_CODE: tuple[tuple[str, Any, str, str], ...] = (
    ("block_size", None, "remove --block-size (let vLLM choose)", "remove --block-size (let vLLM choose)"),
    ("kv_cache_dtype", "auto", "--kv-cache-dtype auto", "use --kv-cache-dtype auto"),
    ("kv_cache_dtype", "fp8", "--kv-cache-dtype fp8", "use --kv-cache-dtype fp8"),
    ("kv_cache_dtype", "fp8_e4m3", "--kv-cache-dtype fp8_e4m3", "use --kv-cache-dtype fp8_e4m3"),
    ("kv_cache_dtype", "fp8_ds_mla", "--kv-cache-dtype fp8_ds_mla", "use --kv-cache-dtype fp8_ds_mla"),
    ("block_size", 16, "--block-size 16", "use --block-size 16"),
    ("block_size", 32, "--block-size 32", "use --block-size 32"),
    ("block_size", 64, "--block-size 64", "use --block-size 64"),
    ("block_size", 128, "--block-size 128", "use --block-size 128"),
    ("dtype", "bfloat16", "--dtype bfloat16", "use --dtype bfloat16"),
    ("dtype", "float16", "--dtype float16", "use --dtype float16"),
    ("use_batch_invariant", False, "unset VLLM_BATCH_INVARIANT", "unset VLLM_BATCH_INVARIANT"),
    ("flash_attn_version", None, "remove -ac.flash_attn_version", "remove -ac.flash_attn_version"),
    ("use_trtllm_attention", None, "remove -ac.use_trtllm_attention",
     "remove -ac.use_trtllm_attention"),
)


@pytest.mark.parametrize("engine", ENGINES)
def test_fix_suggestions_are_the_ones_the_solver_hard_coded(engine: str) -> None:
    suggestions = load_catalog().engine(engine).profile.suggestions
    stated = tuple((s.input, s.value, s.flag, s.text) for s in suggestions)
    assert stated == _SUGGESTIONS_IN_CODE
    assert all(type(s.value) is type(old[1]) for s, old in zip(suggestions, _SUGGESTIONS_IN_CODE, strict=True))


def test_layout_aliases_are_the_ones_the_code_hard_coded() -> None:
    assert load_catalog().layout_aliases == {"NHD": "LBNHC", "HND": "LBHNC"}
