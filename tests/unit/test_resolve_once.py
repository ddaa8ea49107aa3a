"""The deployment's target is resolved once: the engine from the command line's flag,
else the file, else the environment, and every input is validated against that engine
with a located error; the config.json is parsed once, with ``--hf-overrides`` applied,
and every stage reads that parse (issue bugs: file vs flag engine, ATTN_SELECT_ENGINE
beating --engine, --hf-overrides missing from the memory report)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.fuzz.test_config_fuzz import run_cli

SPARSE_FA4 = ("engine: vllm==0.33.0\ndevice: B200\nattention_backend: FLASH_ATTN_MLA_SPARSE_FA4\n"
              "layer: {num_heads: 16, head_size: 576, mla: {kv_lora_rank: 512, qk_rope_head_dim: 64, "
              "qk_nope_head_dim: 128, v_head_dim: 128}}\n")


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "deploy.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_backend_the_flag_engine_lacks_is_a_located_input_error(tmp_path: Path) -> None:
    path = _file(tmp_path, SPARSE_FA4)
    code, out, err = run_cli(["check", path, "--engine", "vllm==0.25.1"])
    assert code == 2, (out, err)
    assert f"{path}:3: field 'attention_backend'" in err
    # no member of 0.25.1's AttentionBackendEnum: vLLM 0.25.1's own start-up refusal
    assert ("vLLM 0.25.1 refuses it at start-up: ValueError: Unknown attention backend: "
            "'FLASH_ATTN_MLA_SPARSE_FA4'. Valid options are: FLASH_ATTN,") in err
    assert "<input>" not in err and err.count("error:") == 1
    # the file's own engine has it: no input error
    code, _, err = run_cli(["check", path, "--engine", "vllm==0.33.0"])
    assert code in (0, 1), err


def test_explain_validates_against_the_flag_engine_too(tmp_path: Path) -> None:
    path = _file(tmp_path, SPARSE_FA4)
    code, _, err = run_cli(["explain", "FLASHMLA_SPARSE", path, "--engine", "vllm==0.25.1"])
    assert code == 2 and f"{path}:3: field 'attention_backend'" in err, err


def test_the_flag_wins_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path, "device: H100\nlayer: {num_heads: 16, head_size: 128}\n")
    monkeypatch.setenv("ATTN_SELECT_ENGINE", "vllm==9.9")
    code, out, err = run_cli(["check", path, "--engine", "vllm==0.33.0", "--format", "json"])
    assert code == 0, err
    assert "ATTN_SELECT_ENGINE" not in err
    assert json.loads(out)["engine"] == "vllm==0.33.0"
    monkeypatch.setenv("ATTN_SELECT_ENGINE", "vllm==0.25.1")
    code, out, err = run_cli(["check", path, "--engine", "vllm==0.33.0", "--format", "json"])
    assert code == 0 and json.loads(out)["engine"] == "vllm==0.33.0", err


def test_a_bad_environment_engine_is_named_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path, "device: H100\nlayer: {num_heads: 16, head_size: 128}\n")
    monkeypatch.setenv("ATTN_SELECT_ENGINE", "vllm==9.9")
    code, _, err = run_cli(["check", path])
    assert code == 2
    assert err.count("error:") == 1, err
    assert "environment: field 'ATTN_SELECT_ENGINE': no profile for engine 'vllm==9.9'" in err
    assert "<input>" not in err and "give --engine" in err


def test_the_file_engine_wins_over_the_environment(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``$ATTN_SELECT_ENGINE`` is the default engine: a file that names one keeps it."""
    path = _file(tmp_path, "engine: vllm==0.25.1\ndevice: H100\nlayer: {num_heads: 16, head_size: 128}\n")
    monkeypatch.setenv("ATTN_SELECT_ENGINE", "vllm==0.33.0")
    code, out, err = run_cli(["check", path, "--format", "json"])
    assert code == 0 and json.loads(out)["engine"] == "vllm==0.25.1", err


def test_hf_overrides_reach_the_memory_report() -> None:
    argv = ["check", "--device", "H100", "--engine", "vllm==0.33.0", "--", "vllm", "serve",
            "meta-llama/Llama-3.1-8B-Instruct", "--hf-overrides", '{"max_position_embeddings": 4096}']
    code, out, err = run_cli(argv)
    assert code == 0, err
    text = " ".join(re.sub(r"[│┃]", " ", out).split())
    assert "Maximum concurrency for 4,096 tokens per request" in text
    assert "131,072" not in text
    code, out, err = run_cli([*argv[:5], "--format", "json", *argv[5:]])
    assert code == 0, err
    document = json.loads(out)
    assert document["plan"]["capacity"]["max_model_len"] == 4096
    assert document["memory"]["kv_cache"]["max_model_len"] == 4096


def test_a_tensor_parallel_model_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The TP split check and the whole-model check read the same facts: the model's
    config is loaded once per deployment."""
    import selector.models
    from selector.catalog import load_catalog
    from selector.inputs.config import parse_deployment
    from selector.pipeline import solve_deployment

    calls: list[str] = []
    real = selector.models.load_model

    def counting(name: object) -> object:
        calls.append(str(name))
        return real(name)  # type: ignore[arg-type]

    monkeypatch.setattr(selector.models, "load_model", counting)
    loaded = parse_deployment(str(tmp_path / "d.yaml"),
                              "device: H100\nmodel: llama-3.1-8b\nparallel: {tensor_parallel_size: 2}\n")
    solved = solve_deployment(loaded, load_catalog(), engine="vllm==0.33.0")
    assert solved.model is not None and solved.model.model.tp_size == 2
    assert calls == ["llama-3.1-8b"]
