"""A config naming a model-driven architecture whose layers read a field the config lacks
is bad input naming the file and the field (exit 2), not an internal error."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_a_field_the_v41_layers_read_missing_names_file_and_field(tmp_path: Path) -> None:
    raw = json.loads((ROOT / "tests/fixtures/hf_configs/Qwen--Qwen3-8B.json").read_text())
    raw["architectures"] = ["DeepseekV41ForCausalLM"]
    config = tmp_path / "config.json"
    config.write_text(json.dumps(raw))
    code, out, err = run_cli(["check", "--device", "H200", "--", "vllm", "serve", str(config)])
    assert code == 2, (out, err)
    assert f"{config}: field '" in err and "missing" in err
    assert "internal error" not in err and "Traceback" not in err
