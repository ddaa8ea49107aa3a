"""tools/conformance.py and tools/make_sample.py: a release's own vocabulary drives its sample."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))

import conformance  # noqa: E402
import make_sample  # noqa: E402

PROBE = Path(__file__).resolve().parents[1] / "golden" / "oracle" / "releases" / "vllm-0.30.0" / "probe.json.gz"


@pytest.fixture(scope="module")
def probed() -> dict[str, object]:
    with gzip.open(PROBE, "rt", encoding="utf-8") as f:
        data: dict[str, object] = json.load(f)
    return data


def test_the_vocabulary_comes_from_the_release(probed: dict[str, object]) -> None:
    vocabulary = conformance.vocabulary("9.9.9", probed)  # a release make_sample does not know
    assert vocabulary["kv_cache_dtypes"] == probed["kv_cache_dtypes"]
    assert "FLASHINFER_MLA_SPARSE_SM90" in vocabulary["mla_backends"]
    assert "TRITON_FLASH_ATTN" in vocabulary["standard_backends"]
    assert not set(vocabulary["mla_backends"]) & set(vocabulary["standard_backends"])
    assert all(not n.startswith(("ROCM_", "CPU_", "XPU_", "AMX_")) for n in vocabulary["explicit_only"])


def test_a_registered_vocabulary_gives_a_deterministic_sample(probed: dict[str, object]) -> None:
    make_sample.register_vocabulary("9.9.9", conformance.vocabulary("9.9.9", probed))
    first = make_sample.generate("mla", 200, 5, "9.9.9")
    assert first == make_sample.generate("mla", 200, 5, "9.9.9")
    kv = set(conformance.vocabulary("9.9.9", probed)["kv_cache_dtypes"])
    assert {c["kv_cache_dtype"] for c in first} <= kv


def test_an_unknown_release_without_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="register_vocabulary"):
        make_sample.generate("standard", 1, 0, "0.0.1")


def test_the_table_shows_every_field() -> None:
    report = {"fields": {k: {"agree": 9, "total": 10} for _, k in conformance.TABLE_FIELDS}}
    lines = conformance.render_table({"X standard": conformance.table_row(report)})
    assert "configs" in lines[0] and "error text" in lines[0]
    assert lines[1].count("90.000%") == len(conformance.TABLE_FIELDS)
