"""Renderers of ``attn-select diff``: a :class:`DeploymentDiff` or a
:class:`MatrixDiff` in, a rich renderable or a JSON document out; no decisions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from selector.compare.diff import DeploymentDiff, MatrixDiff, ModelDiff
from selector.report.plain import PlainTable, plain

__all__ = [
    "DIFF_JSON_SCHEMA_VERSION",
    "deployment_diff_to_json",
    "matrix_diff_to_json",
    "model_diff_to_json",
    "render_deployment_diff",
    "render_matrix_diff",
    "render_model_diff",
]

DIFF_JSON_SCHEMA_VERSION = "1.0"
_ERROR_WIDTH = 60


def _value(field: str, value: Any, aliases: Mapping[str, str] | None = None) -> str:
    if value is None:
        return "none" if field == "selected" else "-"
    if isinstance(value, bool):
        return {"valid": "valid" if value else "INVALID"}.get(
            field, "possible" if value else "never")
    if field == "kv_layout" and aliases and value in aliases:
        return f"{value} (= {aliases[value]})"
    if field == "error" and len(str(value)) > _ERROR_WIDTH:
        return str(value)[: _ERROR_WIDTH - 1] + "…"
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def _headline(d: DeploymentDiff, device: str) -> Text:
    before, after = d.field("selected"), d.field("valid")
    text = Text()
    if d.verdict_changed:
        text.append("CHANGED  ", style="bold yellow")
    elif after.before is False and after.after is False:
        text.append("STILL INVALID  ", style="bold red")
    elif d.changed:
        text.append("SAME BACKEND  ", style="bold green")
    else:
        text.append("UNCHANGED  ", style="bold green")
    if not (after.before is False and after.after is False):
        text.append(f"{_value('selected', before.before)} -> {_value('selected', before.after)}",
                    style="bold")
    if after.changed:
        text.append(f" ({_value('valid', after.before)} -> {_value('valid', after.after)})")
    text.append(f" on {device}: {d.from_engine} -> {d.to_engine}")
    return text


def render_deployment_diff(d: DeploymentDiff, *, device: str,
                           verbose: bool = False) -> RenderableType:
    """What changes for one deployment: the verdict, its runtime consequences and the
    backends whose state or reasons changed (every backend with ``verbose``)."""
    parts: list[RenderableType] = [Panel(_headline(d, device), title=plain(d.source or "attn-select diff"),
                                         expand=False)]
    table = PlainTable(title="Verdict", show_lines=False)
    table.add_column("")
    table.add_column("item")
    table.add_column(d.from_engine)
    table.add_column(d.to_engine)
    for change in d.fields:
        if not verbose and change.before == change.after and change.field in ("warnings", "error"):
            continue
        shown_before = _value(change.field, change.before, d.layout_aliases)
        shown_after = _value(change.field, change.after, d.layout_aliases)
        if not change.changed and shown_before != shown_after:  # equal, spelled differently
            shown_after = ("not reported" if change.after is None else
                           f"same ({shown_after})")
        table.add_row("*" if change.changed else "", change.label, shown_before, shown_after)
    parts.append(table)
    if d.priority_before != d.priority_after:
        prio = PlainTable(title="Priority list", show_header=True)
        prio.add_column(d.from_engine)
        prio.add_column(d.to_engine)
        prio.add_row(" > ".join(d.priority_before) or "-", " > ".join(d.priority_after) or "-")
        parts.append(prio)
    rows = [b for b in d.backends if verbose or (b.changed and b.relevant)]
    if rows:
        title = "Backends" if verbose else "Backends that changed (in either priority list or pinned)"
        backends = PlainTable(title=title)
        backends.add_column("backend")
        backends.add_column(d.from_engine)
        backends.add_column(d.to_engine)
        backends.add_column("reasons gained (+) / lost (-) [code]")
        for b in rows:
            if "absent" in (b.before, b.after):
                reasons = ["(not registered in " + (d.from_engine if b.before == "absent"
                                                     else d.to_engine) + ")"]
            else:
                reasons = ([f"+ {m} [{c}]" for c, m in b.gained]
                           + [f"- {m} [{c}]" for c, m in b.lost])
            backends.add_row(b.backend, b.before, b.after, "\n".join(reasons) or "-")
        parts.append(backends)
    else:
        parts.append(Text("No backend in the priority lists changed its verdict or reasons."))
    return Group(*parts)


def _model_headline(d: ModelDiff, device: str) -> Text:
    text = Text()
    if d.verdict_changed:
        text.append("CHANGED  ", style="bold yellow")
    elif d.status_before != "valid" and d.status_after != "valid":
        text.append("STILL INVALID  ", style="bold red")
    elif d.changed:
        text.append("SAME BACKENDS  ", style="bold green")
    else:
        text.append("UNCHANGED  ", style="bold green")
    text.append(f"check: {d.status_before} -> {d.status_after}" if
                d.status_before != d.status_after else f"check: {d.status_after}", style="bold")
    text.append(f" on {device}: {d.from_engine} -> {d.to_engine}")
    return text


def render_model_diff(d: ModelDiff, *, device: str, verbose: bool = False) -> RenderableType:
    """What changes for a model deployment or a command line: check's verdict and errors
    under each version, then each layer group's selection (as for a single layer)."""
    parts: list[RenderableType] = [Panel(_model_headline(d, device),
                                         title=plain(d.source or "attn-select diff"), expand=False)]
    if d.gained or d.lost or verbose:
        errors = PlainTable(title="check's errors")
        errors.add_column("")
        errors.add_column("error")
        for line in d.lost:
            errors.add_row("-", line)
        for line in d.gained:
            errors.add_row("+", line)
        for line in d.errors_after:
            if verbose and line not in d.gained:
                errors.add_row("=", line)
        parts.append(errors)
    elif d.errors_after:
        parts.append(Text("The same errors under both versions: " + "; ".join(d.errors_after)))
    if not d.layers:
        parts.append(Text("No layer group was selected under both versions (a refusal before "
                          "selection, or the layers differ)."))
    for layer in d.layers:
        if verbose or layer.diff.changed:
            parts.append(render_deployment_diff(layer.diff, device=device, verbose=verbose))
    unchanged = [layer for layer in d.layers if not layer.diff.changed]
    if unchanged and not verbose:
        parts.append(Text("Unchanged layer groups: " + ", ".join(
            f"{layer.layers} ({layer.kind}: {layer.diff.field('selected').after or 'none'})"
            for layer in unchanged)))
    return Group(*parts)


