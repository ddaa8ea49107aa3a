"""The command line: exit codes, JSON output, explain, list, sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
VALID = str(ROOT / "examples" / "llama-3.1-8b-h100.yaml")
INVALID = str(ROOT / "examples" / "gpt-oss-20b-l40s-flashinfer.yaml")


def test_check_exit_codes_and_json_schema() -> None:
    code, out, _ = run_cli(["check", VALID, "--format", "json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["schema_version"] == "1.0"
    assert doc["valid"] is True and doc["selected"] == "FLASH_ATTN" and doc["mode"] == "auto"
    assert doc["runtime"]["facts"]["fa_version"]["value"] == 3
    assert doc["backends"]["TURBOQUANT"]["reasons"][0]["code"] == "KV001"
    assert doc["facts"]["cc"] == 90 and doc["engine"] == load_catalog().choose(None).name
    code, out, _ = run_cli(["check", INVALID, "--format", "json"])
    assert code == 1
    doc = json.loads(out)
    assert doc["valid"] is False and doc["error"]["code"] == "SE002"
    assert doc["suggestions"][0]["selected"] == "TRITON_ATTN"


def test_check_text_report_explains_the_choice() -> None:
    code, out, _ = run_cli(["check", INVALID])
    assert code == 1
    assert "INVALID" in out and "Selected backend AttentionBackendEnum.FLASHINFER is not valid" in out
    assert "remove --attention-backend (auto-selects TRITON_ATTN)" in out
    code, out, _ = run_cli(["check", VALID, "-v"])
    flat = " ".join(out.split())
    assert code == 0 and "FLASH_ATTN is the first valid backend" in flat and "environment" in flat


def test_engine_option_rejects_unknown_versions() -> None:
    code, _, err = run_cli(["check", VALID, "--engine", "vllm==9.9.9"])
    assert code == 2 and "no profile for engine 'vllm==9.9.9'" in err and "vllm==0.33.0" in err


def test_explain_lists_every_check_with_its_rule(tmp_path: Path) -> None:
    code, out, _ = run_cli(["explain", "FLASHINFER", INVALID, "--format", "json"])
    assert code == 1
    doc = json.loads(out)
    failed = [c for c in doc["checks"] if c["failed"]]
    assert [c["code"] for c in failed] == ["FT004"]
    assert "cc_major" in failed[0]["rule"] or "cap.sink" in failed[0]["rule"]
    assert len(doc["checks"]) >= 22
    code, _, err = run_cli(["explain", "FLASH_ATN", INVALID])
    assert code == 2 and "did you mean 'FLASH_ATTN'" in err


@pytest.mark.parametrize("what", ["backends", "devices", "codes", "engines"])
def test_list(what: str) -> None:
    code, out, _ = run_cli(["list", what, "--format", "json"])
    assert code == 0 and json.loads(out)


def test_list_devices_has_the_required_catalog() -> None:
    _, out, _ = run_cli(["list", "devices", "--format", "json"])
    by_name = {d["name"]: d["capability"] for d in json.loads(out)}
    expected = {"V100": "7.0", "T4": "7.5", "A100": "8.0", "A10G": "8.6", "L40": "8.9", "L4": "8.9",
                "L40S": "8.9", "RTX 4090": "8.9", "H100": "9.0", "H200": "9.0", "H20": "9.0",
                "B200": "10.0", "GB200": "10.0", "B300": "10.3", "RTX 5090": "12.0",
                "RTX PRO 6000": "12.0", "GB10": "12.1"}
    for name, capability in expected.items():
        assert by_name[name] == capability


def test_sweep_writes_the_oracle_shape(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps({"id": 1, "device_capability": "9.0", "head_size": 128, "dtype": "bfloat16"}) + "\n"
        + "not json\n"
        + json.dumps({"device_capability": "10.0", "head_size": 128, "dtype": "bf16",
                      "attention_backend": "FLEX_ATTENTION", "kv_cache_dtype": "fp8"}) + "\n"
        + json.dumps({"device_capability": "9.0", "head_size": 128, "dtype": "bfloat16", "bogus": 1}) + "\n"
    )
    out_file = tmp_path / "out.jsonl"
    code, _, _ = run_cli(["sweep", str(source), "-o", str(out_file)])
    assert code == 0
    lines = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert lines[0]["id"] == 1 and lines[0]["selected"] == "FLASH_ATTN" and lines[0]["error"] is None
    assert set(lines[0]["backends"]) >= {"FLASH_ATTN", "FLASHINFER", "TRITON_MLA"}
    assert lines[1]["error"].startswith("bad input: line 2: not JSON")
    assert lines[2]["selected"] is None and lines[2]["error"].startswith(
        "Selected backend AttentionBackendEnum.FLEX_ATTENTION is not valid")
    assert "unknown field(s) ['bogus']" in lines[3]["error"]


def test_sweep_bad_files_exit_2_naming_them(tmp_path: Path) -> None:
    # an unwritable -o and a file that is not UTF-8 were internal errors (exit 70)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"device_capability": "9.0", "head_size": 128}) + "\n")
    for target in (tmp_path / "missing" / "out.jsonl", tmp_path):
        code, _, err = run_cli(["sweep", str(source), "-o", str(target)])
        assert code == 2 and f"{target}: field '--output': cannot write the verdicts" in err
    source.write_bytes(b"\xff\xfe{}\n")
    code, _, err = run_cli(["sweep", str(source)])
    assert code == 2 and f"{source}: the file is not UTF-8 text" in err


def test_usage_errors_exit_2() -> None:
    assert run_cli(["check"])[0] == 2
    assert run_cli(["list", "nothing"])[0] == 2
    assert run_cli(["frobnicate"])[0] == 2
