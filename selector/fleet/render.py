"""A fleet report in every ``check`` output format (no printing here: the CLI prints).

The fleet table (device, verdict, backend, provider, node, errors, verdict time) is the
text view; JSON is :meth:`FleetReport.to_json`; JUnit has one test case per device (and
deployment); markdown, GitHub annotations and SARIF carry the same rows.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from rich.console import Group, RenderableType
from rich.text import Text

from selector.fleet.outcome import DeviceOutcome, FleetReport
from selector.report.formats.sarif import SARIF_SCHEMA, SARIF_VERSION, artifact_uri
from selector.report.plain import PlainTable

__all__ = ["STATUS_CODES", "render_github", "render_json", "render_junit", "render_markdown",
           "render_sarif", "render_table"]

STATUS_CODES: dict[str, str] = {
    "failed": "AS020", "absent": "AS021", "cannot-run": "AS022", "timed-out": "AS023",
    "worker-died": "AS024", "cancelled": "AS025", "invalid": "AS026", "input-error": "AS001",
    "error": "AS026", "other": "AS026", "substituted": "AS027",
}
"""Row status -> the code (``schemas``' CLI codes) a CI report files it under."""

_STYLES = {"passed": "bold black on green", "failed": "bold white on red"}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _title(report: FleetReport) -> str:
    return f"attn-select {report.command} on Ray ({report.cluster})"


def _name(outcome: DeviceOutcome, report: FleetReport) -> str:
    many = len({o.config for o in report.outcomes}) > 1
    return f"{Path(outcome.config).name} @ {outcome.device}" if many else outcome.device


def render_table(report: FleetReport) -> RenderableType:
    """The fleet table and a one-line verdict."""
    table = PlainTable(title=_title(report), show_header=True, header_style="bold",
                       title_justify="left")
    table.add_column("device")
    table.add_column("verdict")
    table.add_column("backend")
    table.add_column("provider", overflow="fold")
    table.add_column("node", overflow="fold")
    table.add_column("errors", overflow="fold", ratio=2)
    table.add_column("verdict time", justify="right")
    for outcome in report.outcomes:
        verdict = Text(f" {outcome.verdict} ", style=_STYLES.get(outcome.status, "bold yellow"))
        errors = outcome.summary + (f" (hint: {outcome.hint})"
                                    if outcome.errors and outcome.hint else "")
        table.add_row(_name(outcome, report), verdict, ", ".join(outcome.backends) or "-",
                      "; ".join(outcome.providers) or "-", outcome.node or "-", errors or "-",
                      _seconds(outcome.elapsed_s))
    passed = sum(o.passed for o in report.outcomes)
    line = Text(f"{passed} of {len(report.outcomes)} device rows passed in "
                f"{report.elapsed_s:.1f} s; exit {report.exit_code}"
                + (" (interrupted)" if report.interrupted else ""),
                style="bold green" if report.passed else "bold red")
    return Group(table, line)


def render_json(report: FleetReport) -> str:
    return json.dumps(report.to_json(), indent=2, default=str) + "\n"


def _detail(outcome: DeviceOutcome) -> str:
    lines = [f"device {outcome.device} ({outcome.ray_type or 'not in the cluster'}), "
             f"node {outcome.node or '-'}, exit {outcome.exit_code}, "
             f"verdict time {_seconds(outcome.elapsed_s)}"]
    if outcome.backends:
        lines.append(f"backends: {', '.join(outcome.backends)}")
    if outcome.providers:
        lines.append(f"ran: {'; '.join(outcome.providers)}")
    lines.extend(outcome.errors)
    if outcome.hint:
        lines.append(f"hint: {outcome.hint}")
    return "\n".join(lines)


def render_junit(report: FleetReport) -> str:
    """JUnit XML: one test case per (deployment, device); a failed check is a failure,
    a device that could not run is an error."""
    failures = sum(o.status == "failed" for o in report.outcomes)
    errors = sum(o.status not in ("passed", "failed") for o in report.outcomes)
    total = sum(o.elapsed_s or 0.0 for o in report.outcomes)
    counts = {"tests": str(len(report.outcomes)), "failures": str(failures),
              "errors": str(errors), "skipped": "0", "time": f"{total:.3f}"}
    root = ET.Element("testsuites", {"name": "attn-select", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": f"attn-select {report.command} fleet",
                                              **counts})
    for outcome in report.outcomes:
        case = ET.SubElement(suite, "testcase", {
            "name": f"{Path(outcome.config).name} @ {outcome.device}",
            "classname": f"attn-select.{report.command}.{outcome.device.replace(' ', '_')}",
            "time": f"{outcome.elapsed_s or 0.0:.3f}", "file": outcome.config})
        if not outcome.passed:
            kind = "failure" if outcome.status == "failed" else "error"
            element = ET.SubElement(case, kind, {
                "message": outcome.summary or outcome.verdict,
                "type": f"{STATUS_CODES.get(outcome.status, 'AS026')} {outcome.status}"})
            element.text = _detail(outcome)
        ET.SubElement(case, "system-out").text = _detail(outcome)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def render_markdown(report: FleetReport) -> str:
    icons = {"passed": "✅", "failed": "❌"}
    lines = [f"## {_title(report)}", "",
             "| device | verdict | backend | provider | node | errors | verdict time |",
             "| --- | --- | --- | --- | --- | --- | ---: |"]
    for outcome in report.outcomes:
        errors = outcome.summary + (f" (hint: {outcome.hint})"
                                    if outcome.errors and outcome.hint else "")
        lines.append("| " + " | ".join(_cell(v) for v in (
            _name(outcome, report), f"{icons.get(outcome.status, '⚠️')} {outcome.verdict}",
            ", ".join(outcome.backends) or "-", "; ".join(outcome.providers) or "-",
            outcome.node or "-", errors or "-", _seconds(outcome.elapsed_s))) + " |")
    passed = sum(o.passed for o in report.outcomes)
    lines += ["", f"{passed} of {len(report.outcomes)} device rows passed; exit "
                  f"{report.exit_code}."]
    return "\n".join(lines) + "\n"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: FleetReport) -> str:
    """GitHub Actions workflow commands: an error per row that did not pass, a notice per
    row that did."""
    lines = []
    for outcome in report.outcomes:
        title = _property(f"attn-select {report.command} {outcome.verdict} on {outcome.device}")
        command = "notice" if outcome.passed else "error"
        message = outcome.summary or f"{outcome.verdict} ({', '.join(outcome.backends)})"
        if outcome.hint and not outcome.passed:
            message += f" (hint: {outcome.hint})"
        lines.append(f"::{command} file={_property(outcome.config)},title={title}::"
                     f"{_data(message)}")
    return "\n".join(lines) + "\n"


