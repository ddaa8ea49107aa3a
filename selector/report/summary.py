"""Rich renderables for ``check`` beyond one report: the fleet table (one row per
device) and the notes about a ``vllm serve`` command line."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from selector.check.records import CheckRecord, Finding
from selector.report.plain import PlainTable

__all__ = ["render_fleet", "render_notes"]

_STYLES = {"error": "red", "warning": "yellow", "note": "dim"}


def render_notes(findings: Sequence[Finding],
                 devices: Sequence[str] | None = None) -> RenderableType:
    """The notes about a command line, warnings first; ``devices``, when given, names the
    device(s) each finding holds on (one entry per finding)."""
    lines = []
    for number, finding in enumerate(findings):
        text = Text()
        label = "info" if finding.level == "note" else finding.level
        text.append(f"{label} [{finding.code}] ", style=_STYLES[finding.level])
        if devices is not None:
            text.append(f"[{devices[number]}] ")
        text.append(finding.message)
        if finding.hint:
            text.append(f" ({finding.hint})")
        lines.append(text)
    return Group(*lines)


def render_fleet(records: Sequence[CheckRecord]) -> RenderableType:
    """One row per (deployment, device): valid or not, backend, block size, CUDA graphs
    (a whole model: its distinct backends and the negotiated block size and mode)."""
    table = PlainTable(title="Fleet view")
    one_source = len({r.source for r in records}) == 1
    several = len({r.label for r in records}) > 1
    if several:
        table.add_column("deployment")
    table.add_column("device")
    table.add_column("result")
    table.add_column("backend")
    table.add_column("block size", justify="right")
    table.add_column("CUDA graphs")
    table.add_column("findings")
    for record in records:
        if record.status == "error":
            result = Text("input error", style="red")
        elif record.status == "invalid":
            result = Text("invalid", style="red")
        elif record.failed:
            result = Text("fails (--strict)", style="red")
        else:
            result = Text("valid", style="green")
        codes = ", ".join(dict.fromkeys(f.code for f in record.findings if f.level != "note"))
        row: list[str | Text] = [record.device, result, record.selected or "-",
               str(record.block_size) if record.block_size is not None else "-",
               record.cudagraph_mode or "-", codes or "-"]
        if several:
            row.insert(0, (record.group or record.label) if one_source else record.label)
        table.add_row(*row)
    return table
