"""LongCat-Flash n-gram (LongcatFlashNgramForCausalLM): vLLM 0.26.0-0.33.0's
``LongcatFlashNgramForCausalLMConfig.verify_and_update_config``
(vllm/model_executor/models/config.py, MODELS_CONFIG_MAP) sets ``cudagraph_mode`` FULL and
compilation mode NONE when the user set neither; without VLLM_COMPILE attention is no
split point, so a backend of UNIFORM_BATCH support (FLASH_ATTN_MLA, H200's choice) makes
the FULL mode FULL_DECODE_ONLY, not FULL_AND_PIECEWISE. 0.25.1 has neither the
architecture nor the hook. LongcatFlashForCausalLM (no hook) and gpt-oss are the controls.

Expected values: vLLM's ``EngineArgs.create_engine_config()`` and
``CompilationConfig.resolve_cudagraph_mode_and_sizes(UNIFORM_BATCH, FlashAttnMLABackend)``
on CPU (tools/cudagraph_mode_oracle.py --resolve UNIFORM_BATCH:FlashAttnMLABackend):
tests/golden/oracle/model_config_hooks/cudagraph-vllm-<release>.jsonl.gz."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from selector.catalog import load_catalog
from selector.inputs.config import deployment_model, parse_deployment
from selector.kv.cudagraph import resolve_cudagraph_mode
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/golden/oracle/model_config_hooks"
RELEASES = ("0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0",
            "0.32.0", "0.33.0")
NGRAM = "LongcatFlashNgramForCausalLM"


def _answers() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for release in RELEASES:
        with gzip.open(GOLDEN / f"cudagraph-vllm-{release}.jsonl.gz", "rt") as lines:
            out += [(release, json.loads(line)) for line in lines if line.strip()]
    return out


ANSWERS = _answers()
OK = [(r, a) for r, a in ANSWERS if a["status"] == "ok"]


def test_every_release_is_recorded_and_the_hook_is_new_in_0_26_0() -> None:
    assert {r for r, _ in ANSWERS} == set(RELEASES)
    ngram = {r: a for r, a in OK if a["architecture"] == NGRAM}
    assert set(ngram) == set(RELEASES) - {"0.25.1"}
    refused = [a for r, a in ANSWERS if r == "0.25.1" and a["status"] == "refused"]
    assert refused and all(NGRAM in a["error"] for a in refused)
    assert {(a["cudagraph_mode"], a["compilation_mode"], a["resolved_cudagraph_mode"])
            for r, a in OK if a["architecture"] == NGRAM} == {("FULL", "NONE", "FULL_DECODE_ONLY")}
    assert {(a["cudagraph_mode"], a["resolved_cudagraph_mode"])
            for r, a in OK if a["architecture"] != NGRAM} == {
        ("FULL_AND_PIECEWISE", "FULL_AND_PIECEWISE")}


@pytest.mark.parametrize(("release", "answer"), OK,
                         ids=[f"{r}-{Path(a['config']).stem}" for r, a in OK])
def test_the_mode_and_its_resolution_are_vllms(release: str, answer: dict[str, Any]) -> None:
    deployment = {"engine": f"vllm=={release}", "device": "H200",
                  "model": str(ROOT / answer["config"]), "dtype": "bfloat16",
                  "max_model_len": 2048}
    loaded = parse_deployment("deploy.yaml", yaml.safe_dump(deployment))
    _, _, options = deployment_model(loaded, load_catalog())
    assert options.cudagraph_mode == answer["cudagraph_mode"]
    assert options.cudagraph_override is None  # vLLM logs nothing for the hook
    assert options.vllm_compile == (answer["compilation_mode"] == "VLLM_COMPILE")
    resolution = resolve_cudagraph_mode(
        options.cudagraph_mode, answer["resolve_support"], answer["resolve_backend"],
        vllm_compile=options.vllm_compile,
        attention_in_splitting_ops=options.attention_in_splitting_ops)
    assert resolution.resolved == answer["resolved_cudagraph_mode"]


def test_a_mode_the_user_sets_is_kept() -> None:
    config = ROOT / "tests/fixtures/hf_configs/edge/longcat-flash-ngram-shape.json"
    deployment = {"engine": "vllm==0.33.0", "device": "H200", "model": str(config),
                  "dtype": "bfloat16", "max_model_len": 2048, "cudagraph_mode": "PIECEWISE"}
    loaded = parse_deployment("deploy.yaml", yaml.safe_dump(deployment))
    _, _, options = deployment_model(loaded, load_catalog())
    assert options.cudagraph_mode == "PIECEWISE"


def test_check_on_h200_reports_full_decode_only() -> None:
    code, out, err = run_cli(["check", "--device", "H200", "--engine", "vllm==0.33.0", "-f",
                              "json", "--", "vllm", "serve",
                              "tests/fixtures/hf_configs/edge/longcat-flash-ngram-shape.json"])
    assert code in (0, 1), err
    graphs = json.loads(out)["plan"]["cudagraph"]
    assert (graphs["requested"], graphs["min_support"], graphs["resolved"]) == (
        "FULL", "UNIFORM_BATCH", "FULL_DECODE_ONLY")
