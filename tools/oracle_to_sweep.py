#!/usr/bin/env python3
"""Convert the vLLM oracle's output (a JSON list) into sweep JSON Lines.

One output line per oracle result, in input order::

    {"input": <config>, "backends": {NAME: [reason, ...]}, "selected": NAME | null,
     "error": text | null, "priority": [...], "fa_version": int | null,
     "fa_version_for_config": int | null, ...}

* ``error`` is the oracle's ``selection_error`` without a leading
  ``"ValueError: "`` (anything else, e.g. ``"EXCEPTION AttributeError: ..."``,
  is kept verbatim), or the oracle's input ``error`` (``"bad input: ..."``)
  when it rejected the config (then ``backends`` is ``{}``).
* ``selected``: the oracle names an explicitly selected backend that is not in
  its evaluated set ``"<unregistered module.Class>"`` (e.g. ``B12X``,
  ``FLASH_ATTN_DIFFKV``). When the config forces that backend
  (``attention_backend``) and its reason list is empty, this is the forced
  backend and it is written under its registry name; the oracle's text is
  kept in ``selected_raw`` (and the oracle's ``internal_inconsistency``
  note, which its consistency check writes about that same name, is dropped).
* Optional keys, only when the oracle wrote them: ``preferred_block_size``
  (when not null), ``exceptions``, ``ignored_inputs``,
  ``internal_inconsistency``, ``vllm_version``; ``kv_cache`` (0.25.1) only
  with ``--kv-cache``.

    python tools/oracle_to_sweep.py OUT.json -o OUT.jsonl [--kv-cache]

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

VALUE_ERROR_PREFIX = "ValueError: "


def convert_one(result: dict[str, Any], *, kv_cache: bool = False) -> dict[str, Any]:
    """One oracle result -> one sweep record."""
    cfg = result.get("input")
    if "error" in result:  # the oracle rejected the input
        return {"input": cfg, "backends": {}, "selected": None, "error": result["error"],
                "priority": [], "fa_version": None, "fa_version_for_config": None}
    sel_err = result.get("selection_error")
    if isinstance(sel_err, str) and sel_err.startswith(VALUE_ERROR_PREFIX):
        sel_err = sel_err[len(VALUE_ERROR_PREFIX):]
    backends: dict[str, list[str]] = {k: list(v) for k, v in result["backends"].items()}
    selected = result.get("selected")
    selected_raw = None
    forced = cfg.get("attention_backend") if isinstance(cfg, dict) else None
    if (isinstance(selected, str) and selected.startswith("<unregistered ")
            and forced and backends.get(forced) == []):
        selected_raw, selected = selected, forced
    diag = result.get("diagnostics") or {}
    rec: dict[str, Any] = {
        "input": cfg,
        "backends": backends,
        "selected": selected,
        "error": sel_err,
        "priority": result.get("priority", []),
        "fa_version": diag.get("flash_attn_version"),
        "fa_version_for_config": diag.get("flash_attn_version_for_config"),
    }
    if selected_raw is not None:
        rec["selected_raw"] = selected_raw
    if result.get("preferred_block_size") is not None:
        rec["preferred_block_size"] = result["preferred_block_size"]
    for key in ("exceptions", "ignored_inputs", "internal_inconsistency"):
        if key in result:
            rec[key] = result[key]
    if selected_raw is not None and selected_raw in str(rec.get("internal_inconsistency")):
        # the oracle's own consistency check tripped over the same naming gap
        del rec["internal_inconsistency"]
    if kv_cache and "kv_cache" in result:
        rec["kv_cache"] = result["kv_cache"]
    if "vllm_version" in result:
        rec["vllm_version"] = result["vllm_version"]
    return rec


def convert(results: list[dict[str, Any]], *, kv_cache: bool = False) -> list[dict[str, Any]]:
    return [convert_one(r, kv_cache=kv_cache) for r in results]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("oracle_output", help="the oracle's JSON list ('-' for stdin)")
    ap.add_argument("-o", "--output", help="sweep JSON Lines file (default: stdout)")
    ap.add_argument("--kv-cache", action="store_true",
                    help="keep the oracle's 'kv_cache' report (vLLM 0.25.1) as key kv_cache")
    a = ap.parse_args(argv)
    if a.oracle_output == "-":
        results = json.load(sys.stdin)
    else:
        with open(a.oracle_output, encoding="utf-8") as f:
            results = json.load(f)
    if not isinstance(results, list):
        print("oracle output must be a JSON list", file=sys.stderr)
        return 2
    lines = "".join(json.dumps(r) + "\n" for r in convert(results, kv_cache=a.kv_cache))
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(lines)
    else:
        sys.stdout.write(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
