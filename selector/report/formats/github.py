"""GitHub Actions workflow commands: ``::error file=...,line=...::message`` per finding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from selector.check.records import CheckRecord, CheckReport

__all__ = ["SUMMARY", "render", "render_github"]

SUMMARY = "GitHub Actions workflow commands (::error / ::warning annotations)."
"""One line for the docs (:mod:`selector.report.formats`)."""

_COMMANDS = {"error": "error", "warning": "warning", "note": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(records: Sequence[CheckRecord], *, command_file: str | None = None,
                  command_line: int | None = None) -> str:
    """One workflow command per finding, then a one-line summary per record; a finding
    about a command line points at ``command_file`` (its ``command_line``) when given."""
    lines: list[str] = []
    for record in records:
        for finding in record.findings:
            properties = []
            file, line = ((record.artifact, finding.line) if record.artifact
                          else (command_file, command_line))
            if file:
                properties.append(f"file={_property(file)}")
                if line:
                    properties.append(f"line={line}")
            where = record.device + (f", {record.group}" if record.group else "")
            properties.append(f"title={_property(f'attn-select {finding.code} ({where})')}")
            message = finding.message + (f" ({finding.hint})" if finding.hint else "")
            lines.append(f"::{_COMMANDS[finding.level]} {','.join(properties)}::{_data(message)}")
    for record in records:
        if record.status == "error":
            verdict = "ERROR"
        elif record.failed:
            verdict = "FAIL"
        else:
            verdict = "ok"
        detail = ""
        if record.status == "valid":
            detail = f" {record.selected}, block size {record.block_size}, " \
                     f"CUDA graphs {record.cudagraph_mode}"
        lines.append(f"attn-select: {verdict} {record.label} on {record.device}{detail}")
    return "\n".join(lines) + "\n"


def render(report: CheckReport, console: Any = None) -> str:
    """The ``--format github`` reporter (:mod:`selector.report.formats`)."""
    return render_github(report.records, command_file=report.command_file,
                         command_line=report.command_line)
