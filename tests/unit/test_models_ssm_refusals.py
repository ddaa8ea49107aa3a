"""State-mixer layouts refused as vLLM loads the config: Falcon-H1-0.5B as published
states no ``mamba_d_ssm`` (transformers' FalconH1Config default 1024 applies) and 24
heads do not divide it; transformers refuses it (vLLM's answer:
tests/golden/vllm_models, ``falcon-h1-0.5b-shape``), and so does ``check`` (AS133)."""

from __future__ import annotations

import json
from pathlib import Path

from selector.models import load_model
from tests.fuzz.test_config_fuzz import run_cli

EDGE = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "edge"


def test_falcon_h1_0_5b_is_refused_in_vllms_words(tmp_path: Path) -> None:
    model = load_model(EDGE / "falcon-h1-0.5b-shape.json")
    assert model.refusals == ("ValueError: mamba_n_heads must divide mamba_expand * hidden_size",)
    deployment = tmp_path / "falcon.yaml"
    deployment.write_text(f"model: {EDGE / 'falcon-h1-0.5b-shape.json'}\ndevice: H200\n")
    code, out, err = run_cli(["check", str(deployment), "-f", "json"])
    assert code == 1, err
    assert '"AS133"' in out and "mamba_n_heads must divide mamba_expand * hidden_size" in out


def test_falcon_h1_d_ssm_follows_the_config_class(tmp_path: Path) -> None:
    raw = json.loads((EDGE / "falcon-h1-0.5b-shape.json").read_text())
    raw.update(mamba_n_heads=16, mamba_d_head=64)  # 16 x 64 = the class default 1024
    (tmp_path / "default.json").write_text(json.dumps(raw))
    state = load_model(tmp_path / "default.json").state_layers[0].ssm
    assert state is not None and state.intermediate_size == 1024
    raw.update(mamba_d_ssm=None, mamba_n_heads=32)  # explicit null: expand x hidden = 2048
    (tmp_path / "null.json").write_text(json.dumps(raw))
    model = load_model(tmp_path / "null.json")
    assert model.refusals == ()
    state = model.state_layers[0].ssm
    assert state is not None and state.intermediate_size == 2048
    falcon_7b = load_model(EDGE / "falcon-h1-7b-shape.json")
    assert falcon_7b.refusals == ()
