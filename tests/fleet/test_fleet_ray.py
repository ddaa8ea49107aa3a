"""The fleet smoke against a real local Ray cluster, with the CPU stand-in kernels doing
the work: two device types pass, one is absent, one raises in its kernel, one has no
kernel library, one kills its worker, one times out; Ctrl-C cancels; merged reports in
every format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from typer.testing import CliRunner

from selector.catalog import load_catalog
from selector.cli import app, register_commands

register_commands()

pytestmark = pytest.mark.usefixtures("ray_cluster", "cpu_entries")

REPO = Path(__file__).resolve().parents[2]
CONFIG = "tests/fixtures/fleet/small-gqa.yaml"
SARIF_SCHEMA = REPO / "tests/fixtures/sarif-2.1.0-subset.schema.json"
MIXED = ["H100", "B200", "H20", "A100", "A10G", "L4"]


def fleet(*args: str) -> Any:
    return CliRunner().invoke(app, ["smoke", CONFIG, "--ray", "auto", "--no-measure", *args],
                              catch_exceptions=False)


@pytest.fixture(scope="module")
def mixed_run() -> dict[str, Any]:
    """One fleet run over every kind of answer; the formats are rendered from its JSON."""
    runner = CliRunner()
    from selector.fleet import dispatch

    saved = dict(dispatch.ENTRIES)
    dispatch.ENTRIES.update(smoke="cpu_node:smoke_on_cpu")
    try:
        result = runner.invoke(app, ["smoke", CONFIG, "--ray", "auto", "--no-measure",
                                     "--parity", "--timeout", "240", "--format", "json",
                                     *[f"--device={d}" for d in MIXED]],
                               catch_exceptions=False)
    finally:
        dispatch.ENTRIES.clear()
        dispatch.ENTRIES.update(saved)
    return {"exit_code": result.exit_code, "document": json.loads(result.stdout)}


def rows(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["device"]: row for row in document["devices"]}


def test_every_device_gets_its_answer(mixed_run: dict[str, Any]) -> None:
    document = mixed_run["document"]
    assert [row["device"] for row in document["devices"]] == MIXED
    by_device = rows(document)
    for device in ("H100", "B200"):
        row = by_device[device]
        assert row["status"] == "passed" and row["exit_code"] == 0, row
        report = row["report"]  # the local smoke's own JSON report, from that node
        assert report["passed"] and report["device"].startswith(f"CPU stand-in for {device}")
        assert {g["plan"]["backend"] for g in report["groups"]} == {"FLASH_ATTN", "FLASHINFER"}
        names = [c["name"] for g in report["groups"] for c in g["checks"]]
        assert any("graph replay" in n for n in names)
        assert any(n.startswith("parity vs") for n in names)
        assert row["node"] and row["elapsed_s"] > 0
    # negotiated per device: FA3 + NHD on Hopper, FlashInfer HND on Blackwell
    assert by_device["H100"]["backends"][0] == "FLASH_ATTN FA3"
    assert by_device["B200"]["backends"][0] == "FLASHINFER"
    absent = by_device["H20"]
    assert absent["status"] == "absent" and absent["exit_code"] == 4, absent
    assert "no alive node with a H20 GPU" in absent["errors"][0]
    raised = by_device["A100"]
    assert raised["status"] == "failed" and raised["exit_code"] == 3, raised
    assert any("illegal memory access" in e for e in raised["errors"]), raised["errors"]
    missing = by_device["A10G"]
    assert missing["status"] == "cannot-run" and missing["exit_code"] == 4, missing
    assert "CUDA" in missing["errors"][0] and "attn-select[gpu]" in missing["hint"]
    died = by_device["L4"]
    assert died["status"] == "worker-died" and died["exit_code"] == 4, died
    assert "worker died on node" in died["errors"][0] and died["node"]
    # a kernel failed somewhere: 3 wins over the devices that could not run
    assert mixed_run["exit_code"] == 3 == document["exit_code"]


def _report(mixed_run: dict[str, Any]) -> Any:
    from selector.fleet.outcome import FleetReport

    report = FleetReport.from_json(mixed_run["document"])
    assert report.to_json() == mixed_run["document"]  # the JSON form reads back whole
    return report


def test_junit_has_one_case_per_device(mixed_run: dict[str, Any]) -> None:
    from selector.fleet.render import render_junit

    root = ET.fromstring(render_junit(_report(mixed_run)))
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == [f"small-gqa.yaml @ {d}" for d in MIXED]
    assert suite.get("failures") == "1" and suite.get("errors") == "3"
    assert cases["small-gqa.yaml @ H100"].find("failure") is None
    assert cases["small-gqa.yaml @ A100"].find("failure") is not None
    assert "AS021" in (cases["small-gqa.yaml @ H20"].find("error").get("type") or "")


def test_markdown_github_and_text(mixed_run: dict[str, Any]) -> None:
    from rich.console import Console

    from selector.fleet.render import render_github, render_markdown, render_table

    report = _report(mixed_run)
    markdown = render_markdown(report)
    assert "| H100 | ✅ PASS |" in markdown and "| H20 | ⚠️ ABSENT |" in markdown
    github = render_github(report).splitlines()
    assert sum(line.startswith("::error ") for line in github) == 4
    assert sum(line.startswith("::notice ") for line in github) == 2
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render_table(report))
    text = console.export_text()
    for word in ("PASS", "FAIL", "ABSENT", "CANNOT-RUN", "WORKER-DIED", "verdict time"):
        assert word in text


def test_sarif_is_valid_and_names_each_failing_device(mixed_run: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from selector.catalog import load_catalog
    from selector.check.records import CLI_CODES
    from selector.fleet.render import render_sarif

    descriptions = {c.code: (c.name, c.message) for c in load_catalog().codes.values()}
    descriptions.update(CLI_CODES)
    document = render_sarif(_report(mixed_run), version="0", descriptions=descriptions)
    jsonschema.validate(document, json.loads(SARIF_SCHEMA.read_text()))
    results = document["runs"][0]["results"]
    assert sorted(r["properties"]["device"] for r in results) == ["A100", "A10G", "H20", "L4"]
    assert {r["ruleId"] for r in results} == {"AS020", "AS021", "AS022", "AS024"}


def test_a_task_over_the_timeout_is_cancelled_and_reported(tmp_path: Path) -> None:
    out = tmp_path / "fleet.xml"
    result = fleet("--device", "L40S", "--device", "H20", "--timeout", "3",
                   "--format", "junit", "--output", str(out))
    assert result.exit_code == 4, result.output
    root = ET.fromstring(out.read_text())
    errors = [e.get("message") or "" for e in root.iter("error")]
    assert any("no answer within 3 s: cancelled on node" in e for e in errors), errors


def test_a_task_that_raises_is_an_error_row_with_its_node() -> None:
    result = fleet("--device", "A10", "--format", "json", "--timeout", "120")
    assert result.exit_code == 70, result.output
    row = json.loads(result.stdout)["devices"][0]
    assert row["status"] == "error" and row["node"], row
    assert row["errors"][0].startswith("the task raised on node ")
    assert "ValueError: a bug in the task (stand-in)" in row["errors"][0]


def test_ctrl_c_cancels_every_task(monkeypatch: pytest.MonkeyPatch, ray_cluster: Any) -> None:
    from selector.fleet.run import FleetRequest, run_fleet

    cancelled: list[Any] = []
    real_cancel = ray_cluster.cancel

    def interrupt(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    def cancel(ref: Any, **kwargs: Any) -> Any:
        cancelled.append(ref)
        return real_cancel(ref, **kwargs)

    monkeypatch.setattr(ray_cluster, "wait", interrupt)
    monkeypatch.setattr(ray_cluster, "cancel", cancel)
    report = run_fleet(FleetRequest(command="smoke", configs=(CONFIG,),
                                    devices=("L40S", "H100"), timeout_s=60,
                                    settings={"measure": False}), catalog=load_catalog())
    assert report.interrupted and report.exit_code == 130
    assert [o.status for o in report.outcomes] == ["cancelled", "cancelled"]
    assert len(cancelled) == 2
    monkeypatch.undo()
    # the bound is generous: a loaded machine can take long to deliver the cancellation,
    # and what is tested is that it arrives, not how fast
    with pytest.raises(ray_cluster.exceptions.TaskCancelledError):
        ray_cluster.get(cancelled[0], timeout=180)


def test_bench_writes_one_file_per_device_and_check_picks_them(tmp_path: Path) -> None:
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({
        "decode": {"batch_sizes": [1], "context_lengths": [40]},
        "settings": {"min_repeats": 3, "max_repeats": 4, "warmup": 1, "builder_repeats": 2}}))
    result = CliRunner().invoke(app, [
        "bench", CONFIG, "--ray", "auto", "--device", "H100", "--device", "B200",
        "--device", "H20", "--workload", str(workload), "--output", str(tmp_path / "out"),
        "--format", "json"], catch_exceptions=False)
    assert result.stdout.startswith("{"), result.output
    document = json.loads(result.stdout)
    by_device = rows(document)
    assert by_device["H20"]["status"] == "absent"
    assert result.exit_code == 4, result.output
    for device in ("H100", "B200"):
        assert by_device[device]["status"] == "passed", by_device[device]
        saved = json.loads((tmp_path / "out" / device / "bench.json").read_text())
        assert saved["device"]["catalog_name"] == device
    checked = CliRunner().invoke(app, [
        "check", CONFIG, "--device", "H100", "--device", "B200", "--device", "H20",
        "--format", "json", "--measurements", str(tmp_path / "out")], catch_exceptions=False)
    assert checked.stdout.startswith("["), checked.output
    documents = json.loads(checked.stdout)
    policies = {d["device"]: d.get("measured_policy") for d in documents}
    assert policies["H100"]["measurements"].endswith("H100/bench.json")
    assert policies["B200"]["measurements"].endswith("B200/bench.json")
    assert policies["H20"] is None
    assert "no measurements for H20" in checked.stderr


def test_another_process_joins_by_address_and_ships_its_code(ray_cluster: Any,
                                                             tmp_path: Path) -> None:
    """A second driver joins the test cluster through RAY_ADDRESS with --ship-code: the
    worker imports the packed copy (the real entry then finds no CUDA: exit 4 + hint)."""
    import os
    import subprocess
    import sys

    address = ray_cluster.get_runtime_context().gcs_address
    env = {**os.environ, "RAY_ADDRESS": address, "RAY_USAGE_STATS_ENABLED": "0"}
    result = subprocess.run(
        [sys.executable, "-m", "selector", "smoke", str(REPO / CONFIG), "--ray", "auto",
         "--device", "H100", "--ship-code", "--no-measure", "--format", "json",
         "--timeout", "240"],
        # elsewhere than the checkout: Ray puts the driver's folder on the workers' path
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 4, result.stdout + result.stderr
    document = json.loads(result.stdout)
    row = document["devices"][0]
    assert document["cluster"] == address
    assert row["status"] == "cannot-run" and "attn-select[gpu]" in row["hint"], row
    code = row["worker"]["code"]
    assert code != str(REPO / "selector") and "runtime_resources" in code, row["worker"]


def test_a_worker_without_the_code_gets_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from selector.fleet import dispatch

    monkeypatch.setitem(dispatch.ENTRIES, "smoke", "attn_select_not_installed_here:smoke")
    result = fleet("--device", "H100", "--format", "json", "--timeout", "120")
    assert result.exit_code == 4, result.output
    row = json.loads(result.stdout)["devices"][0]
    assert row["status"] == "cannot-run"
    assert "cannot be loaded on node" in row["errors"][0]
    assert "attn-select[gpu]" in row["hint"] and "--ship-code" in row["hint"]


def test_losing_the_cluster_is_an_answer(monkeypatch: pytest.MonkeyPatch,
                                         ray_cluster: Any) -> None:
    from selector.fleet.run import FleetRequest, run_fleet

    def lost(*_: Any, **__: Any) -> Any:
        raise ConnectionError("GCS connection lost (stand-in)")

    monkeypatch.setattr(ray_cluster, "wait", lost)
    report = run_fleet(FleetRequest(command="smoke", configs=(CONFIG,), devices=("L40S",),
                                    timeout_s=60, settings={"measure": False}), catalog=load_catalog())
    row = report.outcomes[0]
    assert (row.status, row.exit_code, report.exit_code) == ("cannot-run", 4, 4)
    assert "lost the Ray cluster while waiting for node" in row.errors[0]
    assert "GCS connection lost" in row.errors[0]
