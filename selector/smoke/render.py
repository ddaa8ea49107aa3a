"""Rich renderables for a smoke report (no printing here: the CLI prints them)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from selector.report.plain import PlainTable
from selector.smoke.report import GroupReport, SmokeReport

__all__ = ["render_report"]


def _number(value: float | None, digits: int = 2, scientific: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}e}" if scientific else f"{value:.{digits}f}"


def _plan_line(group: GroupReport) -> Text:
    plan = group.plan
    parts = [plan.backend + (f" FA{plan.fa_version}" if plan.fa_version else ""),
             f"page {plan.kernel_block_size}", plan.kv_layout, f"graph {plan.cudagraph_mode}"]
    if plan.sliding_window:
        parts.append(f"window {plan.sliding_window}")
    if plan.logits_soft_cap:
        parts.append(f"soft-cap {plan.logits_soft_cap:g}")
    verdict = {"PASS": Text(" PASS ", style="bold black on green"),
               "SUBSTITUTED": Text(" SUBSTITUTED ", style="bold black on yellow"),
               }.get(group.status, Text(" FAIL ", style="bold white on red"))
    line = Text.assemble(verdict, " ", (plan.name, "bold"), f"  {' | '.join(parts)}")
    line.append(f"\n  ran: {group.implementation}", style="cyan")
    for other in group.cross_checks:
        line.append(f"\n  also ran: {other} (same layers and data)", style="cyan")
    if group.substitution:
        line.append(f"\n  substituted: {group.substitution}", style="bold yellow")
    line.append(f"\n  batch: {group.shapes}", style="dim")
    for note in group.notes:
        line.append(f"\n  note: {note}", style="yellow")
    return line


def _checks_table(group: GroupReport) -> PlainTable:
    table = PlainTable(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("max abs", justify="right")
    table.add_column("max rel", justify="right")
    table.add_column("detail", overflow="fold")
    for check in group.checks:
        result = Text("ok", style="green") if check.passed else Text("FAILED", style="bold red")
        table.add_row(check.name, result, _number(check.max_abs, 2, True),
                      _number(check.max_rel, 2, True), check.detail)
    return table


def _timings_table(group: GroupReport) -> PlainTable:
    table = PlainTable(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("kernel time (CUDA events)")
    table.add_column("median us", justify="right")
    table.add_column("min us", justify="right")
    table.add_column("KV read TB/s", justify="right")
    table.add_column("TFLOP/s", justify="right")
    for timing in group.timings:
        table.add_row(f"{timing.name} x{timing.repeats}", _number(timing.median_us, 1),
                      _number(timing.min_us, 1), _number(timing.kv_read_tbps),
                      _number(timing.tflops, 1))
    return table


def _stages_table(report: SmokeReport) -> PlainTable:
    table = PlainTable(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("time to verdict")
    table.add_column("s", justify="right")
    for stage, seconds in report.stages:
        table.add_row(stage, f"{seconds:.1f}")
    return table


def render_report(report: SmokeReport) -> RenderableType:
    """The report as rich renderables: a header, then each group's checks and timings."""
    software = ", ".join(f"{name} {version}" for name, version in report.software.items())
    verdict = {"PASS": "PASSED", "FAIL": "FAILED"}.get(report.status, report.status)
    style = {"PASS": "bold green", "FAIL": "bold red"}.get(report.status, "bold yellow")
    header = Text.assemble(("attn-select smoke ", "bold"), (verdict, style),
                           f" on {report.device} in {report.elapsed_s:.1f} s\n{software}")
    parts: list[RenderableType] = [header]
    for group in report.groups:
        parts.append(Text(""))
        parts.append(_plan_line(group))
        parts.append(_checks_table(group))
        if group.timings:
            parts.append(_timings_table(group))
    if report.stages:
        parts.extend([Text(""), _stages_table(report)])
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)
