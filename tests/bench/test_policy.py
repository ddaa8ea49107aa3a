"""The policy on recorded measurements (tests/fixtures/bench/), and ``check --measurements``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selector.bench.measurements import Measurements, load_measurements, parse_measurements
from selector.bench.policy import apply_measurements, decide, decide_for_deployment
from selector.catalog import load_catalog
from selector.cli import app, register_commands
from selector.errors import InputError
from selector.inputs.config import deployment_facts, load_deployment
from selector.solver import solve

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "bench"
SYNTHETIC = FIXTURES / "synthetic-h200-llama.json"
DEPLOYMENT = REPO / "tests" / "fixtures" / "smoke" / "llama-h200.yaml"


def load() -> Measurements:
    return load_measurements(SYNTHETIC)


def with_medians(measurements: Measurements, backend: str, factor: float) -> Measurements:
    data = measurements.to_json()
    for result in data["results"]:
        if result["backend"] == backend:
            result["samples_us"] = [s * factor for s in result["samples_us"]]
    return parse_measurements(data)


def result_for(path: Path, **changes: str) -> object:
    catalog = load_catalog()
    loaded = load_deployment(str(path))
    return solve(deployment_facts(loaded, catalog), engine=loaded.deployment.engine,
                 attention_backend=changes.get("pin"), suggest=False, catalog=catalog)


def test_the_fixture_loads_and_recomputes_statistics() -> None:
    measurements = load()
    assert measurements.passed
    assert measurements.backends() == ["FLASH_ATTN", "FLASHINFER"]
    assert measurements.ceilings.copy_tbps == pytest.approx(4.26, rel=0.01)
    first = measurements.results[0]
    assert first.summary is not None and first.summary.outliers  # the planted slow repeat


def test_priority_keeps_vllms_choice_and_reports_the_gap() -> None:
    slower_fa = with_medians(load(), "FLASH_ATTN", 1.5)
    decision = decide_for_deployment(slower_fa, policy="priority")
    assert decision.current == decision.chosen == "FLASH_ATTN"
    assert decision.fastest == "FLASHINFER"
    assert decision.speedup is not None and decision.speedup > 1.2
    assert "--policy fastest would pin it" in decision.summary()


def test_fastest_picks_the_lowest_total_and_pins_it() -> None:
    slower_fa = with_medians(load(), "FLASH_ATTN", 1.5)
    decision = decide_for_deployment(slower_fa, policy="fastest")
    assert decision.chosen == "FLASHINFER" and decision.changes and decision.significant
    assert decision.flags == ("--attention-backend", "FLASHINFER")
    totals = {s.backend: s.total_us for s in decision.scores}
    assert decision.speedup == pytest.approx(totals["FLASH_ATTN"] / totals["FLASHINFER"])
    assert "TRITON_ATTN" in decision.excluded  # valid, but no runner: said, not hidden


def test_fastest_keeps_the_priority_choice_within_noise() -> None:
    nearly = with_medians(load(), "FLASH_ATTN", 1.0)
    nearly = with_medians(nearly, "FLASHINFER", 4268.8 / 4960.3 * 1.004)
    decision = decide_for_deployment(nearly, policy="fastest")
    assert decision.chosen == "FLASH_ATTN"
    if decision.fastest != "FLASH_ATTN":
        assert not decision.significant and "within noise" in decision.summary()


def test_recorded_fixture_fastest_is_the_priority_choice() -> None:
    decision = decide_for_deployment(load(), policy="fastest")
    assert decision.chosen == decision.current == decision.fastest == "FLASH_ATTN"
    assert decision.shapes == ("decode 1x4k", "decode 1x16k", "decode 128x4k",
                               "decode 128x16k", "prefill 1x8k")


def test_failed_or_invalid_backends_are_excluded() -> None:
    data = load().to_json()
    for result in data["results"]:
        if result["backend"] == "FLASHINFER" and result["shape"]["name"] == "prefill 1x8k":
            result["check"] = {"passed": False, "detail": "worst token row 3"}
    measurements = parse_measurements(data)
    assert not measurements.passed
    assert "prefill 1x8k" in measurements.failures()[0]
    decision = decide(measurements, current="FLASH_ATTN", valid=["FLASH_ATTN", "FLASHINFER"])
    assert decision.chosen == "FLASH_ATTN"
    assert "output mismatch on prefill 1x8k" in decision.excluded["FLASHINFER"]
    only_fi = decide(load(), current="FLASH_ATTN", valid=["FLASHINFER"])
    assert only_fi.chosen == "FLASHINFER"
    assert only_fi.excluded["FLASH_ATTN"] == "measured, but not valid for this deployment"
    none = decide(load(), current="TRITON_ATTN", valid=["TRITON_ATTN"])
    assert none.chosen is None and "no valid backend" in none.notes[0]


def test_apply_measurements_uses_the_checks_validity() -> None:
    result = result_for(DEPLOYMENT)
    decision = apply_measurements(result, with_medians(load(), "FLASH_ATTN", 2.0))
    assert decision.applicable and decision.chosen == "FLASHINFER"
    pinned = result_for(DEPLOYMENT, pin="FLASHINFER")
    assert apply_measurements(pinned, load()).current == "FLASHINFER"


def test_apply_measurements_refuses_another_geometry(tmp_path: Path) -> None:
    other = tmp_path / "d.yaml"
    other.write_text("device: H200\ndtype: bfloat16\nlayer: {head_size: 64, num_heads: 16, "
                     "num_kv_heads: 16}\n")
    decision = apply_measurements(result_for(other), load())
    assert not decision.applicable and decision.chosen is None
    assert "head_size 128 (deployment: 64)" in decision.summary()


def test_bad_measurement_files(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    for text, fragment in (("{", "invalid JSON"), ("[]", "JSON object"),
                           ('{"schema": "x"}', "unsupported measurements schema"),
                           (json.dumps({**load().to_json(), "extra": 1}), "unknown field")):
        path.write_text(text)
        with pytest.raises(InputError, match=fragment):
            load_measurements(path)
    with pytest.raises(InputError, match="file not found"):
        load_measurements(tmp_path / "missing.json")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "bench.json").write_text(SYNTHETIC.read_text())
    assert load_measurements(tmp_path / "dir").passed


def invoke(*args: str) -> object:
    register_commands(["check"])
    return CliRunner().invoke(app, list(args))


def test_check_measurements_text_and_json() -> None:
    text = invoke("check", str(DEPLOYMENT), "--measurements", str(SYNTHETIC))
    assert text.exit_code == 0, text.output
    assert "Measured (synthetic-h200-llama.json)" in text.output
    assert "--attention-backend FLASH_ATTN" in text.output
    as_json = invoke("check", str(DEPLOYMENT), "--measurements", str(SYNTHETIC), "-f", "json")
    assert as_json.exit_code == 0
    policy = json.loads(as_json.output)["measured_policy"]
    assert policy["chosen"] == "FLASH_ATTN" and policy["flags"] == ["--attention-backend",
                                                                     "FLASH_ATTN"]


def test_check_measurements_bad_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    result = subprocess.run([sys.executable, "-m", "selector", "check", str(DEPLOYMENT),
                             "--measurements", str(bad)], cwd=REPO, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 2, result.stderr
    assert f"{bad}: field 'schema'" in result.stderr
    assert result.stdout == ""  # refused before any report is printed
