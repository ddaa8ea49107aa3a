"""`check` reports vLLM's refusal of KV heads that do not split over the tensor-parallel
ranks (Phi-4: 40 attention heads, 10 KV heads, at TP 4) as a start-up refusal: exit 1,
vLLM's assertion, located at the TP size; not an input error blaming the config. The
expected words are vLLM's own answer (``kv_head_splits`` of
tests/golden/oracle/vllm-0.33.0/dcp.json.gz, tools/dcp_oracle.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.test_config_fuzz import run_cli

GOLDEN = Path(__file__).parent.parent / "golden" / "oracle" / "vllm-0.33.0" / "dcp.json.gz"
PHI_4 = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 5120,
         "intermediate_size": 17920, "num_attention_heads": 40, "num_hidden_layers": 40,
         "num_key_value_heads": 10, "max_position_embeddings": 16384, "rms_norm_eps": 1e-05,
         "rope_theta": 250000, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "vocab_size": 100352}


def _vllm_says(heads: int, kv_heads: int, tp: int) -> dict[str, Any] | None:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as handle:
        rows: list[dict[str, Any]] = json.load(handle)["kv_head_splits"]
    for row in rows:
        if (row["num_heads"], row["num_kv_heads"], row["tp"]) == (heads, kv_heads, tp):
            error: dict[str, Any] | None = row["error"]
            return error
    raise AssertionError(f"{heads}/{kv_heads} at TP {tp} not recorded")


@pytest.fixture
def phi_4(tmp_path: Path) -> Path:
    folder = tmp_path / "phi-4"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(PHI_4))
    return folder


def _findings(argv: list[str]) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = run_cli(["check", "--format", "json", *argv])
    assert out, err
    findings: list[dict[str, Any]] = json.loads(out)["findings"]
    return code, findings


def test_phi_4_at_tp_4_is_refused_with_vllms_assertion(phi_4: Path) -> None:
    said = _vllm_says(40, 10, 4)
    assert said is not None and said["type"] == "AssertionError"
    code, findings = _findings(["--device", "H100", "--", "vllm", "serve", str(phi_4),
                                "--tensor-parallel-size", "4"])
    assert code == 1
    refusal = next(f for f in findings if f["level"] == "error")
    assert refusal["code"] == "AS134"
    assert refusal["message"].startswith("AssertionError (") and said["source"] in refusal["message"]
    assert "total_num_kv_heads=10 and tp_size=4" in refusal["message"]


def test_the_refusal_is_located_in_a_deployment_file(phi_4: Path) -> None:
    path = phi_4.parent / "phi.yaml"
    path.write_text("device: H100\nmodel: phi-4/config.json\nparallel:\n"
                    "  tensor_parallel_size: 4\n")
    code, findings = _findings([str(path)])
    assert code == 1
    refusal = next(f for f in findings if f["code"] == "AS134")
    assert (refusal["line"], refusal["field"]) == (4, "parallel.tensor_parallel_size")
    code, out, err = run_cli(["check", str(path)])
    assert code == 1 and "AS134" in out and "num_key_value_heads" not in out + err


def test_a_layer_deployment_with_those_heads_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "layer.yaml"
    path.write_text("device: H100\nlayer: {head_size: 128, num_heads: 40, num_kv_heads: 10}\n"
                    "parallel: {tensor_parallel_size: 4}\n")
    code, out, _ = run_cli(["check", str(path)])
    assert code == 1 and "AS134" in out and "vLLM refuses to start" in out


def test_a_split_vllm_builds_is_not_refused(phi_4: Path) -> None:
    assert _vllm_says(40, 10, 2) is None
    code, findings = _findings(["--device", "H100", "--", "vllm", "serve", str(phi_4),
                                "--tensor-parallel-size", "2"])
    assert not [f for f in findings if f["code"] in ("AS134", "AS135")], findings
    assert code in (0, 1)
