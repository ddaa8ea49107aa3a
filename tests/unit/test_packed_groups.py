"""The block-outermost packed grouping (``selector.kv.model_driven.packed_groups``) is
vLLM's ``_get_packed_kv_cache_groups`` (vllm/v1/core/kv_cache_planning.py:914-1041 in
0.33.0): for each recorded spec set (``tools/packed_groups_oracle.py``: Step5's layer
pattern at 8 and 16 layers, circular buffers wider than the block, a Mamba bucket beside
attention, sliding windows as state buckets) the pages and the groups are vLLM's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.kv import model_driven as md
from selector.kv.specs import (
    AnySpec,
    CircularBufferSpec,
    FullAttentionSpec,
    MambaSpec,
    SlidingWindowSpec,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "kv" / "packed-groups-vllm-0.33.0.json"
_BYTES = {"bfloat16": 2, "uint8": 1, "float32": 4}


def _cases() -> list[dict[str, Any]]:
    return list(json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"])


def _spec(raw: dict[str, Any]) -> AnySpec:
    if raw["kind"] == "mamba":
        return MambaSpec(block_size=raw["block_size"], shapes=tuple(tuple(s) for s in raw["shapes"]),
                         dtype_bytes=tuple(_BYTES[d] for d in raw["dtypes"]),
                         dtypes=tuple(raw["dtypes"]), mamba_type="mamba2")
    fields = {"block_size": raw["block_size"], "num_kv_heads": raw["num_kv_heads"],
              "head_size": raw["head_size"], "head_size_v": raw["head_size_v"],
              "kv_cache_dtype": raw["dtype"], "dtype_bytes": _BYTES[raw["dtype"]],
              "tokens_per_state": raw["tokens_per_state"]}
    if raw["kind"] == "sliding":
        return SlidingWindowSpec(sliding_window=raw["sliding_window"], **fields)
    if raw["kind"] == "circular":
        return CircularBufferSpec(**fields)
    return FullAttentionSpec(**fields)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: str(c["case"]))
def test_the_packed_groups_are_vllms(case: dict[str, Any]) -> None:
    specs = {raw["name"]: _spec(raw) for raw in case["specs"]}
    assert {n: s.page_size_bytes for n, s in specs.items()} == case["pages"]
    groups, padded = md.packed_groups(specs, "packed")
    assert groups == case["groups"] and padded == {}
