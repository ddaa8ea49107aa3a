"""The CUDA-graph mode each model starts with, before any attention backend is read, is
vLLM's: ``compilation_config.cudagraph_mode`` after ``VllmConfig.__post_init__`` for every
config the model reference builds (tests/golden/oracle/vllm-0.33.0/cudagraph-mode.jsonl.gz,
recorded by tools/cudagraph_mode_oracle.py), against the KV options the tool derives for
the deployment (``defaults.yaml`` ``cudagraph_model_overrides``: a pooling model's PIECEWISE,
by the runner type of the profile's ``runner_types.json``; an encoder-decoder's
FULL_DECODE_ONLY; an architecture's own default, ``architecture_defaults``, which vLLM does
not log)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from selector.catalog import load_catalog
from selector.inputs.config import deployment_model, parse_deployment

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "oracle" / "vllm-0.33.0" / "cudagraph-mode.jsonl.gz"

NOT_MODELLED: dict[str, str] = {}
# LongcatFlashNgramForCausalLM's FULL (LongcatFlashNgramForCausalLMConfig, config.py:1194-1208)
# is modelled: defaults.yaml architecture_defaults, tests/golden/test_longcat_ngram_cudagraph.py
"""vLLM's answers the tool does not give yet, by runner type or architecture (named, so that
a fix shows here)."""


ARCHITECTURE_DEFAULTS = {
    arch for default in load_catalog().engine_defaults("vllm==0.33.0")
    .cudagraph_model_overrides.architecture_defaults for arch in default.architectures}


@cache
def _rows() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _gap(row: dict[str, Any]) -> str | None:
    return NOT_MODELLED.get(row["architecture"])


_OK = [row for row in _rows() if row["status"] == "ok"]
_MODELLED = [row for row in _OK if _gap(row) is None]


def test_every_kind_of_model_is_recorded() -> None:
    assert {row["is_encoder_decoder"] for row in _MODELLED} == {True, False}
    assert {row["runner_type"] for row in _MODELLED} == {"generate", "pooling"}


@pytest.mark.parametrize("row", _MODELLED, ids=[row["config"] for row in _MODELLED])
def test_the_mode_before_the_backends_is_vllms(row: dict[str, Any]) -> None:
    deployment = {"engine": "vllm==0.33.0", "device": "H200",
                  "model": str(REPO / row["config"]), "dtype": "bfloat16", "max_model_len": 2048}
    loaded = parse_deployment("deploy.yaml", yaml.safe_dump(deployment))
    _, _, options = deployment_model(loaded, load_catalog())
    assert options.cudagraph_mode == row["cudagraph_mode"]
    changed = row["cudagraph_mode"] != "FULL_AND_PIECEWISE"
    if row["architecture"] in ARCHITECTURE_DEFAULTS:
        assert options.cudagraph_override is None  # the hook logs nothing
        return
    assert (options.cudagraph_override is not None) == changed
    if row["runner_type"] == "pooling":
        assert options.cudagraph_override == ("Pooling models do not support full cudagraphs. "
                                              "Overriding cudagraph_mode to PIECEWISE.")
    elif changed:
        assert options.cudagraph_override == (
            "Encoder-decoder models do not support FULL_AND_PIECEWISE. Overriding "
            "cudagraph_mode to FULL_DECODE_ONLY.")


def test_the_gaps_are_what_vllm_does_without_the_tool() -> None:
    """The rows left out are exactly the named gaps, each a mode vLLM changes."""
    gaps = [row for row in _OK if _gap(row) is not None]
    assert all(row["cudagraph_mode"] != "FULL_AND_PIECEWISE" for row in gaps)


def test_an_architecture_default_is_recorded() -> None:
    assert {row["architecture"] for row in _MODELLED} >= ARCHITECTURE_DEFAULTS
