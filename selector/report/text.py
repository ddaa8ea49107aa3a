"""Rich renderables for terminals (the CLI prints them)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from selector.report.mla import mla_parts
from selector.report.plain import PlainTable, plain
from selector.result import BackendVerdict, SolveResult

__all__ = [
    "reasons_table",
    "render_check",
    "render_explain",
    "reorder_threshold_text",
    "start_up_error",
    "suggestions_table",
]



def reorder_threshold_text(threshold: int | None) -> str:
    """The reorder batch threshold as every view shows it (a layer's plan, a model's)."""
    return "none (no decode-first reorder)" if threshold is None else str(threshold)


def _verdict_line(result: SolveResult, device: str, refused: bool = False) -> Text:
    text = Text()
    if result.valid and refused:  # selected, but a start-up check stops vLLM
        text.append("INVALID  ", style="bold red")
        text.append(f"{result.selected} would be selected on {device}, {result.engine}, "
                    "but vLLM refuses to start")
    elif result.valid:
        text.append("VALID  ", style="bold green")
        how = {"explicit": "pinned", "model": "the model's own"}.get(result.mode, "auto-selected")
        text.append(f"{result.selected}", style="bold")
        text.append(f" ({how}) on {device}, {result.engine}")
    else:
        text.append("INVALID  ", style="bold red")
        text.append(f"on {device}, {result.engine}")
    return text


def _why(result: SolveResult) -> list[str]:
    lines: list[str] = []
    if result.selected is None:
        return lines
    if result.mode == "explicit":
        lines.append(f"--attention-backend {result.selected} was requested and passes every check.")
        return lines
    if result.mode == "model":
        lines.append(f"The model's attention module passes {result.selected} itself: vLLM's "
                     "selector is not asked, and no backend check applies.")
        return lines
    position = result.priority.index(result.selected)
    skipped = [v for v in result.verdicts
               if v.priority_index is not None and v.priority_index < position]
    order = " > ".join(result.priority)
    lines.append(f"Priority for this configuration: {order}.")
    for v in skipped:
        lines.append(f"{v.backend} was skipped: " + "; ".join(d.message for d in v.reasons) + ".")
    lines.append(f"{result.selected} is the first valid backend in the list.")
    return lines


def reasons_table(verdicts: tuple[BackendVerdict, ...], show_all: bool,
                  title: str = "Backends") -> PlainTable:
    """One row per backend (those of the priority list unless ``show_all``): valid or
    not and vLLM's reasons with their codes."""
    table = PlainTable(title=title, show_lines=False, expand=False)
    table.add_column("#", justify="right")
    table.add_column("backend")
    table.add_column("verdict")
    table.add_column("reasons (vLLM's text) [code]")
    for v in verdicts:
        if not show_all and v.priority_index is None:
            continue
        index = "" if v.priority_index is None else str(v.priority_index + 1)
        verdict = Text("valid", style="green") if v.valid else Text("invalid", style="red")
        reasons = "\n".join(f"{d.message} [{d.code}]" for d in v.reasons) or "-"
        table.add_row(index, v.backend, verdict, reasons)
    return table


def start_up_error(result: SolveResult, prefix: str = "") -> Text:
    """vLLM's start-up error, verbatim."""
    message = result.error.message if result.error is not None else ""
    raised = message if message.startswith("ValueError: ") else f"ValueError: {message}"
    return Text(f"{prefix}vLLM would fail at start-up with:\n  {raised}", style="red")


def suggestions_table(result: SolveResult, title: str = "Suggestions (each re-checked and valid)"
                      ) -> PlainTable:
    """The suggested changes, each re-checked, and the backend each then selects."""
    table = PlainTable(title=title)
    table.add_column("change")
    table.add_column("then selects")
    for suggestion in result.suggestions:
        table.add_row(suggestion.summary, suggestion.selected)
    return table


