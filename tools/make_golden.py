#!/usr/bin/env python3
"""Pick a coverage-maximising subset of a sweep JSON Lines file (golden data).

Every "feature" that occurs in the full sweep occurs at least once in the
subset; the rest of the subset is filled with a seeded random sample. Features:

* ``(backend, reason string)`` for every reason in every backend's list;
* ``(backend, [])`` for every backend that is valid somewhere;
* the selected backend (including null);
* the error kind (``compare_sweep.error_kind``: the error without its
  config-specific details; including null);
* the priority list;
* with a ``kv_cache`` report (vLLM 0.25.1): the layout, every per-backend
  fact and error text, and each backend's shape (rank or error) per KV-cache
  dtype.

The covering lines are chosen greedily (most uncovered features first, ties
broken by the seeded shuffle), so the covering core stays small. Lines are
written in their original order, re-serialised compactly.

    python tools/make_golden.py FULL.sweep.jsonl -n 2000 --seed 0 -o GOLDEN.jsonl
    python tools/make_golden.py FULL.sweep.jsonl -n 1000 --drop-key kv_cache ...

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

import oracle
from compare_sweep import error_kind, read_jsonl

Record = dict[str, Any]
Feature = tuple[str, ...]


def features(rec: Record) -> set[Feature]:
    out: set[Feature] = set()
    for backend, reasons in (rec.get("backends") or {}).items():
        if not reasons:
            out.add(("valid", backend))
        for reason in reasons:
            out.add(("reason", backend, reason))
    out.add(("selected", str(rec.get("selected"))))
    out.add(("error_kind", str(error_kind(rec.get("error")))))
    out.add(("priority", *rec.get("priority", [])))
    kv = rec.get("kv_cache")
    if isinstance(kv, dict):
        out |= _kv_cache_features(kv, rec)
    return out


def _kv_cache_features(kv: dict[str, Any], rec: Record) -> set[Feature]:
    """vLLM 0.25.1's kv_cache report: the layout, and per backend every
    non-shape fact, every error text, and a shape per KV-cache dtype."""
    out: set[Feature] = {("kv_layout", str(kv.get("layout")))}
    kv_dtype = str((rec.get("input") or {}).get("kv_cache_dtype"))
    for backend, entry in (kv.get("backends") or {}).items():
        if not isinstance(entry, dict):
            out.add(("kv", backend, json.dumps(entry)))
            continue
        for key, value in entry.items():
            if key == "kv_cache_stride_order" and isinstance(value, dict):
                for layout, order in value.items():
                    out.add(("kv", backend, key, layout, json.dumps(order)))
            elif key.startswith("kv_cache_shape"):
                shape = value if isinstance(value, str) else f"rank {len(value)}"
                out.add(("kv", backend, key, kv_dtype, shape))
            else:
                out.add(("kv", backend, key, json.dumps(value, sort_keys=True)))
    return out


def select(records: list[Record], n: int, seed: int) -> tuple[list[int], int]:
    """Indices (sorted) of the subset, and how many of them form the covering core."""
    rng = random.Random(seed)
    feats = [features(r) for r in records]
    order = list(range(len(records)))
    rng.shuffle(order)
    uncovered: set[Feature] = set().union(*feats) if feats else set()
    chosen: list[int] = []
    chosen_set: set[int] = set()
    while uncovered:
        best, best_gain = -1, 0
        for i in order:
            if i in chosen_set:
                continue
            gain = len(feats[i] & uncovered)
            if gain > best_gain:
                best, best_gain = i, gain
        chosen.append(best)
        chosen_set.add(best)
        uncovered -= feats[best]
    core = len(chosen)
    for i in order:
        if len(chosen) >= n:
            break
        if i not in chosen_set:
            chosen.append(i)
            chosen_set.add(i)
    return sorted(chosen), core


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", help="full sweep JSON Lines")
    ap.add_argument("-n", type=int, required=True, help="subset size (at least the core)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--drop-key", action="append", default=[],
                    help="top-level key to leave out of the written lines (repeatable)")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    records = read_jsonl(a.sweep)
    idx, core = select(records, a.n, a.seed)
    text = "".join(json.dumps({k: v for k, v in records[i].items() if k not in a.drop_key},
                              separators=(",", ":")) + "\n" for i in idx)
    # a .gz output is reproducible: the same input gives the same bytes
    (oracle.write_gz if a.output.endswith(".gz") else oracle.write_bytes)(a.output, text.encode())
    nfeat = len(set().union(*(features(r) for r in records))) if records else 0
    print(f"{a.output}: {len(idx)} of {len(records)} lines; {nfeat} features covered "
          f"by a core of {core} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
