"""gpt-oss (GptOssForCausalLM): vLLM 0.25.1-0.33.0's
``GptOssForCausalLMConfig.verify_and_update_config`` (vllm/model_executor/models/config.py,
MODELS_CONFIG_MAP) sets ``max_cudagraph_capture_size`` 1024 when the user set no capture
sizes, so vLLM captures up to 1024 tokens on every GPU (not 512 off data-center
Blackwell: more graphs, more capture memory). LongcatFlashForCausalLM (no hook) is the
control.

Expected values: vLLM's ``EngineArgs.create_engine_config()`` on CPU
(tools/cudagraph_mode_oracle.py): ``compilation_config.cudagraph_capture_sizes`` with the
scheduler's ``max_num_seqs`` / ``max_num_batched_tokens``,
tests/golden/oracle/model_config_hooks/cudagraph-vllm-<release>.jsonl.gz."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from selector.catalog import load_catalog
from selector.inputs.config import deployment_model, parse_deployment, resolve_target
from selector.models.loader import load_model
from selector.pipeline.startup import model_capture_sizes

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/golden/oracle/model_config_hooks"
RELEASES = ("0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0",
            "0.32.0", "0.33.0")
CHECKED = {"GptOssForCausalLM", "LongcatFlashForCausalLM"}


def _answers() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for release in RELEASES:
        with gzip.open(GOLDEN / f"cudagraph-vllm-{release}.jsonl.gz", "rt") as lines:
            out += [(release, a) for a in map(json.loads, lines)
                    if a["status"] == "ok" and a["architecture"] in CHECKED]
    return out


ANSWERS = _answers()


def test_every_release_records_gpt_oss_at_1024() -> None:
    gpt_oss = [(r, a) for r, a in ANSWERS if a["architecture"] == "GptOssForCausalLM"]
    assert {r for r, _ in gpt_oss} == set(RELEASES)
    assert {a["max_cudagraph_capture_size"] for _, a in gpt_oss} == {1024}
    control = {a["max_cudagraph_capture_size"] for r, a in ANSWERS
               if a["architecture"] != "GptOssForCausalLM"}
    assert control and 1024 not in control


@pytest.mark.parametrize(("release", "answer"), ANSWERS,
                         ids=[f"{r}-{Path(a['config']).stem}" for r, a in ANSWERS])
def test_the_capture_sizes_are_vllms(release: str, answer: dict[str, Any]) -> None:
    capture = load_catalog().engine_defaults(f"vllm=={release}").cudagraph_capture
    sizes = capture.sizes(answer["max_num_seqs"], answer["max_num_batched_tokens"], 90,
                          architecture=answer["architecture"])
    assert list(sizes) == answer["cudagraph_capture_sizes"]


@pytest.mark.parametrize("release", RELEASES)
def test_a_gpt_oss_deployment_on_h200_captures_up_to_1024(release: str) -> None:
    catalog = load_catalog()
    config = ROOT / "tests/fixtures/hf_configs/openai--gpt-oss-20b.json"
    deployment = {"engine": f"vllm=={release}", "device": "H200", "model": str(config),
                  "dtype": "bfloat16", "max_model_len": 2048}
    loaded = parse_deployment("deploy.yaml", yaml.safe_dump(deployment))
    target = resolve_target(loaded, catalog)
    assert target.serve is not None and max(target.serve.cudagraph_capture_sizes) == 512
    model, _, options = deployment_model(loaded, catalog, target)
    sizes = model_capture_sizes(catalog, target, model, options, 1)
    assert max(sizes) == 1024
    assert model_capture_sizes(catalog, target, load_model(
        str(ROOT / "tests/fixtures/hf_configs/edge/longcat-flash-chat-shape.json")),
        options, 1) == target.serve.cudagraph_capture_sizes
