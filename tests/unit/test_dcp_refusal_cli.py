"""`check` reports vLLM's refusal of a decode-context-parallel split like the other start-up
refusals: exit 1, vLLM's words in every format, the field located in the file; `smoke`
refuses the same deployment with the same words. The expected texts are vLLM's own
answers (tests/golden/oracle/vllm-<version>/dcp.json.gz, tools/dcp_oracle.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.test_config_fuzz import run_cli

GOLDEN = Path(__file__).parent.parent / "golden" / "oracle"
FIELD = "parallel.decode_context_parallel_size"


def _vllm_says(version: str, heads: int, kv_heads: int, tp: int, dcp: int, pcp: int = 1
               ) -> str | None:
    """vLLM's recorded error for the split, as a start-up refusal shows it."""
    with gzip.open(GOLDEN / f"vllm-{version}" / "dcp.json.gz", "rt", encoding="utf-8") as f:
        rows: list[dict[str, Any]] = json.load(f)["splits"]
    for row in rows:
        if (row["num_heads"], row["num_kv_heads"], row["use_mla"], row["tp"], row["pcp"],
                row["dcp"]) == (heads, kv_heads, False, tp, pcp, dcp):
            error = row["error"]
            if error is None:
                return None
            prefix = "AssertionError: " if error["type"] == "AssertionError" else ""
            return prefix + str(error["message"])
    raise AssertionError(f"split {heads}/{kv_heads} TP {tp} DCP {dcp} not recorded")


def _deployment(tmp_path: Path, tp: int, dcp: int) -> Path:
    path = tmp_path / "split.yaml"
    path.write_text("# 32 query / 8 KV heads\ndevice: H200\ndtype: bfloat16\nlayer:\n"
                    "  head_size: 128\n  num_heads: 32\n  num_kv_heads: 8\nparallel:\n"
                    f"  tensor_parallel_size: {tp}\n  decode_context_parallel_size: {dcp}\n")
    return path


def _findings(argv: list[str]) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = run_cli(["check", "--format", "json", *argv])
    assert out, err
    findings: list[dict[str, Any]] = json.loads(out)["findings"]
    return code, findings


@pytest.mark.parametrize(("tp", "dcp", "code"), [(4, 2, "SU009"), (16, 4, "SU010"),
                                                 (4, 3, "SU008")])
def test_layer_deployment_refused_with_vllms_words_at_its_line(tmp_path: Path, tp: int,
                                                               dcp: int, code: str) -> None:
    path = _deployment(tmp_path, tp, dcp)
    exit_code, findings = _findings([str(path)])
    assert exit_code == 1
    refusal = next(f for f in findings if f["code"] == code)
    assert refusal["message"] == _vllm_says("0.33.0", 32, 8, tp, dcp)
    assert (refusal["field"], refusal["line"]) == (FIELD, 10)  # its line in the file


def test_every_format_shows_vllms_words(tmp_path: Path) -> None:
    path = _deployment(tmp_path, 4, 2)
    said = _vllm_says("0.33.0", 32, 8, 4, 2)
    assert said is not None
    for fmt in ("text", "json", "sarif", "junit", "github", "markdown"):
        code, out, err = run_cli(["check", "--format", fmt, str(path)])
        assert code == 1, (fmt, err)
        # JSON keeps it in one string; the text report wraps lines at the console width
        shown = [f["message"] for f in json.loads(out)["findings"]] if fmt == "json" \
            else " ".join(out.split())
        assert said in shown, (fmt, out)
        if fmt == "text":
            assert "INVALID" in out and "[SU009]" in out


def test_accepted_split_is_valid(tmp_path: Path) -> None:
    path = _deployment(tmp_path, 16, 2)
    assert _vllm_says("0.33.0", 32, 8, 16, 2) is None
    code, findings = _findings([str(path)])
    assert code == 0 and not [f for f in findings if f.get("field") == FIELD]


@pytest.mark.parametrize("version", ["0.25.1", "0.26.0", "0.27.0"])
def test_each_release_gives_its_own_words(tmp_path: Path, version: str) -> None:
    path = _deployment(tmp_path, 4, 2)
    code, findings = _findings(["--engine", f"vllm=={version}", str(path)])
    assert code == 1
    refusal = next(f for f in findings if f.get("field") == FIELD)
    assert refusal["message"] == _vllm_says(version, 32, 8, 4, 2)


def test_model_deployment_and_serve_line(tmp_path: Path) -> None:
    # llama-3.1-70b: 64 query / 8 KV heads
    config = tmp_path / "model.yaml"
    config.write_text("device: H200\nmodel: llama-3.1-70b\nparallel:\n"
                      "  tensor_parallel_size: 16\n  decode_context_parallel_size: 4\n")
    code, findings = _findings([str(config)])
    assert code == 1
    assert findings[0]["message"] == _vllm_says("0.33.0", 64, 8, 16, 4)
    assert (findings[0]["field"], findings[0]["line"]) == (FIELD, 5)
    code, findings = _findings(["--device", "H200", "--", "vllm", "serve",
                                "meta-llama/Llama-3.1-8B-Instruct", "-tp", "4", "-dcp", "2"])
    assert code == 1
    assert [f["message"] for f in findings if f.get("field") == FIELD] == [
        _vllm_says("0.33.0", 32, 8, 4, 2)]
    code, findings = _findings(["--device", "H200", "--", "vllm", "serve",
                                "meta-llama/Llama-3.1-8B-Instruct", "-tp", "8",
                                "--decode-context-parallel-size", "3"])
    assert code == 1
    assert [f["message"] for f in findings if f.get("field") == FIELD] == [
        _vllm_says("0.33.0", 32, 8, 8, 3)]


def test_smoke_refuses_the_same_split_with_the_same_words(tmp_path: Path) -> None:
    path = _deployment(tmp_path, 4, 2)
    code, out, err = run_cli(["smoke", str(path), "--dry-run"])
    assert code == 1
    said = _vllm_says("0.33.0", 32, 8, 4, 2)
    assert said is not None and "[SU009] " + said.rstrip(".") in " ".join((out + err).split())


@pytest.mark.parametrize(("version", "dcp"), [("0.33.0", 4), ("0.33.0", 8), ("0.25.1", 8)])
def test_prefill_context_parallelism_changes_the_rule(tmp_path: Path, version: str,
                                                      dcp: int) -> None:
    path = tmp_path / "pcp.yaml"
    path.write_text("device: H200\ndtype: bfloat16\nlayer: {head_size: 128, num_heads: 32, "
                    "num_kv_heads: 2}\nparallel:\n  tensor_parallel_size: 4\n"
                    f"  prefill_context_parallel_size: 2\n  decode_context_parallel_size: {dcp}\n")
    code, findings = _findings(["--engine", f"vllm=={version}", str(path)])
    said = _vllm_says(version, 32, 2, 4, dcp, pcp=2)
    refusals = [f for f in findings if f.get("field") == FIELD]
    assert said is not None
    assert code == 1 and refusals[0]["message"] == said and refusals[0]["line"] == 7
