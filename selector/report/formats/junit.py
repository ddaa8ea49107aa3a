"""JUnit XML (the Jenkins/Ant shape CI systems read): one test case per checked
deployment and device; failures carry the findings, input errors are errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.etree import ElementTree as ET

from selector.check.records import CheckRecord, CheckReport, Finding

__all__ = ["SUMMARY", "render", "render_junit"]

SUMMARY = "JUnit XML: one test case per deployment and device."
"""One line for the docs (:mod:`selector.report.formats`)."""


def _finding_text(finding: Finding) -> str:
    where = f"line {finding.line}: " if finding.line else ""
    text = f"{where}[{finding.code} {finding.name}] {finding.message}"
    if finding.hint:
        text += f"\n  hint: {finding.hint}"
    return text


def _summary(record: CheckRecord) -> str:
    if record.status == "error":
        return "input error"
    if record.status == "valid":
        text = f"VALID {record.selected}"
        if record.result is not None:
            how = {"explicit": "pinned", "model": "the model's own"}.get(record.result.mode, "auto")
            text += f" ({how})"
        text += f" on {record.device}, {record.engine}"
        if record.block_size is not None:
            text += f"; block size {record.block_size}; CUDA graphs {record.cudagraph_mode}"
        return text
    return f"INVALID on {record.device}, {record.engine}"


def render_junit(records: Sequence[CheckRecord]) -> str:
    """The JUnit XML document (deterministic: no timestamps, times are 0)."""
    failures = sum(1 for r in records if r.failed and r.status != "error")
    errors = sum(1 for r in records if r.status == "error")
    counts = {"tests": str(len(records)), "failures": str(failures), "errors": str(errors),
              "skipped": "0", "time": "0"}
    root = ET.Element("testsuites", {"name": "attn-select", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "attn-select check", **counts})
    for record in records:
        attributes = {
            "name": f"{record.label} @ {record.device}" if record.device != "-" else record.label,
            "classname": "attn-select.check." + (record.device.replace(" ", "_")
                                                 if record.device != "-" else "input"),
            "time": "0",
        }
        if record.artifact:
            attributes["file"] = record.artifact
        case = ET.SubElement(suite, "testcase", attributes)
        problems = [f for f in record.findings if f.level == "error"]
        if record.status == "error":
            first = problems[0] if problems else None
            element = ET.SubElement(case, "error", {
                "message": first.message if first else "input error",
                "type": first.code if first else "AS001"})
            element.text = "\n".join(_finding_text(f) for f in problems)
        elif record.failed:
            first = problems[0] if problems else None
            element = ET.SubElement(case, "failure", {
                "message": first.message if first else "check failed",
                "type": first.code if first else "invalid"})
            element.text = "\n".join(_finding_text(f) for f in problems)
        others = [f for f in record.findings if f.level != "error"]
        out = ET.SubElement(case, "system-out")
        out.text = "\n".join([_summary(record)] + [_finding_text(f) for f in others])
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def render(report: CheckReport, console: Any = None) -> str:
    """The ``--format junit`` reporter (:mod:`selector.report.formats`)."""
    return render_junit(report.records)
