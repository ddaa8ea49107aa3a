"""A pooling model's profile run pools instead of running the dummy sampler
(vllm/v1/worker/gpu_model_runner.py: ``if self.is_pooling_model: self._dummy_pooler_run``,
:6354-6357 in 0.25.1, :6578-6581 in 0.29.0, :6136-6139 in 0.33.0), so its activation peak
has no full-vocabulary float32 logits; a generating model's still does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
GRITLM = ROOT / "tests/fixtures/hf_configs/pooling/parasail-ai--GritLM-7B-vllm.json"


def _activation(tmp_path: Path, model: Path, engine: str) -> dict[str, Any]:
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text(f"model: {model}\ndevice: H100\nengine: {engine}\n")
    code, out, err = run_cli(["check", str(deployment), "-f", "json"])
    assert code == 0, err
    report = json.loads(out)
    return next(line for line in report["memory"]["reservations"]
                if line["name"] == "activation peak (profile run)")


def test_a_pooling_model_runs_no_dummy_sampler(tmp_path: Path) -> None:
    line = _activation(tmp_path, GRITLM, "vllm==0.28.0")  # GritLM: the pooling runner
    assert line["detail"].startswith("forward profile: 8192 batched tokens")
    assert "no sampler run (a pooling model's profile run pools)" in line["detail"]


def test_the_same_weights_generating_keep_the_sampler_run(tmp_path: Path) -> None:
    raw = json.loads(GRITLM.read_text())
    raw["architectures"] = ["MistralForCausalLM"]  # GritLM-7B's published architecture
    model = tmp_path / "config.json"
    model.write_text(json.dumps(raw))
    line = _activation(tmp_path, model, "vllm==0.28.0")
    assert line["detail"].startswith("sampler profile: 1024 seqs x vocab 32000 float32 logits")
    assert line["bytes"] > _activation(tmp_path, GRITLM, "vllm==0.28.0")["bytes"]
