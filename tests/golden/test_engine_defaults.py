"""Every release's ``defaults.yaml`` against vLLM's own answers on emulated GPUs
(tools/defaults_oracle.py -> tests/golden/oracle/vllm-X/defaults.jsonl.gz): the batch
defaults of every catalog device and of devices at vLLM's thresholds, the default
``gpu_memory_utilization`` and ``cudagraph_mode``, and the CUDA-graph capture sizes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.inputs.config import device_names

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tests" / "golden" / "oracle"
RECORDED = sorted(path.parent.name.removeprefix("vllm-")
                  for path in ORACLE.glob("vllm-*/defaults.jsonl.gz"))


def _answers(version: str) -> list[dict[str, Any]]:
    with gzip.open(ORACLE / f"vllm-{version}" / "defaults.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_every_release_is_recorded() -> None:
    """Every profile's defaults (its own defaults.yaml or the one it inherits) are
    compared with its release's answers."""
    assert set(RECORDED) == {name.removeprefix("vllm==") for name in load_catalog().engine_names}


@pytest.mark.parametrize("version", RECORDED)
def test_every_answer_is_vllms_not_a_failure(version: str) -> None:
    answers = _answers(version)
    assert answers and all(a["status"] == "ok" for a in answers), \
        [a["id"] for a in answers if a["status"] != "ok"]
    assert {a["vllm_version"] for a in answers} == {version}


@pytest.mark.parametrize("version", RECORDED)
def test_engine_defaults_match_vllm(version: str) -> None:
    table = load_catalog().engine_defaults(f"vllm=={version}")
    (engine,) = [a for a in _answers(version) if a["kind"] == "engine"]
    assert table.gpu_memory_utilization.value == engine["gpu_memory_utilization"]
    assert table.cudagraph_mode.value == engine["cudagraph_mode"]


@pytest.mark.parametrize("version", RECORDED)
def test_batch_defaults_match_vllm_on_every_device(version: str) -> None:
    catalog = load_catalog()
    table = catalog.engine_defaults(f"vllm=={version}")
    rows = [a for a in _answers(version) if a["kind"] == "batch"]
    # vLLM's CUDA platform answered for the CUDA devices (the ROCm ones are another oracle's)
    assert {a["device"] for a in rows if a["device"]} == {d.name for d in catalog.devices
                                                         if d.platform == "cuda"}
    for answer in rows:
        for context in ("LLM_CLASS", "OPENAI_API_SERVER"):
            tier = table.batch.tier((answer["name"],), answer["memory_bytes"], answer["capability"])
            assert tier.max_num_batched_tokens[context] == answer["max_num_batched_tokens"][context], \
                (answer["id"], context)
            assert tier.max_num_seqs[context] == answer["max_num_seqs"][context], (answer["id"], context)
        if answer["device"]:  # the names the tool matches for a catalog device give the same
            names = device_names(catalog.device(answer["device"]))
            assert table.batch_defaults(names, answer["memory_bytes"], answer["capability"]) == (
                answer["max_num_batched_tokens"]["OPENAI_API_SERVER"],
                answer["max_num_seqs"]["OPENAI_API_SERVER"]), answer["id"]


@pytest.mark.parametrize("version", RECORDED)
def test_capture_sizes_match_vllm(version: str) -> None:
    table = load_catalog().engine_defaults(f"vllm=={version}").cudagraph_capture
    rows = [a for a in _answers(version) if a["kind"] == "capture"]
    assert len(rows) >= 40
    for answer in rows:
        major, minor = answer["capability"].split(".")
        sizes = table.sizes(answer["max_num_seqs"], answer["max_num_batched_tokens"],
                            int(major) * 10 + int(minor))
        assert list(sizes) == answer["cudagraph_capture_sizes"], answer["id"]
        assert sizes[-1] == answer["max_cudagraph_capture_size"], answer["id"]