def model_diff_to_json(d: ModelDiff, *, device: str | None = None) -> dict[str, Any]:
    """The stable JSON document of a model (or command line) diff."""
    return {"schema_version": DIFF_JSON_SCHEMA_VERSION, "kind": "model", "device": device,
            **d.to_dict()}


def deployment_diff_to_json(d: DeploymentDiff, *, device: str | None = None) -> dict[str, Any]:
    """The stable JSON document of one deployment diff."""
    return {"schema_version": DIFF_JSON_SCHEMA_VERSION, "kind": "deployment", "device": device,
            **d.to_dict()}


def _short(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_matrix_diff(m: MatrixDiff, *, verbose: bool = False) -> RenderableType:
    """The support matrix summary: selection transitions, per-backend counts and
    the reasons (by code) backends gained or lost."""
    header = Text()
    header.append(f"{m.from_engine} -> {m.to_engine}: ", style="bold")
    header.append(f"{m.configs} representative configs; the selected backend changes for "
                  f"{m.verdicts_changed} (valid <-> invalid for {m.validity_changed}); "
                  f"the FlashAttention version changes for {m.fa_version_changed}.")
    parts: list[RenderableType] = [Panel(header, title="attn-select diff --all", expand=False)]
    if m.transitions:
        table = PlainTable(title="Selection changes")
        table.add_column(m.from_engine)
        table.add_column(m.to_engine)
        table.add_column("configs", justify="right")
        table.add_column("e.g.")
        for t in m.transitions:
            table.add_row(t.before or "none (invalid)", t.after or "none (invalid)", str(t.count),
                          "\n".join(t.examples))
        parts.append(table)
    rows = [b for b in m.backends if verbose or b.changed]
    counts = PlainTable(title="Per backend (configs where it is in the priority list)")
    for column in ("backend", "presence", "newly valid", "newly invalid", "now selected",
                   "no longer selected"):
        counts.add_column(column, justify="left" if column in ("backend", "presence") else "right")
    for b in rows:
        counts.add_row(b.backend, b.presence, str(b.newly_valid), str(b.newly_invalid),
                       str(b.now_selected), str(b.no_longer_selected))
    parts.append(counts)
    reasons = PlainTable(title="Reasons gained (+) / lost (-), by code, most frequent first")
    reasons.add_column("backend")
    reasons.add_column("")
    reasons.add_column("code")
    reasons.add_column("e.g.")
    reasons.add_column("configs", justify="right")
    for b in rows:
        for sign, items in (("+", b.reasons_gained), ("-", b.reasons_lost)):
            for code, message, count in items:
                reasons.add_row(b.backend, sign, code, _short(message), str(count))
    if reasons.row_count:
        parts.append(reasons)
    return Group(*parts)


def matrix_diff_to_json(m: MatrixDiff) -> dict[str, Any]:
    """The stable JSON document of a support-matrix diff."""
    return {"schema_version": DIFF_JSON_SCHEMA_VERSION, "kind": "matrix", **m.to_dict()}
