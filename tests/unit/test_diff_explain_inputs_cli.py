"""`diff` and `explain` take every input `check` takes (resolved by check's own
`pipeline.check.check_inputs`): `model:` files, `--device`, a `vllm serve` line."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).parents[2]
MODEL = str(ROOT / "tests" / "fixtures" / "models" / "llama-3.1-8b@h100.yaml")
LAYER = str(ROOT / "examples" / "llama-3.1-8b-h100.yaml")
ENGINES = ["--from", "vllm==0.25.1", "--to", "vllm==0.33.0"]


def test_diff_takes_a_model_file() -> None:
    code, out, err = run_cli(["diff", MODEL, *ENGINES, "-f", "json"])
    assert code in (0, 1), err
    document = json.loads(out)
    assert document["kind"] == "model" and document["status"]["before"] == "valid"
    assert [layer["kind"] for layer in document["layers"]] == ["full_attention"]


def test_diff_takes_a_serve_line_read_by_each_releases_parser() -> None:
    code, out, err = run_cli(["diff", *ENGINES, "--device", "H100", "-f", "json", "--", "vllm",
                              "serve", "Qwen/Qwen3-8B", "--watchdog-config", "{}"])
    assert code == 1, err  # 0.25.1's parser has no --watchdog-config: the verdict changes
    document = json.loads(out)
    assert document["status"] == {"before": "invalid", "after": "valid"}
    assert document["errors"]["lost"] == ["[SU007] unrecognized arguments: --watchdog-config"]


def test_diff_takes_devices_like_check() -> None:
    code, out, err = run_cli(["diff", LAYER, *ENGINES, "--device", "H100", "--device", "B200",
                              "-f", "json"])
    assert code in (0, 1), err
    assert [d["device"] for d in json.loads(out)] == ["H100", "B200"]


def test_explain_takes_device_and_a_serve_line() -> None:
    code, out, err = run_cli(["explain", "FLASH_ATTN", "--device", "B200", "-f", "json", "--",
                              "vllm", "serve", "Qwen/Qwen3-8B"])
    assert code == 0, err
    assert json.loads(out)["backend"] == "FLASH_ATTN"
    code, out, err = run_cli(["explain", "FLASH_ATTN", LAYER, "--device", "H100", "--device",
                              "T4", "-f", "json"])
    assert [d["device"] for d in json.loads(out)] == ["H100", "T4"]


def test_explain_says_when_vllm_refuses_the_command_line() -> None:
    code, out, err = run_cli(["explain", "FLASH_ATTN", "--device", "H100", "--", "vllm", "serve",
                              "Qwen/Qwen3-8B", "--kv-cach-dtype", "fp8"])
    assert code == 1
    assert "unrecognized arguments: --kv-cach-dtype fp8" in out + err
