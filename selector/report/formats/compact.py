"""``check --format compact``: one line per checked deployment and device, for hooks and
logs (the pre-commit hook's format): the file, the verdict, the backend and every
finding's code and line.

    serving.attn.yaml: INVALID on L40S (vllm==0.33.0): error SE002 line 4, warning AS002 line 4
    attn-select/llama.yaml: VALID FLASH_ATTN on H100 (vllm==0.33.0)

A file that cannot be read gets its line too, with the message (``ERROR``): the CLI then
writes no second copy of it to stderr.  ``attn-select check FILE`` prints the whole
report of one file; ``attn-select list codes`` says what each code means.
"""

from __future__ import annotations

from typing import Any

from selector.check.records import CheckRecord, CheckReport, Finding

__all__ = ["REPORTS_INPUT_ERRORS", "SUMMARY", "compact_line", "render"]

SUMMARY = ("One line per deployment and device: verdict, backend and each finding's code "
           "and line (for hooks and logs).")
"""One line for the docs (:mod:`selector.report.formats`)."""
REPORTS_INPUT_ERRORS = True
"""A file that cannot be read is reported on its own line (not again on stderr)."""


def _verdict(record: CheckRecord) -> str:
    if record.status == "error":
        return "ERROR"
    if record.status == "invalid":
        return "INVALID"
    if record.failed:
        return "FAILS (--strict)"
    return "VALID"


def _finding(finding: Finding, *, located: bool) -> str:
    label = "info" if finding.level == "note" else finding.level
    where = f" line {finding.line}" if finding.line and located else ""
    said = f": {' '.join(finding.message.split())}" if finding.level == "error" else ""
    return f"{label} {finding.code}{where}{said}"


def compact_line(record: CheckRecord, *, command: Any = None) -> str:
    """The one line of a record."""
    source = f"vllm serve {command.model}" if command is not None else record.label
    if record.status == "error":
        error = record.findings[0] if record.findings else None
        where = f":{error.line}" if error is not None and error.line else ""
        message = f" {error.code} {error.message}" if error is not None else ""
        hint = f" ({error.hint})" if error is not None and error.hint else ""
        return f"{source}{where}: ERROR{message}{hint}"
    head = f"{source}: {_verdict(record)}"
    if record.status == "valid" and record.selected:
        head += f" {record.selected}"
    head += f" on {record.device}" + (f" ({record.engine})" if record.engine else "")
    findings = [_finding(f, located=record.artifact is not None)
                for f in record.findings if f.level != "note"]
    return head + (": " + "; ".join(dict.fromkeys(findings)) if findings else "")


def render(report: CheckReport, console: Any = None) -> str:
    """The ``--format compact`` reporter (:mod:`selector.report.formats`)."""
    lines = [compact_line(record, command=report.command) for record in report.records]
    return "".join(line + "\n" for line in lines)
