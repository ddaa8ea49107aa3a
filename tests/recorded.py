"""The engine the report snapshots were recorded under.

Golden reports (tests/golden/check, tests/golden/models, tests/golden/mla) pin this
engine with ``--engine``, so a newer profile that becomes the default leaves them
unchanged; tests about the default itself read it from the catalog
(``load_catalog().default_engine``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

__all__ = ["RECORDED_ENGINE", "pinned", "release_builds"]

RECORDED_ENGINE = "vllm==0.33.0"


def pinned(argv: list[str]) -> list[str]:
    """``attn-select check ...`` argv with ``--engine RECORDED_ENGINE`` added before any ``--``."""
    if "--" in argv:
        cut = argv.index("--")
        return [*argv[:cut], "--engine", RECORDED_ENGINE, *argv[cut:]]
    return [*argv, "--engine", RECORDED_ENGINE]


def release_builds(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """(release, answer) of every model build vLLM recorded in ``folder``'s
    ``vllm-<release>.jsonl.gz`` files (the reference's lines with ``layers``), by release."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(folder.glob("vllm-*.jsonl.gz")):
        release = path.name.removeprefix("vllm-").removesuffix(".jsonl.gz")
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            out += [(release, a) for a in map(json.loads, lines) if "layers" in a]
    return out
