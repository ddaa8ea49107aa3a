"""`check --format sarif` as GitHub code scanning ingests it: every example's log (and
those of `vllm serve` lines) matches the SARIF 2.1.0 schema's objects and GitHub's
upload rules, and every result is located (a result without a location is rejected:
"expected at least one location", github/codeql-action#2459)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
import pytest

from selector.catalog import load_catalog
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "sarif-2.1.0-subset.schema.json")
                    .read_text(encoding="utf-8"))
EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").rglob("*.yaml")
                  if p.parent.name != "workloads")  # the deployments (not bench workloads)

# GitHub's documented maximums of one SARIF upload ("SARIF results exceed hard limit",
# docs.github.com .../troubleshooting-sarif-uploads/results-exceed-limit)
MAX_RUNS, MAX_RESULTS, MAX_RULES, MAX_EXTENSIONS = 20, 25_000, 25_000, 100
MAX_LOCATIONS, MAX_TAGS = 1_000, 20
# an RFC 3986 URI reference: only unreserved, reserved and percent-encoded characters
_URI_REFERENCE = re.compile(r"^(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def ingestion_problems(log: dict[str, Any]) -> list[str]:
    """What GitHub code scanning would reject in ``log`` (empty: accepted)."""
    problems: list[str] = []
    runs = log.get("runs", [])
    if len(runs) > MAX_RUNS:
        problems.append(f"{len(runs)} runs > {MAX_RUNS}")
    for run in runs:
        driver = run["tool"]["driver"]
        rules = driver.get("rules", [])
        ids = [rule["id"] for rule in rules]
        if len(rules) > MAX_RULES or len(run.get("results", [])) > MAX_RESULTS:
            problems.append("too many rules or results")
        if len(run["tool"].get("extensions", [])) > MAX_EXTENSIONS:
            problems.append("too many tool extensions")
        problems += [f"rule {rule['id']}: more than {MAX_TAGS} tags" for rule in rules
                     if len(rule.get("properties", {}).get("tags", [])) > MAX_TAGS]
        for number, result in enumerate(run.get("results", [])):
            where = f"result {number} ({result.get('ruleId')})"
            if not result.get("ruleId"):
                problems.append(f"{where}: no ruleId")
            elif result["ruleId"] not in ids:
                problems.append(f"{where}: ruleId not among the rules")
            elif "ruleIndex" in result and ids[result["ruleIndex"]] != result["ruleId"]:
                problems.append(f"{where}: ruleIndex points at another rule")
            if not result.get("message", {}).get("text"):
                problems.append(f"{where}: empty message")
            locations = result.get("locations", [])
            if not 1 <= len(locations) <= MAX_LOCATIONS:
                problems.append(f"{where}: {len(locations)} locations (expected at least one)")
            for location in locations:
                physical = location.get("physicalLocation", {})
                uri = physical.get("artifactLocation", {}).get("uri", "")
                if not _URI_REFERENCE.match(uri):
                    problems.append(f"{where}: uri {uri!r} is not a percent-encoded URI")
                if _SCHEME.match(uri) or uri.startswith("/"):
                    problems.append(f"{where}: uri {uri!r} is not relative")
                if physical.get("region", {}).get("startLine", 0) < 1:
                    problems.append(f"{where}: no region startLine")
    return problems


def _sarif(argv: list[str]) -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli(["check", "--format", "sarif", *argv])
    assert code in (0, 1, 2) and out, err
    log = json.loads(out)
    jsonschema.validate(log, SCHEMA)
    return code, log


def _results(log: dict[str, Any]) -> list[dict[str, Any]]:
    return [result for run in log["runs"] for result in run["results"]]


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # as in a CI checkout: the files lie under the working directory


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_is_ingested(example: str, at_root: None) -> None:
    _, log = _sarif([example])
    assert ingestion_problems(log) == []
    for result in _results(log):
        assert unquote(result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) \
            == example


def test_every_example_on_every_device_is_ingested(at_root: None) -> None:
    # every device of every platform: a backend pinned for CUDA is validated on an AMD
    # device as vLLM's ROCm platform validates it (refused with its reasons, not bad input)
    devices = [d.name for d in load_catalog().devices]
    code, log = _sarif([arg for name in devices for arg in ("--device", name)] + EXAMPLES)
    assert code == 1 and _results(log)
    assert ingestion_problems(log) == []


@pytest.mark.parametrize("argv", [
    ["--device", "H100", "--", "VLLM_ATTENTION_BACKEND=X", "vllm", "serve", "llama-3.1-8b"],
    ["--device", "all", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
     "--kv-cache-dtype", "fp8", "--enforce-eager"],
    ["--device", "L40S", "--", "vllm", "serve", "openai/gpt-oss-20b",
     "--attention-backend", "FLASHINFER"],
], ids=["env", "fleet", "invalid"])
def test_a_command_line_result_is_located_at_the_command(argv: list[str], at_root: None) -> None:
    _, log = _sarif(argv)
    results = _results(log)
    assert results and ingestion_problems(log) == []
    command = " ".join(argv[argv.index("--") + 1:])
    for result in results:
        artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
        # the command itself, one relative segment: nothing in it reads as a path or query
        assert "/" not in artifact["uri"] and " " not in artifact["uri"]
        assert unquote(artifact["uri"]) == command
        assert "command line" in artifact["description"]["text"]


def test_a_command_line_result_points_at_the_file_holding_it(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    workflow = tmp_path / ".github" / "workflows" / "serve check.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("on: [push]\njobs:\n  check:\n    steps:\n"
                        "      - run: vllm serve llama-3.1-8b --enforce-eager\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    _, log = _sarif(["--device", "H100", "--command-file", ".github/workflows/serve check.yml",
                     "--", "vllm", "serve", "llama-3.1-8b", "--enforce-eager"])
    assert ingestion_problems(log) == []
    for result in _results(log):
        physical = result["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"]["uri"] == ".github/workflows/serve%20check.yml"
        assert physical["region"]["startLine"] == 5
    code, out, err = run_cli(["check", "--device", "H100", "--command-file", "missing.yml",
                              "--format", "sarif", "--", "vllm", "serve", "llama-3.1-8b"])
    assert code == 2 and "missing.yml" in err and "--command-file" in err and not out


def test_uris_are_percent_encoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "deploy #1"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "gpt-oss-20b-l40s-flashinfer.yaml", folder / "gpt oss%.yaml")
    monkeypatch.chdir(tmp_path)
    _, log = _sarif(["deploy #1/gpt oss%.yaml"])
    assert ingestion_problems(log) == []
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in _results(log)}
    assert uris == {"deploy%20%231/gpt%20oss%25.yaml"}


def test_an_unreadable_file_is_located(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken.yaml").write_text("device: H1000\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, log = _sarif(["broken.yaml"])
    assert code == 2 and ingestion_problems(log) == []
    assert {r["ruleId"] for r in _results(log)} == {"AS001"}


def test_the_rules_catch_what_github_rejects() -> None:
    """The checker itself: a result without a location, an absolute or unencoded URI."""
    result = {"ruleId": "SE002", "ruleIndex": 0, "message": {"text": "x"}}
    log: dict[str, Any] = {"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "attn-select", "rules": [{"id": "SE002"}]}},
        "results": [result]}]}
    assert any("expected at least one" in p for p in ingestion_problems(log))
    for uri, problem in (("file:///x.yaml", "not relative"), ("/x.yaml", "not relative"),
                         ("a b.yaml", "percent-encoded")):
        result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": uri},
                                                     "region": {"startLine": 1}}}]
        assert any(problem in p for p in ingestion_problems(log)), uri
    with pytest.raises(jsonschema.ValidationError):  # the schema's names, no others
        jsonschema.validate({**log, "runs": [{**log["runs"][0], "result": []}]}, SCHEMA)


def test_command_file_is_for_a_command_line_only(at_root: None) -> None:
    code, _, err = run_cli(["check", "--command-file", "README.md", EXAMPLES[0]])
    assert code == 2 and "--command-file applies to a `vllm serve` command line only" in err
