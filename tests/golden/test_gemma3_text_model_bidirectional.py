"""EmbeddingGemma's Gemma3TextModel: vLLM 0.25.1-0.33.0's
``Gemma3TextModelConfig.verify_and_update_model_config`` (vllm/model_executor/models/
config.py, MODELS_CONFIG_MAP) sets ``is_causal = not use_bidirectional_attention``, so a
bidirectional config builds an EncoderOnlyAttention per layer (gemma3.py) and no KV cache;
a causal one keeps its sliding-window and full-attention caches. Expected values: vLLM
building the model on the emulated SM90 (tools/model_driven_reference.py --capability 9.0
--backends --kv-cache-dtype auto, tests/fixtures/hf_configs/model_config_hooks/
Gemma3TextModel-{bidirectional,causal}.json: EmbeddingGemma-300m's shape, 6 layers): tests/golden/vllm_models/gemma3_text_model/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.test_config_fuzz import run_cli
from tests.recorded import release_builds

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/golden/vllm_models/gemma3_text_model"


ANSWERS = release_builds(GOLDEN)


def test_both_configs_are_recorded_in_every_release() -> None:
    releases = {r for r, _ in ANSWERS}
    assert "0.25.1" in releases and "0.33.0" in releases
    assert {(r, Path(a["config"]).stem) for r, a in ANSWERS} == {
        (r, f"Gemma3TextModel-{kind}") for r in releases for kind in ("bidirectional", "causal")}
    assert all(a["status"] == "ok" and a["architecture"] == "Gemma3TextModel"
               for _, a in ANSWERS)


@pytest.mark.parametrize(("release", "answer"), ANSWERS,
                         ids=[f"{r}-{Path(a['config']).stem}" for r, a in ANSWERS])
def test_the_layers_and_caches_are_vllms(release: str, answer: dict[str, Any]) -> None:
    code, out, err = run_cli(["check", "--device", "H200", "--engine", f"vllm=={release}",
                              "-f", "json", "--", "vllm", "serve", answer["config"],
                              "--dtype", "bfloat16"])
    assert code in (0, 1), err
    report = json.loads(out)
    encoder_only = {layer["module"] == "EncoderOnlyAttention" for layer in answer["layers"]}
    assert len(encoder_only) == 1
    if encoder_only == {True}:
        assert all(layer["spec"] is None for layer in answer["layers"])
        assert answer["groups"] == []
        assert {row["kind"] for row in report["layers"]} == {"encoder_only_attention"}
        assert all(g["bytes_per_token"] == 0 for g in report["plan"]["groups"])
    else:
        per_token = sum(layer["page_size_bytes"] / layer["block_size"]
                        for layer in answer["layers"])
        assert sum(g["bytes_per_token"] for g in report["plan"]["groups"]) == per_token
        assert {row["kind"] for row in report["layers"]} == {"sliding_window", "full_attention"}
