"""The one comparison of the oracle goldens: the tool's ``sweep`` lines for vLLM's recorded
inputs against vLLM's recorded answers, per backend reason list, selection and error."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from selector.catalog import EngineData, load_catalog
from selector.sweep import sweep_lines

__all__ = ["sweep_mismatches"]


def sweep_mismatches(cases: Sequence[Mapping[str, Any]], data: EngineData) -> list[tuple[Any, ...]]:
    """(input, field, ours, vLLM's) for every field where the tool's line differs."""
    ours = [json.loads(line) for line in sweep_lines((json.dumps(c["input"]) for c in cases), data, catalog=load_catalog())]
    mismatches: list[tuple[Any, ...]] = []
    for case, mine in zip(cases, ours, strict=True):
        for backend, reasons in case["backends"].items():
            if mine["backends"].get(backend) != reasons:
                mismatches.append((case["input"], backend, mine["backends"].get(backend), reasons))
        for key in ("selected", "error"):
            if mine[key] != case[key]:
                mismatches.append((case["input"], key, mine[key], case[key]))
    return mismatches
