"""Friction a new user hits first: acknowledging warnings under --strict, --version,
pasted docker / python -m command lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from selector import __version__
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
GEMMA3 = ("device: H100\nmodel: gemma-3-27b\nmax_model_len: 8192\n"
          "parallel: {tensor_parallel_size: 4}\n")


def test_strict_fails_on_an_unacknowledged_warning(tmp_path: Path) -> None:
    path = tmp_path / "gemma3.yaml"
    path.write_text(GEMMA3, encoding="utf-8")
    code, out, _ = run_cli(["check", str(path), "--strict", "--format", "github"])
    assert code == 1 and "AS005" in out


@pytest.mark.parametrize("how", ["flag", "file"])
def test_ignore_acknowledges_a_warning(how: str, tmp_path: Path) -> None:
    path = tmp_path / "gemma3.yaml"
    text = GEMMA3 + ("ignore: [AS005]\n" if how == "file" else "")
    path.write_text(text, encoding="utf-8")
    argv = ["check", str(path), "--strict", "--format", "github"]
    if how == "flag":
        argv += ["--ignore", "as005"]
    code, out, err = run_cli(argv)
    assert code == 0, out + err
    assert "::notice" in out and "acknowledged: ignore AS005" in out  # still shown


def test_ignore_never_hides_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("device: L40S\nattention_backend: FLASHINFER\nmodel: gpt-oss-20b\n"
                    "ignore: [SE002]\n", encoding="utf-8")
    code, out, _ = run_cli(["check", str(path), "--format", "github"])
    assert code == 1 and "::error" in out


def test_llama4_under_strict_with_its_warnings_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "scout.yaml"
    path.write_text("device: H100\nmodel: llama-4-scout\nmax_model_len: 8192\n"
                    "parallel: {tensor_parallel_size: 4}\n",
                    encoding="utf-8")
    assert run_cli(["check", str(path), "--strict"])[0] == 1
    code, _, err = run_cli(["check", str(path), "--strict", "--ignore", "AS002",
                            "--ignore", "AS005"])
    assert code == 0, err


def test_unknown_ignored_codes_are_input_errors(tmp_path: Path) -> None:
    code, _, err = run_cli(["check", str(ROOT / "examples" / "llama-3.1-8b-h100.yaml"),
                              "--ignore", "AS05"])
    assert code == 2 and "did you mean" in err and "AS005" in err
    path = tmp_path / "d.yaml"
    path.write_text(GEMMA3 + "ignore: [NOPE1]\n", encoding="utf-8")
    code, _, err = run_cli(["check", str(path)])
    assert code == 2 and f"{path}:5: field 'ignore'" in err


def test_version() -> None:
    code, out, _ = run_cli(["--version"])
    assert code == 0 and out.strip() == f"attn-select {__version__}"


DOCKER_LINES = [
    # the vLLM docs' docker line (older images: the api_server entry point, --model)
    ["docker", "run", "--runtime", "nvidia", "--gpus", "all", "-v",
     "~/.cache/huggingface:/root/.cache/huggingface", "--env", "HUGGING_FACE_HUB_TOKEN=x",
     "-p", "8000:8000", "--ipc=host", "vllm/vllm-openai:latest", "--model",
     "mistralai/Mistral-7B-v0.1"],
    # newer images run `vllm serve`: a positional MODEL; combined short flags; sudo
    ["sudo", "docker", "run", "-it", "--rm", "--gpus", "all", "--shm-size", "16g",
     "vllm/vllm-openai:v0.33.0", "mistralai/Mistral-7B-v0.1", "--max-model-len", "4096"],
    ["podman", "run", "-d", "--device", "nvidia.com/gpu=all", "vllm/vllm-openai",
     "vllm", "serve", "mistralai/Mistral-7B-v0.1"],
    ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "mistralai/Mistral-7B-v0.1"],
    ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model=mistralai/Mistral-7B-v0.1",
     "--port", "8000"],
]


@pytest.mark.parametrize("line", DOCKER_LINES, ids=[" ".join(line[:2]) for line in DOCKER_LINES])
def test_pasted_docker_and_python_m_lines_are_understood(line: list[str]) -> None:
    import json

    code, out, err = run_cli(["check", "--device", "H100", "--format", "json", "--", *line])
    assert code == 0, err
    document = json.loads(out)
    assert document["model"]["name"] == "mistral-7b-v0.1"
    assert "no such file" not in err


def test_docker_env_flags_reach_the_check() -> None:
    code, out, _ = run_cli(["check", "--device", "H100", "--format", "github", "--", "docker",
                            "run", "--gpus", "all", "-e", "VLLM_ATTENTION_BACKEND=FLASHINFER",
                            "vllm/vllm-openai", "--model", "mistralai/Mistral-7B-v0.1"])
    assert code == 0 and "AS101" in out  # vLLM 0.33.0 does not read it, as on a plain line


def test_a_docker_line_without_an_image_is_a_clear_error() -> None:
    code, _, err = run_cli(["check", "--device", "H100", "--", "docker", "run", "--gpus", "all"])
    assert code == 2 and "no image" in err and "Traceback" not in err


def test_secrets_on_a_pasted_line_are_never_repeated() -> None:
    line = ["HF_TOKEN=hf_secret1", "docker", "run", "--gpus", "all", "-e",
            "HUGGING_FACE_HUB_TOKEN=hf_secret2", "vllm/vllm-openai", "--model",
            "mistralai/Mistral-7B-v0.1", "--api-key", "sk-secret3"]
    for output_format in ("text", "json", "github", "sarif", "junit", "markdown"):
        code, out, err = run_cli(["check", "--device", "H100", "--format", output_format, "--",
                                  *line])
        assert code == 0, err
        assert "secret" not in out + err, output_format


def test_an_acknowledged_warning_reads_as_info_in_the_text_report(tmp_path: Path) -> None:
    # vLLM warns that --block-size 16 precludes FLASHINFER_MLA and CUTLASS_MLA on Blackwell
    path = tmp_path / "mla.yaml"
    path.write_text("device: B200\nblock_size: 16\nlayer:\n  num_heads: 128\n  mla: {kv_lora_rank: 512, "
                    "qk_rope_head_dim: 64, qk_nope_head_dim: 128, v_head_dim: 128}\n", encoding="utf-8")
    code, out, _ = run_cli(["check", str(path), "--strict"])
    assert code == 1 and "warning [SE003]" in out
    code, out, _ = run_cli(["check", str(path), "--strict", "--ignore", "SE003"])
    assert code == 0 and "info [SE003]" in out and "warning [SE003]" not in out