def _runtime_table(result: SolveResult) -> PlainTable | None:
    r = result.runtime
    if r is None:
        return None
    table = PlainTable(title=f"Plan for {result.selected}", show_header=False)
    table.add_column("item")
    table.add_column("value")
    for trace in r.explained_facts:
        detail = f"{trace.value}"
        if trace.steps:
            detail += "  (" + "; ".join(trace.steps) + ")"
        else:
            detail += "  (the device default)"
        table.add_row(trace.name.replace("_", " "), detail)
    table.add_row("kernel block sizes", ", ".join(r.kernel_block_sizes) or "any")
    pinned = result.facts.get("block_size")
    block_note = "" if pinned else f" (preferred; {r.preferred_block_size} when not pinned)"
    table.add_row("block size", f"{r.block_size}{block_note}")
    layout_note = "" if r.kv_layouts else " (any accepted; vLLM's default)"
    table.add_row("KV-cache layout", r.kv_layout + layout_note)
    if r.kv_cache_shape_values is not None:
        shape = r.kv_cache_shape_values
        if r.kv_cache_shape and r.kv_cache_shape != shape:
            shape += f"  = {r.kv_cache_shape}"
        table.add_row("KV-cache tensor", shape)
        table.add_row(f"KV-cache stride order ({r.kv_cache_layout})",
                      str(r.kv_cache_stride_order) if r.kv_cache_stride_order is not None
                      else "logical order (no get_kv_cache_stride_order)")
    if r.cascade_attention is not None:
        table.add_row("cascade attention", ("possible" if r.cascade_attention else "never")
                      + (f": {r.cascade_attention_note}" if r.cascade_attention_note else ""))
    mode = r.cudagraph_mode
    if mode != r.cudagraph_mode_requested:
        mode += f" (requested {r.cudagraph_mode_requested}; downgraded)"
    table.add_row("CUDA-graph support", r.cudagraph_support)
    table.add_row("CUDA-graph mode", mode)
    table.add_row("reorder batch threshold", reorder_threshold_text(r.reorder_batch_threshold))
    for message in r.cudagraph_messages:
        table.add_row("vLLM says", message)
    return table


def _environment_table(result: SolveResult) -> PlainTable:
    table = PlainTable(title="environment (vLLM probes these at start-up; defaults assume "
                             f"{result.environment_basis})", show_header=False)
    table.add_column("fact")
    table.add_column("value")
    for name, default in result.environment_defaults.items():
        value = result.facts.get(name, default)
        note = "" if value == default else "  (overridden)"
        table.add_row(name.removeprefix("env_"), f"{value}{note}")
    return table


def render_check(result: SolveResult, *, device: str, source: str | None = None,
                 verbose: int = 0, acknowledged: frozenset[str] = frozenset(),
                 refusals: RenderableType | None = None) -> RenderableType:
    """The ``check`` report (``acknowledged``: warning codes the user ignores; shown as
    info; ``refusals``: vLLM's start-up refusals, shown under the verdict, which they make
    INVALID)."""
    parts: list[RenderableType] = []
    header = _verdict_line(result, device, refused=refusals is not None)
    parts.append(Panel(header, title=plain(source or "attn-select check"), expand=False))
    if refusals is not None:
        parts.append(refusals)
    if result.error is not None:
        parts.append(start_up_error(result))
    for warning in result.warnings:
        if warning.code in acknowledged:
            parts.append(Text(f"info [{warning.code}]: {warning.message} (acknowledged: ignore "
                              f"{warning.code})", style="dim"))
        else:
            parts.append(Text(f"warning [{warning.code}]: {warning.message}", style="yellow"))
    why = _why(result)
    if why:
        parts.append(Text("Why: " + " ".join(why)))
    parts.append(reasons_table(result.verdicts, show_all=verbose > 0))
    runtime = _runtime_table(result)
    if runtime is not None:
        parts.append(runtime)
    parts.extend(mla_parts(result, verbose))
    if result.suggestions:
        parts.append(suggestions_table(result))
    if verbose > 0:
        parts.append(_environment_table(result))
    else:
        parts.append(Text(_environment_line(result), style="dim"))
    return Group(*parts)


def _environment_line(result: SolveResult) -> str:
    """One line naming the run-time facts assumed (vLLM probes them at start-up)."""
    changed = [f"{name.removeprefix('env_')}={result.facts.get(name)}"
               for name, default in result.environment_defaults.items()
               if result.facts.get(name, default) != default]
    if changed:
        return ("environment: " + ", ".join(changed)
                + f" (the rest: {result.environment_basis}; -v lists all)")
    return (f"environment: {result.environment_basis} ({result.environment_summary}); "
            "-v lists all")


def render_explain(result: SolveResult, backend: str, checks: list[dict[str, Any]]) -> RenderableType:
    """The ``explain BACKEND`` report: every check, pass or fail, and the facts it read."""
    verdict = result.verdict(backend)
    title = Text()
    title.append(f"{backend}: ")
    title.append("valid" if verdict.valid else "invalid", style="green" if verdict.valid else "red")
    if verdict.priority_index is not None:
        title.append(f" (priority #{verdict.priority_index + 1} of {len(result.priority)})")
    else:
        title.append(" (not in this configuration's priority list: reachable only with --attention-backend)")
    if result.mode == "model":
        title.append(f"\nthis layer's module passes {result.selected} itself: no backend is "
                     "selected for it, and none of these checks runs in vLLM")
    table = PlainTable(show_lines=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("rule")
    table.add_column("facts read")
    for check in checks:
        status = Text("fail", style="red") if check["failed"] else Text("ok", style="green")
        facts = ", ".join(f"{k}={v}" for k, v in check["facts"].items())
        label = check["name"] + (f"\n{check['message']}" if check["failed"] else "")
        table.add_row(label, status, check["rule"], facts)
    return Group(Panel(title, expand=False), table)
