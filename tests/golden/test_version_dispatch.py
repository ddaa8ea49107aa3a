"""A wrapper whose language model vLLM picks by the config's version field (the family's
``language_model.by_version``: MiniCPM-V, MiniCPM-o): the tool reads the decoder vLLM's
dispatch builds and refuses, in vLLM's words, the versions it refuses. vLLM's answers:
the reference's (tests/golden/vllm_models/vllm-0.33.0-*.jsonl.gz); no vLLM needed here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.models.hf_config import parse_config
from tools.model_agreement import load_answers

ROOT = Path(__file__).resolve().parents[2]


def _dispatched() -> list[dict[str, Any]]:
    out = []
    for answer in load_answers("vllm-0.33.0"):
        raw = json.loads((ROOT / str(answer["config"])).read_text())
        if raw["architectures"][0] in ("MiniCPMV", "MiniCPMO"):
            out.append(answer)
    return out


def test_every_dispatch_is_answered() -> None:
    names = {Path(str(a["config"])).stem for a in _dispatched()}
    assert {"MiniCPMV-2_5", "MiniCPMV-2_6", "MiniCPMV-4_0", "MiniCPMV-4_5", "MiniCPMV-4_6",
            "MiniCPMV-noversion", "MiniCPMV-2_x", "MiniCPMO-2_6", "MiniCPMO-4_5", "MiniCPMO-4",
            "MiniCPMO-v4_5"} <= names


@pytest.mark.parametrize("answer", _dispatched(), ids=lambda a: Path(str(a["config"])).stem)
def test_the_tool_refuses_as_vllm_does(answer: dict[str, Any]) -> None:
    raw = json.loads((ROOT / str(answer["config"])).read_text())
    facts = parse_config(raw, file=str(answer["config"]))
    if answer["status"] == "refused":
        # vLLM's words after the error type (a ValueError raised while ModelConfig is built
        # reaches the caller inside pydantic's ValidationError)
        assert facts.refusals, answer["error"]
        words = facts.refusals[0].split(": ", 1)[1]
        assert words in str(answer["error"]), (facts.refusals, answer["error"])
        # read by the wrapper's own family: mapped, so no AS132 beside the refusal
        assert facts.family in ("minicpmv_lm", "minicpmo_lm"), facts.family
    else:
        assert facts.refusals == ()
        assert facts.family is not None


def test_minicpm_v_2_0_is_refused_with_vllms_error() -> None:
    """MiniCPM-V 2.0 (no version field, hidden_size 2304, query_num 64: openbmb/MiniCPM-V-2's
    config.json, tests/fixtures/hf_configs/not_built/) makes MiniCPMV.__new__ read MiniCPMV2_0.packed_modules_mapping, which that
    class lacks (minicpmv.py:1944, :2481): vLLM raises AttributeError before building it
    (docs/models.md); the tool says so rather than planning a model vLLM cannot start."""
    path = ROOT / "tests" / "fixtures" / "hf_configs" / "not_built" / "openbmb--MiniCPM-V-2.json"
    raw = json.loads(path.read_text())
    assert "version" not in raw and (raw["hidden_size"], raw["query_num"]) == (2304, 64)
    facts = parse_config(raw, file=str(path))
    assert facts.refusals == (
        "AttributeError: type object 'MiniCPMV2_0' has no attribute 'packed_modules_mapping'",)
    assert parse_config({**raw, "hidden_size": 2048}, file="x").refusals == ()  # (2, 5)
