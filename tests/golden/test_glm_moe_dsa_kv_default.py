"""GLM-5 (GlmMoeDsaForCausalLM) on SM10x: vLLM 0.32.0's and 0.33.0's
``GlmMoeDsaForCausalLM.verify_and_update_config`` turns an auto KV-cache dtype into
fp8_e4m3 (vllm/model_executor/models/config.py), which halves the latent rows and makes
FLASHINFER_MLA_SPARSE the choice; 0.31.0 keeps auto. Expected values: vLLM building the
model on the emulated SM90 / SM100 (tools/model_driven_reference.py --backends
--kv-cache-dtype auto, zai-org/GLM-5's config): tests/golden/vllm_models/glm_moe_dsa/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.test_config_fuzz import run_cli
from tests.recorded import release_builds

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/golden/vllm_models/glm_moe_dsa"
CONFIG = "tests/fixtures/hf_configs/zai-org--GLM-5.json"
DEVICE = {"9.0": "H200", "10.0": "B200"}


ANSWERS = release_builds(GOLDEN)


def test_every_release_and_gpu_is_recorded() -> None:
    assert {(r, a["capability"]) for r, a in ANSWERS} == {
        (r, c) for r in ("0.31.0", "0.32.0", "0.33.0") for c in ("9.0", "10.0")}


@pytest.mark.parametrize(("release", "answer"), ANSWERS,
                         ids=[f"{r}-sm{a['capability']}" for r, a in ANSWERS])
def test_the_cache_dtype_backend_and_bytes_are_vllms(release: str, answer: dict[str, Any]
                                                     ) -> None:
    code, out, err = run_cli(["check", "--device", DEVICE[answer["capability"]], "--engine",
                              f"vllm=={release}", "-f", "json", "--", "vllm", "serve", CONFIG])
    assert code in (0, 1), err  # the weights do not fit one GPU: the KV plan is still made
    report = json.loads(out)
    attention = [layer for layer in answer["layers"] if layer["spec"] == "MLAAttentionSpec"
                 and layer["module"] != "DeepseekV32IndexerCache"]
    theirs = {layer["backend"] for layer in attention}
    assert {row["check"]["selected"] for row in report["layers"]} == theirs
    dtypes = {layer["cache_dtype_str"] for layer in attention}
    assert dtypes == {report["plan"]["kv_cache_dtype"]}
    per_token = sum(layer["page_size_bytes"] / layer["block_size"] for layer in answer["layers"])
    assert report["plan"]["groups"][0]["bytes_per_token"] == per_token
