"""Markdown for PR comments, job summaries and docs: a summary table, then one
section per checked deployment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from selector.check.records import CheckRecord, CheckReport, Finding
from selector.kv import format_ranges
from selector.report.memory import memory_markdown

__all__ = ["SUMMARY", "render", "render_markdown"]

SUMMARY = "A markdown summary (for a pull-request comment or a job summary)."
"""One line for the docs (:mod:`selector.report.formats`)."""

_ICONS = {"error": "❌", "warning": "⚠️", "note": "ℹ️"}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def _verdict(record: CheckRecord) -> str:
    if record.status == "error":
        return "❌ input error"
    if record.status == "invalid":
        return "❌ invalid"
    if record.failed:
        return "❌ valid, warnings (--strict)"
    if record.warnings:
        return "⚠️ valid, warnings"
    return "✅ valid"


def _backend(record: CheckRecord) -> str:
    if record.selected is None:
        return "-"
    result = record.result
    if result is None:
        return record.selected
    how = {"explicit": "pinned", "model": "the model's own"}.get(result.mode, "auto")
    return f"{record.selected} ({how})"


def _model_lines(record: CheckRecord) -> list[str]:
    model = record.model
    lines = [f"**{'VALID' if record.status == 'valid' else 'INVALID'}**: {model.model.name} "
             f"(TP {model.model.tp_size}, {model.model.num_layers} layers), {model.engine}.", "",
             "| Layers | Kind | Backend | Reasons |", "|---|---|---|---|"]
    for selection in model.selections:
        r = selection.result
        reasons = r.error.message if r.error is not None else "-"
        lines.append(f"| {format_ranges(list(selection.layers))} | {selection.kind} | "
                     f"{r.selected or 'none'} | {_cell(reasons)} |")
    lines.append("")
    plan = model.plan
    if plan is not None:
        layout = plan.layout.layout if plan.layout is not None else "-"
        lines += [f"KV cache: {len(plan.groups)} group(s), block size {record.block_size or '-'}, "
                  f"layout {layout}, CUDA-graph mode {record.cudagraph_mode or '-'}.", ""]
    if model.memory is not None:
        lines += memory_markdown(model.memory)
    return lines


def _finding_line(finding: Finding) -> str:
    where = f" (line {finding.line})" if finding.line else ""
    text = f"- {_ICONS[finding.level]} **{finding.code}** `{finding.name}`{where}: {finding.message}"
    if finding.hint:
        text += f"  \n  _{finding.hint}_"
    return text


def _section(record: CheckRecord) -> list[str]:
    title = f"### `{record.label}` on {record.device}"
    lines = [title, ""]
    result = record.result
    if record.model is not None:
        lines += _model_lines(record)
    if result is not None:
        if result.valid:
            how = {"explicit": "pinned", "model": "the model's own"}.get(result.mode, "auto-selected")
            lines.append(f"**VALID**: `{result.selected}` ({how}), {result.engine}.")
        else:
            lines.append(f"**INVALID** on {record.device}, {result.engine}.")
        lines.append("")
        if result.priority:
            lines.append("Priority for this configuration: "
                         + " > ".join(f"`{name}`" for name in result.priority) + ".")
            lines.append("")
    if record.findings:
        lines.extend(_finding_line(f) for f in record.findings)
        lines.append("")
    if result is not None and result.priority:
        lines.extend(["| # | Backend | Verdict | Reasons (vLLM's text) |", "|---|---|---|---|"])
        for verdict in result.verdicts:
            if verdict.priority_index is None:
                continue
            reasons = "; ".join(f"{d.message} [{d.code}]" for d in verdict.reasons) or "-"
            lines.append(f"| {verdict.priority_index + 1} | `{verdict.backend}` | "
                         f"{'valid' if verdict.valid else 'invalid'} | {_cell(reasons)} |")
        lines.append("")
    if result is not None and result.runtime is not None:
        r = result.runtime
        lines.extend([
            f"Plan for `{result.selected}`: block size {r.block_size} (kernel block sizes "
            f"{', '.join(r.kernel_block_sizes) or 'any'}), KV-cache layout {r.kv_layout}, "
            f"CUDA-graph support {r.cudagraph_support}, CUDA-graph mode {r.cudagraph_mode}.",
            "",
        ])
    if result is not None and result.suggestions:
        lines.append("Suggestions (each re-checked and valid):")
        lines.extend(f"- {s.summary} → selects `{s.selected}`" for s in result.suggestions)
        lines.append("")
    return lines


def render_markdown(records: Sequence[CheckRecord]) -> str:
    """The markdown report of a ``check`` run."""
    failed = sum(1 for r in records if r.failed)
    lines = [
        "## attn-select check",
        "",
        f"{len(records)} checked, {failed} failed.",
        "",
        "| Deployment | Device | Result | Backend | Block size | CUDA graphs |",
        "|---|---|---|---|---|---|",
    ]
    for record in records:
        lines.append(
            f"| `{_cell(record.label)}` | {_cell(record.device)} | {_verdict(record)} | "
            f"{_cell(_backend(record))} | {record.block_size or '-'} | "
            f"{record.cudagraph_mode or '-'} |")
    lines.append("")
    for record in records:
        lines.extend(_section(record))
    return "\n".join(lines).rstrip("\n") + "\n"


def render(report: CheckReport, console: Any = None) -> str:
    """The ``--format markdown`` reporter (:mod:`selector.report.formats`)."""
    return render_markdown(report.records)
