"""``attn-select verify`` reads public vLLM start-up logs (tests/fixtures/logs/, sources in
SOURCES.md): the figures are those the posted lines state; a log that names no release or
no deployment is bad input (exit 2) naming the file, field and fix, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from selector.cli.verify import register
from selector.compare.startup_log import parse_startup_log, read_startup_log
from tests.cli_app import command_app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

PUBLIC = {
    "vllm-pr-29335-qwen.log": {"model_loading_gib": 2.0513, "available_kv_gib": 33.31,
                               "kv_tokens": 1_587_648, "max_concurrency": 775.22},
    "vllm-pr-19794-sm120.log": {"available_kv_gib": 26.91, "kv_tokens": 251_920,
                                "max_concurrency": 6.15, "cudagraph_gib": 0.84},
    "club-3090-295-qwen3.6-27b.log": {"kv_tokens": 620_944, "max_concurrency": 2.37},
    "vllm-issue-49011-sm120-nvfp4.log": {"kv_tokens": 1_823_372, "max_concurrency": 1.74},
    "vllm-windows-build-4.log": {"kv_tokens": 396_928, "max_concurrency": 3.03,
                                 "cudagraph_gib": 0.11},
}


def app() -> typer.Typer:
    return command_app(register)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_logs_yield_the_figures_their_lines_state(name: str) -> None:
    log = read_startup_log(LOGS / name)
    for fact, value in PUBLIC[name].items():
        assert log.value(fact) == value, fact


def test_the_args_line_gives_the_deployment() -> None:
    log = read_startup_log(LOGS / "club-3090-295-qwen3.6-27b.log")
    assert log.args is not None and log.args_line == 1
    assert (log.args["tensor_parallel_size"], log.args["kv_cache_dtype"],
            log.args["max_model_len"]) == (2, "fp8_e5m2", 262144)


def test_worker_prefixes_and_record_headers_are_stripped() -> None:
    text = ("(EngineCore_DP0 pid=7) INFO 12-01 22:21:53 [platforms/cuda.py:476] Using "
            "FLASHINFER attention backend out of potential backends: ['FLASHINFER'].\n"
            "INFO 12-01 22:21:49 [v1/engine/core.py:114] Initializing a V1 LLM engine "
            "(v0.30.0) with config: model='m', dtype=torch.bfloat16, max_seq_len=4096\n"
            "(EngineCore_DP0 pid=7) ValueError: No available memory for the cache blocks.\n")
    log = parse_startup_log(text)
    assert [b.value for b in log.backends] == ["FLASHINFER"]
    assert log.version == "0.30.0" and log.config is not None
    assert log.config["max_seq_len"] == "4096"
    assert log.refusals[0].value == "ValueError: No available memory for the cache blocks."


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_a_public_log_without_a_release_is_bad_input_naming_the_fix(name: str) -> None:
    result = CliRunner().invoke(app(), ["verify", str(LOGS / name), "-d", "H200"])
    assert result.exit_code == 2, result.output
    assert str(LOGS / name) in result.stderr and "--engine" in result.stderr
    assert "Traceback" not in result.output


def test_a_public_log_checked_against_a_preset_in_every_format() -> None:
    """With the release, GPU and model given, verify compares what the log states (here a
    Qwen3-8B preset on an RTX 5090 against a Qwen3 start-up of PR 19794: the figures
    differ, exit 1, each format says so)."""
    log = str(LOGS / "vllm-pr-19794-sm120.log")
    args = ["verify", log, "--engine", "vllm==0.33.0", "--model", "qwen3-8b", "-d", "RTX5090"]
    for output_format in ("text", "json", "markdown", "github", "junit", "sarif"):
        result = CliRunner().invoke(app(), [*args, "-f", output_format])
        assert result.exit_code in (0, 1), result.output
        assert "Traceback" not in result.output
    document = json.loads(CliRunner().invoke(app(), [*args, "-f", "json"]).stdout)
    facts = {row["fact"] for row in document["results"][0]["rows"]}
    assert {"kv_tokens", "available_kv_gib", "max_concurrency", "cudagraph_gib"} <= facts


def test_not_a_startup_log_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    result = CliRunner().invoke(app(), ["verify", str(path)])
    assert result.exit_code == 2 and "no vLLM start-up" in result.stderr
    missing = CliRunner().invoke(app(), ["verify", str(tmp_path / "absent.log")])
    assert missing.exit_code == 2 and "cannot read the log" in missing.stderr
