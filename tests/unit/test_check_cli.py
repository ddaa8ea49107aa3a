"""`attn-select check`: several files and globs, --strict, the fleet view, vllm serve
command lines, and the CI formats checked against their published shapes."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
VALID = str(ROOT / "examples" / "llama-3.1-8b-h100.yaml")
INVALID = str(ROOT / "examples" / "gpt-oss-20b-l40s-flashinfer.yaml")

DOWNGRADE = """\
# FlashInfer on Hopper cannot capture FULL graphs of mixed batches
device: H100
attention_backend: FLASHINFER
cudagraph_mode: FULL
layer:
  head_size: 128
  num_heads: 32
  num_kv_heads: 8
"""


@pytest.fixture
def downgrade(tmp_path: Path) -> str:
    path = tmp_path / "downgrade.yaml"
    path.write_text(DOWNGRADE, encoding="utf-8")
    return str(path)


def test_several_files_and_globs_report_all(tmp_path: Path) -> None:
    code, out, _ = run_cli(["check", str(ROOT / "examples" / "*.yaml"), "--format", "json"])
    docs = json.loads(out)
    assert code == 1
    sources = {Path(d["source"]).name for d in docs}
    assert {"llama-3.1-8b-h100.yaml", "gpt-oss-20b-l40s-flashinfer.yaml"} <= sources
    code, out, _ = run_cli(["check", VALID, VALID, "--format", "json"])
    assert code == 0 and isinstance(json.loads(out), dict)  # a file named twice is checked once
    code, _, err = run_cli(["check", str(tmp_path / "*.yaml")])
    assert code == 2 and "no file matches" in err


def test_an_unreadable_file_does_not_hide_the_others(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("device: H100\nlayer: {head_size: nope}\n", encoding="utf-8")
    code, out, err = run_cli(["check", str(broken), VALID])
    assert code == 2
    assert "broken.yaml:2" in err and "VALID" in out
    code, out, _ = run_cli(["check", str(broken), VALID, "--format", "junit"])
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None and suite.get("errors") == "1" and suite.get("tests") == "2"


def test_strict_turns_warnings_into_failures(downgrade: str) -> None:
    code, out, _ = run_cli(["check", downgrade, "--format", "github"])
    assert code == 0 and out.startswith("::warning ") and "AS002" in out
    code, out, _ = run_cli(["check", downgrade, "--format", "github", "--strict"])
    assert code == 1 and out.startswith("::error ")


def test_fleet_view_has_one_row_per_device() -> None:
    code, out, _ = run_cli(["check", VALID, "--device", "H100", "--device", "B200",
                            "--device", "RTX 5090"])
    assert code == 0
    rows = [line for line in out.splitlines() if re.match(r"^│ (H100|B200|RTX 5090) ", line)]
    assert len(rows) == 3
    assert "FLASHINFER" in next(r for r in rows if r.startswith("│ B200"))
    code, out, _ = run_cli(["check", VALID, "--device", "all", "--format", "json"])
    from selector.catalog import load_catalog

    assert len(json.loads(out)) == len(load_catalog().devices)
    code, _, err = run_cli(["check", VALID, "--device", "H1000"])
    assert code == 2 and "did you mean" in err


def test_vllm_serve_command_line() -> None:
    code, out, _ = run_cli(["check", "--device", "H100", "--", "vllm", "serve",
                            "meta-llama/Llama-3.1-8B-Instruct", "--kv-cache-dtype", "fp8"])
    assert code == 0 and "VALID" in out and "llama-3.1-8b" in out
    code, out, _ = run_cli(["check", "--device", "H100", "--format", "json", "--",
                            "VLLM_ATTENTION_BACKEND=FLASHINFER", "vllm", "serve", "gpt-oss-20b"])
    doc = json.loads(out)
    assert code == 0 and doc["command"]["model_source"] == "gpt-oss-20b"
    assert any(f["code"] == "AS101" and f["level"] == "warning" for f in doc["findings"])
    code, _, _ = run_cli(["check", "--device", "H100", "--strict", "--",
                          "VLLM_ATTENTION_BACKEND=FLASHINFER", "vllm", "serve", "gpt-oss-20b"])
    assert code == 1
    code, _, err = run_cli(["check", "--", "vllm", "serve", "llama-3.1-8b"])
    assert code == 2 and "--device" in err
    code, _, err = run_cli(["check", "--device", "H100", "--", "vllm", "serve", "llama-3.1-8b",
                            "--kv-cache-dtype", "fp9"])
    assert code == 2 and "--kv-cache-dtype" in err


def test_serve_fleet_and_model_override() -> None:
    # H200: the FP8 weights (about 79 GiB per GPU at TP 8) do not fit an 80 GB H100
    code, out, _ = run_cli(["check", "--device", "H200", "--device", "L40S", "--model",
                            "deepseek-v3.2", "--format", "markdown", "--", "vllm", "serve",
                            "/models/DeepSeek-V3.2-Exp", "-tp", "8"])
    assert code == 1  # no sparse MLA backend on Ada
    assert "| H200 | ✅ valid |" in out and "| L40S | ❌ invalid |" in out


def test_serve_model_override_reads_a_config_json_of_any_file_name(tmp_path: Path) -> None:
    # a local config file that is not named config.json was once looked up as a preset of
    # its stem ("unknown model preset 'gpt-oss'", exit 2)
    config = tmp_path / "gpt-oss.json"
    config.write_text((FIXTURES / "hf_configs" / "openai--gpt-oss-20b.json").read_text("utf-8"),
                      encoding="utf-8")
    for argv in (["--model", str(config), "--", "vllm", "serve", "openai/gpt-oss-20b"],
                 ["--", "vllm", "serve", str(config)]):
        code, out, err = run_cli(["check", "--device", "H100", "--format", "json", *argv])
        assert code == 0, err
        doc = json.loads(out)
        assert doc["command"]["model_source"] == "gpt-oss" and doc["model"]["num_layers"] == 24


# ---------------------------------------------------------------- the formats


def test_sarif_matches_the_schema_and_locates_findings(downgrade: str) -> None:
    code, out, _ = run_cli(["check", INVALID, downgrade, VALID, "--format", "sarif"])
    assert code == 1
    log = json.loads(out)
    schema = json.loads((FIXTURES / "sarif-2.1.0-subset.schema.json").read_text("utf-8"))
    jsonschema.validate(log, schema)
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert len(rules) == len(set(rules))
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert set(by_rule) == {"SE002", "AS002"}
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
    located = by_rule["SE002"]["locations"][0]["physicalLocation"]
    # the pinned backend is on line 4 of the example
    assert located["region"]["startLine"] == 4
    assert located["artifactLocation"]["uri"].endswith("gpt-oss-20b-l40s-flashinfer.yaml")
    assert by_rule["AS002"]["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert by_rule["SE002"]["level"] == "error" and by_rule["AS002"]["level"] == "warning"


def test_sarif_of_a_command_line_locates_every_result_at_the_command() -> None:
    # GitHub rejects a result without a location; tests/unit/test_sarif_ingestion.py has more
    _, out, _ = run_cli(["check", "--device", "H100", "--format", "sarif", "--",
                         "VLLM_ATTENTION_BACKEND=X", "vllm", "serve", "llama-3.1-8b"])
    log = json.loads(out)
    jsonschema.validate(log, json.loads(
        (FIXTURES / "sarif-2.1.0-subset.schema.json").read_text("utf-8")))
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in log["runs"][0]["results"]}
    assert uris == {"VLLM_ATTENTION_BACKEND%3DX%20vllm%20serve%20llama-3.1-8b"}


_JUNIT_SUITE_ATTRS = {"name", "tests", "failures", "errors", "skipped", "time", "timestamp",
                      "hostname", "id", "package", "disabled", "file"}
_JUNIT_CASE_ATTRS = {"name", "classname", "time", "status", "assertions", "file", "line"}
_JUNIT_CASE_CHILDREN = {"skipped", "error", "failure", "system-out", "system-err"}


def test_junit_has_the_jenkins_xsd_shape(downgrade: str, tmp_path: Path) -> None:
    """The shape of the Jenkins JUnit XSD (junit-4.xsd): testsuites > testsuite >
    testcase, required attributes, allowed children, counts that add up."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("device: H1000\n", encoding="utf-8")
    _, out, _ = run_cli(["check", INVALID, downgrade, VALID, str(broken), "--format", "junit",
                         "--strict"])
    assert out.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(out)
    assert root.tag == "testsuites"
    suites = list(root)
    assert suites and all(s.tag == "testsuite" for s in suites)
    for suite in suites:
        assert {"name", "tests"} <= set(suite.attrib) <= _JUNIT_SUITE_ATTRS
        cases = list(suite)
        assert all(c.tag == "testcase" for c in cases)
        assert int(suite.attrib["tests"]) == len(cases) == 4
        failures = sum(1 for c in cases if c.find("failure") is not None)
        errors = sum(1 for c in cases if c.find("error") is not None)
        assert (int(suite.attrib["failures"]), int(suite.attrib["errors"])) == (failures, errors)
        assert (failures, errors) == (2, 1)
        for case in cases:
            assert {"name", "classname"} <= set(case.attrib) <= _JUNIT_CASE_ATTRS
            assert {child.tag for child in case} <= _JUNIT_CASE_CHILDREN
            for problem in [*case.findall("failure"), *case.findall("error")]:
                assert problem.get("message") and problem.get("type")
            float(case.attrib.get("time", "0"))


def test_github_workflow_commands(downgrade: str) -> None:
    _, out, _ = run_cli(["check", INVALID, downgrade, "--format", "github"])
    commands = [line for line in out.splitlines() if line.startswith("::")]
    assert len(commands) == 2
    pattern = re.compile(r"^::(error|warning|notice) file=[^,:]+,line=\d+,title=[^:,]+::\S.*$")
    for line in commands:
        assert pattern.match(line), line
    assert commands[0].startswith("::error file=") and ",line=4," in commands[0]
    assert "%0A" not in commands[0] or "\n" not in commands[0]


def test_output_file(tmp_path: Path) -> None:
    target = tmp_path / "report.sarif"
    code, out, _ = run_cli(["check", VALID, "--format", "sarif", "-o", str(target)])
    assert code == 0 and out == ""
    assert json.loads(target.read_text("utf-8"))["version"] == "2.1.0"


def test_an_unwritable_output_file_exits_2_naming_it(tmp_path: Path) -> None:
    # once an internal error (exit 70)
    for target in (tmp_path / "missing" / "report.txt", tmp_path):
        code, _, err = run_cli(["check", VALID, "-o", str(target)])
        assert code == 2 and f"{target}: field '--output': cannot write the report" in err
