#!/usr/bin/env python3
"""vLLM's own block-outermost packed grouping (``_get_packed_kv_cache_groups``,
vllm/v1/core/kv_cache_planning.py:914-1041 in 0.33.0) for a few spec sets that reach
each of its branches: balanced buckets split by a common number of repeats, a
circular-buffer bucket capped at the states the widest block fits (Step5's tail rings),
Mamba state buckets, and sliding windows treated as state when nothing repeats.

Run with an oracle interpreter (vLLM installed, CPU only)::

    /work/.venvs/oracle-0.33.0/bin/python tools/packed_groups_oracle.py \\
        --out tests/golden/kv/packed-groups-vllm-0.33.0.json

Each case lists its specs (the fields vLLM's spec classes take); vLLM's answer is the
layer names of each group in order. ``tests/unit/test_packed_groups.py`` builds the same
specs with ``selector.kv.specs`` and compares ``selector.kv.model_driven.packed_groups``.
The harness supplies a duck-typed config (the resolved layout BLNHC, block-outermost);
vLLM's code is called, never copied.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def _attention(name: str, kind: str, *, block: int = 16, heads: int = 8, head: int = 128,
               head_v: int | None = None, tokens_per_state: int = 1,
               window: int | None = None, dtype: str = "bfloat16") -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "kind": kind, "block_size": block, "num_kv_heads": heads,
                            "head_size": head, "head_size_v": head if head_v is None else head_v,
                            "dtype": dtype, "tokens_per_state": tokens_per_state}
    if window is not None:
        spec["sliding_window"] = window
    return spec


def _mamba(name: str, *, block: int = 16, shapes: tuple[tuple[int, ...], ...] = ((4, 1024), (16, 64, 64))
           ) -> dict[str, Any]:
    return {"name": name, "kind": "mamba", "block_size": block, "shapes": [list(s) for s in shapes],
            "dtypes": ["bfloat16"] * len(shapes)}


def _step5(sliding: int, dsa: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(sliding + dsa):
        if i % (sliding // dsa + 1) != sliding // dsa:
            out.append(_attention(f"l{i}.attn", "sliding", heads=8, head=192, window=512))
            continue
        out.append(_attention(f"l{i}.attn", "full", heads=8, head=192))
        out.append(_attention(f"l{i}.summary", "full", heads=1, head=256, head_v=0,
                              tokens_per_state=8, dtype="uint8"))
        out.append(_attention(f"l{i}.ring", "circular", heads=1, head=3072, head_v=0))
    return out


CASES: dict[str, list[dict[str, Any]]] = {
    # Step5's 8-layer synthetic config (3 sliding : 1 DSA): 5 groups
    "step5_8": _step5(6, 2),
    # 12 sliding : 4 DSA: the rings fit two per widest block
    "step5_16": _step5(12, 4),
    # rings wider than the attention block: one ring per group
    "rings_wide": [
        *(_attention(f"a{i}", "full", heads=1, head=64) for i in range(2)),
        *(_attention(f"s{i}", "full", heads=1, head=256, head_v=0, tokens_per_state=8,
                     dtype="uint8") for i in range(2)),
        *(_attention(f"r{i}", "circular", heads=4, head=1024, head_v=0) for i in range(3)),
    ],
    # attention with two page sizes and a Mamba bucket
    "mamba_hybrid": [
        *(_attention(f"a{i}", "full", heads=8, head=128) for i in range(4)),
        *(_attention(f"b{i}", "full", heads=2, head=128) for i in range(4)),
        *(_mamba(f"m{i}") for i in range(6)),
    ],
    # unbalanced full bucket (nothing repeats): sliding windows are state buckets
    "sliding_as_state": [
        *(_attention(f"a{i}", "full", heads=8, head=128) for i in range(3)),
        _attention("b0", "full", heads=2, head=128),
        *(_attention(f"w{i}", "sliding", heads=8, head=128, window=1024) for i in range(5)),
    ],
}


def _vllm_spec(raw: dict[str, Any]) -> Any:
    import torch
    from vllm.v1 import kv_cache_interface as kvi

    dtype = getattr(torch, raw.get("dtype", "bfloat16"))
    if raw["kind"] == "mamba":
        return kvi.MambaSpec(block_size=raw["block_size"], shapes=tuple(tuple(s) for s in raw["shapes"]),
                             dtypes=tuple(getattr(torch, d) for d in raw["dtypes"]))
    fields = {"block_size": raw["block_size"], "num_kv_heads": raw["num_kv_heads"],
              "head_size": raw["head_size"], "head_size_v": raw["head_size_v"], "dtype": dtype,
              "tokens_per_state": raw["tokens_per_state"]}
    if raw["kind"] == "sliding":
        return kvi.SlidingWindowSpec(sliding_window=raw["sliding_window"], **fields)
    if raw["kind"] == "circular":
        return kvi.CircularBufferSpec(**fields)
    return kvi.FullAttentionSpec(**fields)


def answer(specs: list[dict[str, Any]]) -> dict[str, Any]:
    from vllm.v1.core.kv_cache_planning import _get_packed_kv_cache_groups
    from vllm.v1.kv_cache_layout import KVCacheLayout

    config = SimpleNamespace(cache_config=SimpleNamespace(
        get_resolved_kv_cache_layout=lambda: KVCacheLayout.BLNHC))
    built = {raw["name"]: _vllm_spec(raw) for raw in specs}
    groups = _get_packed_kv_cache_groups(config, built)  # type: ignore[arg-type]
    return {"pages": {n: s.page_size_bytes for n, s in built.items()},
            "groups": None if groups is None else [list(g.layer_names) for g in groups]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import vllm

    cases = [{"case": name, "specs": specs, **answer(specs)} for name, specs in CASES.items()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"vllm_version": vllm.__version__, "cases": cases}, indent=1,
                                   sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
