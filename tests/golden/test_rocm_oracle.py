"""vLLM's ROCm platform: every release's recorded answers (real ``RocmPlatform`` code,
``tools/rocm_oracle_sample.py``: 10,000 standard + 5,000 MLA configs per release over the
catalog's gfx architectures, AITER installed or not and the ``VLLM_ROCM_*`` switches)
equal the profile's ROCm selection: every backend's reason list (vLLM's strings, in
order), the selected backend and the error text, 100%."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from tests.golden.oracle_sweep import sweep_mismatches
from tests.golden.rocm_oracle import golden_files, read_cases, to_flat

FAMILY_SIZES = {"rocm-standard.jsonl.gz": 10000, "rocm-mla.jsonl.gz": 5000}
NOT_RECORDED: set[str] = {f"vllm=={v}" for v in (
    "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0")}
"""Profiled releases whose ROCm answers are not recorded yet (each one's ROCm data is
then unchecked): none may be left when the list is emptied."""


def test_every_profiled_release_has_rocm_answers() -> None:
    have = {p.parent.name.replace("vllm-", "vllm==", 1) for p in golden_files()}
    missing = {n for n in load_catalog().engine_names if n not in have}
    assert missing == NOT_RECORDED, (
        f"ROCm oracle answers missing for {sorted(missing - NOT_RECORDED)} "
        f"(tools/rocm_oracle_sample.py X); recorded now: {sorted(NOT_RECORDED - missing)}")


@pytest.mark.parametrize("path", golden_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rocm_release_agrees_with_vllm(path: Path) -> None:
    engine = path.parent.name.replace("vllm-", "vllm==", 1)
    cases = read_cases(path)
    assert len(cases) == FAMILY_SIZES[path.name]
    assert {c["vllm_version"] for c in cases} == {engine.split("==", 1)[1]}
    data = load_catalog().engine(engine, "rocm")
    flat = [{"input": to_flat(c["input"], tuple(c.get("not_passed", ()))),
             "backends": c["backends"], "selected": c["selected"], "error": _error(c["error"])}
            for c in cases]
    mismatches = sweep_mismatches(flat, data)
    assert not mismatches, (f"{len(mismatches)} differences in {len(cases)} configs, first: "
                            + json.dumps(mismatches[0], default=str)[:1500])


def _error(text: str | None) -> str | None:
    """The oracle records the exception's type (``ValueError: ...``); the tool gives vLLM's
    message."""
    return text.removeprefix("ValueError: ") if text else text
