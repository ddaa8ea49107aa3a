"""Where vLLM's recorded answers live in the repository, per release."""

from __future__ import annotations

from pathlib import Path

from .locate import REPO

__all__ = ["ORACLE_GOLDEN", "PROFILE", "RELEASE_GOLDEN", "golden", "release_golden"]

ORACLE_GOLDEN = "tests/golden/oracle/vllm-{version}"
"""The answers of one release that the start-up, memory and parser tests read."""
RELEASE_GOLDEN = "tests/golden/oracle/releases/vllm-{version}"
"""The selection answers of one release (conformance samples, probe, config aliases)."""
PROFILE = "schemas/engines/vllm-{version}"
"""The release's engine profile folder (answers kept next to its data)."""


def golden(version: str, name: str, *, root: Path = REPO) -> Path:
    """``tests/golden/oracle/vllm-<version>/<name>`` under ``root``."""
    return root / ORACLE_GOLDEN.format(version=version) / name


def release_golden(version: str, name: str, *, root: Path = REPO) -> Path:
    """``tests/golden/oracle/releases/vllm-<version>/<name>`` under ``root``."""
    return root / RELEASE_GOLDEN.format(version=version) / name
