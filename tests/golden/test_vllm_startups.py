"""The memory model against vLLM 0.25.1's own start-ups on an H200 (CPU only).

The logs in tests/golden/vllm_startups/logs/ are the real engine's
(benchmarks/h200_engine_session.sh, one ``vllm.LLM(load_format="dummy")`` start-up per
deployment of deployments.json; tools/record_startups.py). Each figure vLLM states there is
compared with the tool's prediction for the same deployment through ``verify``: KV tokens
and the memory left for the KV cache within 3%, each reserved part (weights, peak
activation, non-torch and CUDA-graph memory) within 10%, the backend per group, the
FlashAttention version and the CUDA-graph mode word for word. A known miss is an
``xfail(strict=True)`` naming the finding, never a wider tolerance.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from selector.catalog import load_catalog
from selector.compare.startup_log import read_startup_log
from selector.compare.verify import VerifyRow
from selector.pipeline.verify import verify_log
from tests.cli_app import command_app

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "vllm_startups"
DEPLOYMENTS: dict[str, dict[str, Any]] = json.loads(
    (GOLDEN / "deployments.json").read_text())["deployments"]
FIGURES: dict[str, dict[str, Any]] = json.loads((GOLDEN / "figures.json").read_text())["startups"]

MISSES: dict[tuple[str, str], str] = {}
"""(deployment, fact) -> the finding of a prediction that misses vLLM's figure."""


def _startup_runner() -> Any:
    """benchmarks/vllm_startups.py, which wrote the config.json each start-up ran with."""
    spec = importlib.util.spec_from_file_location("vllm_startups", ROOT / "benchmarks" / "vllm_startups.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_dir(name: str, into: Path) -> Path:
    """The folder with the config.json the recorded start-up ran with."""
    return Path(_startup_runner().model_dir(DEPLOYMENTS[name], into))


def rows(name: str, tmp: Path) -> dict[str, VerifyRow]:
    [result] = verify_log(str(GOLDEN / "logs" / f"{name}.log"), model=str(model_dir(name, tmp)),
                          device="H200", catalog=load_catalog())
    return {row.fact: row for row in result.rows}


def _cases() -> list[Any]:
    out = []
    for name, recorded in sorted(FIGURES.items()):
        facts = ["backends", *[f for f in recorded["facts"]
                               if f not in ("gpu_total_gib", "max_num_batched_tokens",
                                            "mla_prefill")]]
        for fact in facts:
            marks = [pytest.mark.xfail(strict=True, reason=MISSES[(name, fact)])] \
                if (name, fact) in MISSES else []
            out.append(pytest.param(name, fact, id=f"{name}-{fact}", marks=marks))
    return out


def test_at_least_the_recorded_startups_are_there() -> None:
    assert set(FIGURES) <= set(DEPLOYMENTS)
    with_kv = [n for n, f in FIGURES.items() if "kv_tokens" in f["facts"]]
    assert len(with_kv) >= 4 and all(f["version"] == "0.25.1" for f in FIGURES.values())


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_the_figures_are_read_off_vllms_own_lines(name: str) -> None:
    """figures.json is what the log states: every value is in its cited line's text."""
    log = read_startup_log(GOLDEN / "logs" / f"{name}.log")
    lines = (GOLDEN / "logs" / f"{name}.log").read_text().splitlines()
    recorded = FIGURES[name]
    assert [b.value for b in log.backends] == recorded["backends"]
    for fact, value in recorded["facts"].items():
        assert log.value(fact) == value, fact
        line = lines[recorded["lines"][fact] - 1]
        shown = f"{value:,}" if isinstance(value, int) and fact == "kv_tokens" else str(value)
        assert shown in line or fact == "cudagraph_mode", (fact, line)


@pytest.mark.parametrize(("name", "fact"), _cases())
def test_the_memory_model_agrees_with_vllms_startup(name: str, fact: str,
                                                    tmp_path: Path) -> None:
    row = rows(name, tmp_path).get(fact)
    assert row is not None, f"verify made no row for {fact}"
    assert row.predicted is not None, f"no prediction for {fact} (vLLM: {row.logged})"
    assert row.agree, (f"{name} {fact}: vLLM logged {row.logged}, the tool predicts "
                       f"{row.predicted} ({row.detail})")


def test_verify_cli_on_a_recorded_startup_every_format(tmp_path: Path) -> None:
    from selector.cli.verify import register

    app = command_app(register)
    log = str(GOLDEN / "logs" / "llama-3.1-8b-eager.log")
    model = str(model_dir("llama-3.1-8b-eager", tmp_path))
    for output_format in ("text", "json", "markdown", "github", "junit", "sarif"):
        result = CliRunner().invoke(app, ["verify", log, "--model", model, "-d", "H200",
                                          "-f", output_format])
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output
    text = CliRunner().invoke(app, ["verify", log, "--model", model, "-d", "H200"]).stdout
    assert "GPU KV cache size (tokens)" in text and "891,872" in text and "DIFFER" not in text
    document = json.loads(CliRunner().invoke(app, ["verify", log, "--model", model, "-d",
                                                   "H200", "-f", "json"]).stdout)
    assert document["agree"] and document["results"][0]["engine"] == "vllm==0.25.1"


def test_verify_exits_1_naming_the_fact_that_differs(tmp_path: Path) -> None:
    """A start-up whose peak activation the model does not predict (the recorded
    Llama-3.1-8B log with vLLM's 1.72 GiB peak made 3.72 GiB): verify says so in every
    format and exits 1."""
    from selector.cli.verify import register

    app = command_app(register)
    text = (GOLDEN / "logs" / "llama-3.1-8b-eager.log").read_text()
    assert "torch peak memory increase: 1.72GiB" in text
    log = tmp_path / "llama-3.1-8b-eager.log"
    log.write_text(text.replace("torch peak memory increase: 1.72GiB",
                                "torch peak memory increase: 3.72GiB"))
    model = str(model_dir("llama-3.1-8b-eager", tmp_path / "model"))
    text_run = CliRunner().invoke(app, ["verify", str(log), "--model", model, "-d", "H200"])
    assert text_run.exit_code == 1
    assert "peak activation (GiB)" in text_run.stdout and "DIFFER" in text_run.stdout
    github = CliRunner().invoke(app, ["verify", str(log), "--model", model, "-d", "H200", "-f",
                                      "github"])
    assert github.exit_code == 1 and "::error file=" in github.stdout and "VF001" in github.stdout
    sarif = json.loads(CliRunner().invoke(app, ["verify", str(log), "--model", model, "-d",
                                                "H200", "-f", "sarif"]).stdout)
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} == {"VF001"}
