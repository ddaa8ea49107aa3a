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


def test_a_layer_block_next_to_a_model_is_an_error_not_dropped(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text("device: H100\nmodel: llama-3.1-8b\nlayer:\n  head_size: 64\n",
                    encoding="utf-8")
    code, _, err = run_cli(["check", str(path)])
    assert code == 2
    assert f"{path}:3: field 'layer'" in err and "remove `layer:`" in err


def test_diff_file_all_as_the_readme_shows() -> None:
    code, out, err = run_cli(["diff", VALID, "--from", "vllm==0.25.1", "--to", "vllm==0.33.0",
                              "--all"])
    assert code in (0, 1), err
    assert "TRITON_ATTN" in out  # unchanged backends are listed too


def test_diff_of_a_model_deployment_compares_checks_verdict_and_each_layer_group() -> None:
    # once exit 2: "diff compares single-layer deployments"
    model = str(ROOT / "tests" / "fixtures" / "models" / "llama-3.1-8b@h100.yaml")
    code, out, err = run_cli(["diff", model, "--from", "vllm==0.25.1", "--to", "vllm==0.33.0"])
    assert code in (0, 1), err
    assert "check: valid" in out and "full_attention" in out


def test_explain_defaults_to_the_first_attention_layer(tmp_path: Path) -> None:
    # Qwen3-Next: layers 0-2 are Gated DeltaNet, layer 3 is the first full attention
    path = tmp_path / "qwen3-next.yaml"
    path.write_text("device: H100\nmodel: qwen3-next-80b-a3b\nparallel: {tensor_parallel_size: 4}\n",
                    encoding="utf-8")
    code, out, err = run_cli(["explain", "FLASH_ATTN", str(path), "--format", "json"])
    assert code == 0, err
    assert json.loads(out)["layer"] == 3
    code, _, err = run_cli(["explain", "FLASH_ATTN", str(path), "--layer", "0"])
    assert code == 2 and "not attention" in err


def test_json_output_includes_unreadable_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("device: H100\nlayer: {head_size: nope}\n", encoding="utf-8")
    code, out, _ = run_cli(["check", str(broken), VALID, "--format", "json"])
    assert code == 2
    documents = json.loads(out)
    assert [Path(d["source"]).name for d in documents] == ["broken.yaml", "llama-3.1-8b-h100.yaml"]
    assert documents[0]["status"] == "error" and documents[0]["passed"] is False
    assert documents[0]["findings"][0]["line"] == 2
