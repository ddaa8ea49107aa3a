#!/usr/bin/env python3
"""Pick a readable case corpus from oracle-verified sweep data.

For every (backend, reason code) pair that attn-select produces on the oracle's
sample, and every selected backend / error kind, keep the first config that
shows it, with the oracle's (vLLM's) answer as the expected value.  Writes one
JSON file per case into tests/cases/vllm-<version>/.

    python3 tools/make_cases.py /work/oracle-data/vllm-0.33.0/standard.sweep.jsonl \
        /work/oracle-data/vllm-0.33.0/mla.sweep.jsonl -o tests/cases/vllm-0.33.0
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import oracle  # noqa: F401  (the checkout's selector/ first on sys.path)

from selector.catalog import load_catalog
from selector.inputs.flat import facts_from_flat
from selector.solver import select
from selector.solver.compiled import compiled_for


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sweeps", nargs="+", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--engine", default="vllm==0.33.0")
    args = parser.parse_args()
    engine = load_catalog().engine(args.engine)
    compiled = compiled_for(engine.engine, catalog=load_catalog())
    wanted: dict[str, dict[str, object]] = {}
    for path in args.sweeps:
        for line in path.read_text().splitlines():
            case = json.loads(line)
            config = case["input"]
            facts, forced = facts_from_flat(config, engine.profile)
            outcome = select(compiled, {**compiled.defaults, **facts.stated}, forced)
            keys = [f"{b}-{code}" for b, rs in outcome.reasons.items()
                    if b in case["backends"] for code, _ in rs]
            keys.append(f"selected-{case['selected']}" + ("-explicit" if forced else ""))
            if case["error"]:
                keys.append("error-" + re.sub(r"[^a-z]+", "-", case["error"][:20].lower()).strip("-"))
            for key in keys:
                wanted.setdefault(key, case)
    args.output.mkdir(parents=True, exist_ok=True)
    for key, case in sorted(wanted.items()):
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)
        payload = {
            "covers": key,
            "input": case["input"],
            "expected": {"backends": case["backends"], "selected": case["selected"],
                         "error": case["error"]},
        }
        (args.output / f"{slug}.json").write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {len(wanted)} cases to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
