#!/usr/bin/env python3
"""Compare two sweep JSON Lines files line by line (ours vs the oracle's).

Each line is ``{"input": ..., "backends": {NAME: [reason, ...]}, "selected":
NAME | null, "error": text | null, ...}`` (see ``oracle_to_sweep.py``).
Line i of OURS is compared with line i of THEIRS:

* ``backends``: per backend, the reason lists must be exactly equal (same
  strings, same order, duplicates kept). A backend missing on one side is a
  difference (shown as ``null``) unless ``--only-common-backends``;
* ``selected``: equal names (or both null);
* ``error``: equal text (or both null). ``error_kind`` (the error without its
  config-specific details, e.g. "No valid attention backend found") is
  reported too, for information;
* ``input``: when both lines carry one, the configs must be equal (else the
  files are not aligned). Lines of ``attn-select sweep`` carry no input; the
  oracle's do, so examples are taken from THEIRS.

Prints the agreement per field and the differences grouped by (field,
backend, ours, theirs) with counts and example inputs. Exit status 0 when
nothing differs, 1 otherwise, 2 on unreadable input.

    python tools/compare_sweep.py ours.jsonl tests/golden/oracle/vllm-0.33.0/standard.jsonl.gz
    python tools/compare_sweep.py ours.jsonl theirs.jsonl --json --max-examples 3

Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections.abc import Iterable
from typing import Any

Record = dict[str, Any]

_NO_VALID = re.compile(r"^(?:ValueError: )?No valid attention backend found")
_FORCED = re.compile(
    r"^(?:ValueError: )?Selected backend (?:AttentionBackendEnum\.)?(\S+) is not valid")


def error_kind(error: str | None) -> str | None:
    """The error text without the parts that depend on the config.

    "No valid attention backend found for cuda with AttentionSelectorConfig(...).
    Reasons: {...}." -> "No valid attention backend found";
    "Selected backend AttentionBackendEnum.X is not valid for this configuration.
    Reason: [...]" -> "Selected backend X is not valid"; "bad input: ..." ->
    "bad input"; anything else is returned unchanged.
    """
    if error is None:
        return None
    if _NO_VALID.match(error):
        return "No valid attention backend found"
    m = _FORCED.match(error)
    if m:
        return f"Selected backend {m.group(1)} is not valid"
    if error.startswith("bad input:"):
        return "bad input"
    if error.startswith("VllmConfig rejected the input:"):
        return "VllmConfig rejected the input"
    return error


def read_jsonl(path: str) -> list[Record]:
    """JSON lines from ``path`` (gzip-compressed when it ends in ``.gz``)."""
    out: list[Record] = []
    with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz")
          else open(path, encoding="utf-8")) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON: {e}") from e
            if not isinstance(rec, dict):
                raise ValueError(f"{path}:{n}: not a JSON object")
            out.append(rec)
    return out


class _Agreement:
    def __init__(self) -> None:
        self.agree = 0
        self.total = 0

    def add(self, ok: bool) -> None:
        self.total += 1
        self.agree += ok

    def as_dict(self) -> dict[str, Any]:
        pct = 100.0 * self.agree / self.total if self.total else 100.0
        return {"agree": self.agree, "total": self.total, "percent": round(pct, 3)}


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def compare(ours: list[Record], theirs: list[Record], *, max_examples: int = 1,
            only_common_backends: bool = False) -> dict[str, Any]:
    """Compare aligned sweep records; returns the report (see --json)."""
    n = min(len(ours), len(theirs))
    fields = {name: _Agreement() for name in
              ("input", "backends", "backend_lists", "selected", "error", "error_kind")}
    per_backend: dict[str, _Agreement] = {}
    groups: dict[tuple[str, str, str, str], dict[str, Any]] = {}

    def note(field: str, backend: str | None, pair: tuple[Any, Any], line: int,
             rec: Record, *, extra: dict[str, Any] | None = None) -> None:
        o, t = pair
        k = (field, backend or "", _key(o), _key(t))
        g = groups.get(k)
        if g is None:
            g = {"field": field, "backend": backend, "ours": o, "theirs": t,
                 "count": 0, "examples": []}
            groups[k] = g
        g["count"] += 1
        if len(g["examples"]) < max_examples:
            g["examples"].append({"line": line, "input": rec.get("input"), **(extra or {})})

    for i in range(n):
        o, t = ours[i], theirs[i]
        line = i + 1
        if "input" in o and "input" in t:  # `attn-select sweep` lines carry no input
            same_input = o["input"] == t["input"]
            fields["input"].add(same_input)
            if not same_input:
                note("input", None, (o["input"], t["input"]), line, t)
        ob: dict[str, Any] = o.get("backends") or {}
        tb: dict[str, Any] = t.get("backends") or {}
        names = list(tb) + [b for b in ob if b not in tb]
        if only_common_backends:
            names = [b for b in names if b in ob and b in tb]
        all_ok = True
        for b in names:
            ol, tl = ob.get(b), tb.get(b)
            ok = ol == tl
            fields["backend_lists"].add(ok)
            per_backend.setdefault(b, _Agreement()).add(ok)
            if not ok:
                all_ok = False
                note("backends", b, (ol, tl), line, t)
        fields["backends"].add(all_ok)
        osel, tsel = o.get("selected"), t.get("selected")
        fields["selected"].add(osel == tsel)
        if osel != tsel:
            note("selected", None, (osel, tsel), line, t)
        oerr, terr = o.get("error"), t.get("error")
        fields["error"].add(oerr == terr)
        okind, tkind = error_kind(oerr), error_kind(terr)
        fields["error_kind"].add(okind == tkind)
        if oerr != terr:
            # grouped by kind; the exact texts are in the examples
            note("error", None, (okind, tkind), line, t,
                 extra={"ours_text": oerr, "theirs_text": terr})

    diff_groups = sorted(groups.values(),
                         key=lambda g: (-g["count"], g["field"], g["backend"] or "",
                                        _key(g["ours"]), _key(g["theirs"])))
    exact = ("input", "backends", "selected", "error")
    identical = (len(ours) == len(theirs)
                 and all(fields[f].agree == fields[f].total for f in exact))
    return {
        "lines_ours": len(ours),
        "lines_theirs": len(theirs),
        "lines_compared": n,
        "identical": identical,
        "fields": {k: v.as_dict() for k, v in fields.items()},
        "per_backend": {k: v.as_dict() for k, v in sorted(per_backend.items())},
        "differences": diff_groups,
    }


def _fmt(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def render_text(report: dict[str, Any], *, ours_name: str = "ours",
                theirs_name: str = "theirs", max_groups: int = 0) -> Iterable[str]:
    yield (f"compared {report['lines_compared']} lines "
           f"({ours_name}: {report['lines_ours']}, {theirs_name}: {report['lines_theirs']})")
    if report["lines_ours"] != report["lines_theirs"]:
        yield "LINE COUNTS DIFFER"
    labels = {
        "input": "input (files aligned)",
        "backends": "backends (every list of the line equal)",
        "backend_lists": "backend reason lists",
        "selected": "selected",
        "error": "error",
        "error_kind": "error kind (informational)",
    }
    for k, label in labels.items():
        a = report["fields"][k]
        yield f"  {label:42s} {a['agree']:>8d}/{a['total']:<8d} {a['percent']:8.3f}%"
    bad = {b: a for b, a in report["per_backend"].items() if a["agree"] != a["total"]}
    if bad:
        yield "per backend (only those with differences):"
        for b, a in bad.items():
            yield f"  {b:42s} {a['agree']:>8d}/{a['total']:<8d} {a['percent']:8.3f}%"
    diffs = report["differences"]
    if not diffs:
        yield "no differences"
        return
    yield f"differences: {len(diffs)} groups, {sum(g['count'] for g in diffs)} in all"
    shown = diffs if max_groups <= 0 else diffs[:max_groups]
    for g in shown:
        where = g["field"] + (f" {g['backend']}" if g["backend"] else "")
        yield f"[{g['count']}x] {where}"
        yield f"    {ours_name}:   {_fmt(g['ours'])}"
        yield f"    {theirs_name}: {_fmt(g['theirs'])}"
        for ex in g["examples"]:
            yield f"    e.g. line {ex['line']}: {_fmt(ex['input'])}"
            if "ours_text" in ex:
                yield f"      {ours_name} text:   {_fmt(ex['ours_text'])}"
                yield f"      {theirs_name} text: {_fmt(ex['theirs_text'])}"
    if len(shown) < len(diffs):
        yield f"... {len(diffs) - len(shown)} more groups (--max-groups 0 shows all)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours", help="our sweep (JSON Lines)")
    ap.add_argument("theirs", help="the reference sweep, e.g. the oracle's (JSON Lines)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--max-examples", type=int, default=1,
                    help="example inputs per difference group (default 1)")
    ap.add_argument("--max-groups", type=int, default=50,
                    help="difference groups to print in text mode (0: all; default 50)")
    ap.add_argument("--only-common-backends", action="store_true",
                    help="ignore backends present in only one of the two lines")
    a = ap.parse_args(argv)
    try:
        ours, theirs = read_jsonl(a.ours), read_jsonl(a.theirs)
    except (OSError, ValueError) as e:
        print(f"compare_sweep: {e}", file=sys.stderr)
        return 2
    report = compare(ours, theirs, max_examples=a.max_examples,
                     only_common_backends=a.only_common_backends)
    if a.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        for line in render_text(report, ours_name="ours", theirs_name="theirs",
                                max_groups=a.max_groups):
            print(line)
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
