"""The committed oracle answers (real vLLM code) must equal attn-select's, line for line.

The files under tests/golden/oracle/ were produced by the oracle harness running
vLLM itself (see tests/golden/oracle/README.md); no vLLM is needed here.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from selector.catalog import EngineData, load_catalog
from selector.inputs.flat import facts_from_flat
from selector.solver import derive_facts, evaluate_runtime
from tests.golden.oracle_sweep import sweep_mismatches

GOLDEN = Path(__file__).parent / "oracle"


def _cases(engine: str, name: str) -> list[dict[str, object]]:
    path = GOLDEN / f"vllm-{engine}" / f"{name}.jsonl.gz"
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line.strip()]


@pytest.mark.parametrize(("engine", "name", "minimum"), [
    ("0.33.0", "standard", 2000),
    ("0.33.0", "mla", 1000),
])
def test_oracle_golden_subset_agrees_exactly(engine: str, name: str, minimum: int) -> None:
    cases = _cases(engine, name)
    assert len(cases) >= minimum
    data = load_catalog().engine(f"vllm=={engine}")
    mismatches = sweep_mismatches(cases, data)
    assert not mismatches, f"{len(mismatches)} differences, first: {mismatches[0]}"


def test_golden_subsets_cover_every_selectable_outcome() -> None:
    """The CI subset is not trivial: many backends get selected, many reasons appear."""
    selected = set()
    reasons = set()
    for name in ("standard", "mla"):
        for case in _cases("0.33.0", name):
            selected.add(case["selected"])
            for backend, rs in case["backends"].items():  # type: ignore[union-attr]
                reasons.update((backend, r) for r in rs)
    assert len(selected) >= 15
    assert len(reasons) >= 400


def _preferred_block_size(engine: EngineData, config: dict[str, object], backend: str) -> int:
    """The data's answer to ``get_preferred_block_size(16)`` of the selected backend."""
    spec = engine.backends[backend]
    facts, _ = facts_from_flat(config, engine.profile)
    scope = facts.solver_facts()
    derive_facts(engine.profile.facts, scope)
    derive_facts(spec.facts, scope)
    return evaluate_runtime(spec, scope, "NONE", engine.profile.kv_cache_layout_default).preferred_block_size


@pytest.mark.parametrize(("engine", "name", "minimum"), [
    ("0.33.0", "standard", 400),
    ("0.33.0", "mla", 80),
    ("0.25.1", "all", 200),
])
def test_preferred_block_size_equals_vllms(engine: str, name: str, minimum: int) -> None:
    """The oracle records the winner's ``get_preferred_block_size(16)`` when no block size
    is pinned: the data's kernel block sizes must give the same value."""
    data = load_catalog().engine(f"vllm=={engine}")
    asked = [c for c in _cases(engine, name) if c.get("preferred_block_size") is not None]
    assert len(asked) >= minimum
    mismatches = [(c["input"], c["selected"], mine, c["preferred_block_size"]) for c in asked
                  if (mine := _preferred_block_size(data, c["input"], c["selected"]))  # type: ignore[arg-type]
                  != c["preferred_block_size"]]
    assert not mismatches, f"{len(mismatches)} differences, first: {mismatches[0]}"
