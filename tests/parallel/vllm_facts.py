"""vLLM 0.33.0's own answers for the shard check, recorded by tools/parallel_oracle.py."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).parent.parent / "fixtures" / "parallel" / "vllm-0.33.0-parallel.json.gz"


@cache
def vllm_facts() -> dict[str, Any]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    assert data["vllm_version"] == "0.33.0"
    return data
