"""Every vLLM release's committed oracle answers (real vLLM code) equal its profile's.

``tests/golden/oracle/releases/vllm-X/{standard,mla}.jsonl.gz`` are feature-covering
subsets of the conformance harness's samples (``tools/conformance.py X --golden``:
20,000 standard configs with seed 1 and 10,000 MLA configs with seed 2, answered by
vLLM X through the oracle). Compared: every backend's reason list (vLLM's strings, in
order), the selected backend and the error text. A profile without goldens fails:
goldens are never written by the tests.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from tests.golden.oracle_sweep import sweep_mismatches

ROOT = Path(__file__).parent / "oracle" / "releases"
# releases whose oracle goldens live elsewhere (tests/golden/oracle/vllm-X, older format)
COVERED_ELSEWHERE = {"vllm==0.25.1", "vllm==0.33.0"}


def _golden_files() -> list[Path]:
    return sorted(ROOT.glob("vllm-*/*.jsonl.gz"))


def _read(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_every_profiled_release_has_goldens() -> None:
    have = {p.parent.name.replace("vllm-", "vllm==", 1) for p in _golden_files()}
    missing = [n for n in load_catalog().engine_names if n not in have | COVERED_ELSEWHERE]
    assert not missing, f"no oracle goldens for {missing} (tools/conformance.py X --golden ...)"


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_release_agrees_with_vllm(path: Path) -> None:
    engine = path.parent.name.replace("vllm-", "vllm==", 1)
    cases = _read(path)
    assert len(cases) >= 300
    assert {c.get("vllm_version") for c in cases} == {engine.split("==", 1)[1]}
    data = load_catalog().engine(engine)
    mismatches = sweep_mismatches(cases, data)
    assert not mismatches, f"{len(mismatches)} differences, first: {mismatches[0]}"


def _probe_files() -> list[Path]:
    return sorted(ROOT.glob("vllm-*/probe.json.gz"))


def test_every_profiled_release_has_a_probe() -> None:
    have = {p.parent.name.replace("vllm-", "vllm==", 1) for p in _probe_files()}
    missing = [n for n in load_catalog().engine_names if n not in have]
    assert not missing, f"no release_probe answers for {missing} (tools/release_probe.py)"


@pytest.mark.parametrize("path", _probe_files(), ids=lambda p: p.parent.name)
def test_static_columns_equal_what_the_backend_classes_state(path: Path) -> None:
    """dtypes, KV-cache dtypes, head sizes, kernel block sizes, compute capabilities,
    MLA / sparse, attention types and feature flags per capability: the profile's
    columns against the answers of vLLM's own class methods (tools/release_probe.py)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import extract_static

    with gzip.open(path, "rt", encoding="utf-8") as f:
        probed = json.load(f)
    engine = load_catalog().engine(path.parent.name.replace("vllm-", "vllm==", 1))
    report = extract_static.check(engine, probed)
    assert not report["missing_in_profile"], report["missing_in_profile"]
    unknown = sorted(set(engine.backends) - set(probed["enum"]))
    assert not unknown, f"backends vLLM's AttentionBackendEnum lacks: {unknown}"
    assert not report["backends"], "\n".join(extract_static.render(report))