def render_sarif(report: FleetReport, *, version: str,
                 descriptions: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """SARIF 2.1.0: one result per row that did not pass, located in its deployment file;
    ``descriptions`` maps a code to (name, summary) for the rule metadata."""
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for outcome in report.outcomes:
        if outcome.passed:
            continue
        code = STATUS_CODES.get(outcome.status, "AS026")
        level = "error"
        if code not in index:
            name, summary = descriptions.get(code, (outcome.status, outcome.status))
            index[code] = len(rules)
            rules.append({"id": code, "name": name, "shortDescription": {"text": name},
                          "fullDescription": {"text": summary}, "help": {"text": summary},
                          "defaultConfiguration": {"level": level},
                          "properties": {"tags": ["attn-select", "vllm", "fleet", "ray"]}})
        key = "|".join((outcome.config, outcome.device, code))
        text = f"[{outcome.device}] {outcome.verdict}: {outcome.summary or outcome.status}"
        if outcome.hint:
            text += f" ({outcome.hint})"
        results.append({
            "ruleId": code, "ruleIndex": index[code], "level": level,
            "message": {"text": text},
            "partialFingerprints": {
                "attnSelectFleet/v1": hashlib.sha256(key.encode()).hexdigest()[:32]},
            "properties": {"device": outcome.device, "status": outcome.status,
                           "exit_code": outcome.exit_code, "node": outcome.node},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": artifact_uri(outcome.config), "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 1}}}],
        })
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [{
        "tool": {"driver": {"name": "attn-select", "version": version,
                            "semanticVersion": version, "rules": rules}},
        "automationDetails": {"id": f"attn-select/{report.command}-fleet/"},
        "columnKind": "unicodeCodePoints", "results": results}]}
