"""The committed oracle golden data (tests/golden/oracle) and tools/make_golden.py."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import make_golden  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "oracle"
FILES = {
    "vllm-0.33.0/standard.jsonl.gz": 2000,
    "vllm-0.33.0/mla.jsonl.gz": 1000,
    "vllm-0.25.1/all.jsonl.gz": 1000,
}


def _read(rel: str) -> list[dict[str, Any]]:
    text = gzip.decompress((GOLDEN / rel).read_bytes()).decode("utf-8")
    return [json.loads(x) for x in text.splitlines() if x.strip()]


@pytest.mark.parametrize(("rel", "minimum"), sorted(FILES.items()))
def test_golden_shape(rel: str, minimum: int) -> None:
    recs = _read(rel)
    assert len(recs) >= minimum
    version = rel.split("/", maxsplit=1)[0].removeprefix("vllm-")
    for r in recs:
        assert {"input", "backends", "selected", "error", "priority"} <= set(r)
        assert r["vllm_version"] == version
        assert isinstance(r["input"], dict) and "device_capability" in r["input"]
        assert all(isinstance(v, list) and all(isinstance(s, str) for s in v)
                   for v in r["backends"].values())
        assert (r["selected"] is None) != (r["error"] is None)
        assert not (r["error"] or "").startswith("ValueError: ")
        assert ("kv_cache" in r) == (version == "0.25.1")
        forced = r["input"].get("attention_backend")
        if r["selected"] is not None:
            assert r["backends"][r["selected"]] == []
            if forced is None:  # the first valid backend of the priority list
                valid = [b for b in r["priority"] if not r["backends"][b]]
                assert r["selected"] == valid[0]
            else:
                assert r["selected"] == forced


def test_golden_covers_every_backend_and_selection() -> None:
    std, mla = _read("vllm-0.33.0/standard.jsonl.gz"), _read("vllm-0.33.0/mla.jsonl.gz")
    selected = {r["selected"] for r in std + mla}
    assert {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT",
            "TRITON_MLA", "FLASHINFER_MLA", "FLASH_ATTN_MLA", "FLASHMLA", "CUTLASS_MLA",
            "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE", "FLASH_ATTN_MLA_SPARSE",
            "FLASHINFER_MLA_SPARSE_SM90", "FLASHINFER_MLA_SPARSE_SM120",
            "FLASH_ATTN_MLA_SPARSE_FA4", None} <= selected
    assert len(std[0]["backends"]) >= 19


def test_make_golden_covers_all_features(tmp_path: Path) -> None:
    def rec(i: int, reasons: list[str], selected: str | None, error: str | None) -> dict[str, Any]:
        return {"input": {"i": i}, "backends": {"A": reasons, "B": []}, "selected": selected,
                "error": error, "priority": ["A", "B"]}

    recs = [rec(i, [], "A", None) for i in range(50)]
    recs[17] = rec(17, ["rare reason"], "B", None)
    recs[33] = rec(33, ["x", "y"], None, "No valid attention backend found for cuda ...")
    idx, core = make_golden.select(recs, 5, seed=1)
    assert 17 in idx and 33 in idx and len(idx) == 5 and idx == sorted(idx)
    assert core <= 3
    assert make_golden.select(recs, 5, seed=1) == (idx, core)
    full = set().union(*(make_golden.features(r) for r in recs))
    assert set().union(*(make_golden.features(recs[i]) for i in idx)) == full

    src = tmp_path / "full.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "g.jsonl"
    assert make_golden.main([str(src), "-n", "4", "-o", str(out), "--drop-key", "priority"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 4 and all("priority" not in r for r in lines)
    packed = tmp_path / "g.jsonl.gz"  # the committed goldens are gzip, written reproducibly
    assert make_golden.main([str(src), "-n", "4", "-o", str(packed), "--drop-key", "priority"]) == 0
    first = packed.read_bytes()
    assert make_golden.main([str(src), "-n", "4", "-o", str(packed), "--drop-key", "priority"]) == 0
    assert packed.read_bytes() == first
    assert gzip.decompress(first).decode("utf-8") == out.read_text()
