"""Features the README documents work as documented, and Hugging Face ids resolve
the same way in deployment files and on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.models.presets import match_preset
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
VALID = str(ROOT / "examples" / "llama-3.1-8b-h100.yaml")


def test_check_output_file_takes_the_text_report_too(tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    code, out, _ = run_cli(["check", VALID, "-o", str(target)])
    assert code == 0 and out == ""
    assert "VALID" in target.read_text(encoding="utf-8")


def test_list_presets() -> None:
    code, out, _ = run_cli(["list", "presets"])
    assert code == 0 and "llama-3.1-8b" in out and "qwen3-next-80b-a3b" in out
    code, out, _ = run_cli(["list", "presets", "--format", "json"])
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["deepseek-v3"]["config_of"] == "deepseek-ai/DeepSeek-V3"
    assert "deepseek-ai/DeepSeek-R1" in rows["deepseek-v3"]["aliases"]


@pytest.mark.parametrize(("hf_id", "preset"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("META-LLAMA/meta-llama-3.1-8b-instruct", "llama-3.1-8b"),
    ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3"),
    ("mistralai/Mistral-7B-Instruct-v0.1", "mistral-7b-v0.1"),
    ("deepseek-ai/DeepSeek-R1", "deepseek-v3"),
    ("google/gemma-3-27b-it", "gemma-3-27b"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("Qwen/Qwen3-8B-Chat", "qwen3-8b"),
])
def test_hugging_face_ids_resolve_in_files_and_on_the_command_line(
        hf_id: str, preset: str, tmp_path: Path) -> None:
    assert match_preset(hf_id) == preset
    path = tmp_path / "d.yaml"
    path.write_text(f"device: H100\nmodel: {hf_id}\nparallel: {{tensor_parallel_size: 4}}\n",
                    encoding="utf-8")
    code, out, err = run_cli(["check", str(path), "--format", "json"])
    assert code in (0, 1), err
    assert json.loads(out)["model"]["name"] == preset
    code, out, err = run_cli(["check", "--device", "H100", "--format", "json", "--",
                              "vllm", "serve", hf_id, "-tp", "4"])
    assert code in (0, 1), err
    assert json.loads(out)["model"]["name"] == preset


@pytest.mark.parametrize("hf_id", ["mistralai/Mistral-7B-Instruct-v0.2",  # no sliding window
                                   "meta-llama/Llama-3.1-405B", "Qwen/Qwen3-30B-A3B"])
def test_other_architectures_do_not_resolve(hf_id: str, tmp_path: Path) -> None:
    assert match_preset(hf_id) is None
    path = tmp_path / "d.yaml"
    path.write_text(f"device: H100\nmodel: {hf_id}\n", encoding="utf-8")
    code, _, err = run_cli(["check", str(path)])
    assert code == 2 and "d.yaml:2" in err and "list presets" in err
