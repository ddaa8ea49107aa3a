"""The engine the report snapshots were recorded under.

Golden reports (tests/golden/check, tests/golden/models, tests/golden/mla) pin this
engine with ``--engine``, so a newer profile that becomes the default leaves them
unchanged; tests about the default itself read it from the catalog
(``load_catalog().default_engine``).
"""

from __future__ import annotations

__all__ = ["RECORDED_ENGINE", "pinned"]

RECORDED_ENGINE = "vllm==0.33.0"


def pinned(argv: list[str]) -> list[str]:
    """``attn-select check ...`` argv with ``--engine RECORDED_ENGINE`` added before any ``--``."""
    if "--" in argv:
        cut = argv.index("--")
        return [*argv[:cut], "--engine", RECORDED_ENGINE, *argv[cut:]]
    return [*argv, "--engine", RECORDED_ENGINE]
