"""Renderers of the whole-model check: the model as groups."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from selector.check.model import ModelCheckResult
from selector.kv import format_ranges
from selector.memory.encoder import EncoderReport
from selector.report.json import JSON_SCHEMA_VERSION, result_to_json
from selector.report.memory import issue_json, memory_json, memory_table
from selector.report.plain import PlainTable, plain
from selector.report.text import (
    reasons_table,
    reorder_threshold_text,
    start_up_error,
    suggestions_table,
)

__all__ = ["model_to_json", "render_model"]

_GIB = 1024**3


def _ranges(layers: tuple[int, ...]) -> str:
    return format_ranges(list(layers))


def _failing_groups(result: ModelCheckResult) -> list[RenderableType]:
    """For each layer group that fails: vLLM's error verbatim, the reasons of every backend
    of its priority list, and the suggested fixes (each re-checked)."""
    parts: list[RenderableType] = []
    for selection in result.selections:
        r = selection.result
        if r.error is None:
            continue
        where = f"layers {_ranges(selection.layers)} ({selection.kind})"
        parts.append(start_up_error(r, prefix=f"{where}: "))
        parts.append(reasons_table(r.verdicts, show_all=False, title=f"Backends for {where}"))
        if r.suggestions:
            parts.append(suggestions_table(
                r, title=f"Suggestions for layers {_ranges(selection.layers)} (each re-checked)"))
    return parts


def render_model(result: ModelCheckResult, *, device: str, source: str | None = None,
                 valid: bool | None = None) -> RenderableType:
    """The model report: layer selections, KV-cache groups, block sizes, layout, CUDA graphs.
    ``valid`` overrides the verdict (e.g. the engine refuses the architecture). The KV
    plan's warnings and errors are not repeated here: they are the record's findings."""
    model = result.model
    ok = result.valid if valid is None else valid
    header = Text()
    header.append("VALID  " if ok else "INVALID  ", style="bold green" if ok else "bold red")
    header.append(f"{model.name} (TP {model.tp_size}, {model.num_layers} layers) "
                  f"on {device}, {result.engine}")
    parts: list[RenderableType] = [Panel(header, title=plain(source or "attn-select check"), expand=False)]
    if model.config_defaults:
        omitted = PlainTable(show_header=False,
                             title="Fields the config omits: its config class's defaults (as vLLM reads it)")
        omitted.add_column("field")
        for line in model.config_defaults:
            omitted.add_row(line)
        parts.append(omitted)
    layers = PlainTable(title="Attention layers (each selected with its own facts)")
    for column in ("layers", "kind", "heads q/kv", "head size", "window", "backend", "FA", "reasons"):
        layers.add_column(column)
    for selection in result.selections:
        r = selection.result
        facts = selection.facts
        fa = r.runtime.fact("fa_version") if r.runtime else None
        reasons = ""
        if r.error is not None:
            # a pinned backend is validated alone: its own reasons; else the priority list's
            refused = [v for v in r.verdicts if v.backend == r.requested_backend] \
                if r.requested_backend else [v for v in r.verdicts if v.priority_index is not None]
            codes = dict.fromkeys(d.code for v in refused for d in v.reasons)
            reasons = f"{r.error.code}: {r.error.name} ({', '.join(codes) or 'see below'})"
        layers.add_row(
            _ranges(selection.layers) + (" (draft)" if selection.draft else ""), selection.kind,
            f"{facts.model_num_q_heads}/{facts.model_num_kv_heads}",
            str(facts.head_size),
            "yes" if facts.has_sliding_window else "-",
            r.selected or Text("none", style="red"),
            str(fa.value) if fa else "-",
            reasons,
        )
    parts.append(layers)
    parts.extend(_failing_groups(result))
    plan = result.plan
    if plan is None:
        return Group(*parts, *_startup_parts(result))
    groups = PlainTable(title="KV-cache groups")
    for column in ("#", "layers", "spec", "backend(s)", "manager block", "kernel block",
                   "page bytes", "bytes/token", "CUDA graphs"):
        groups.add_column(column)
    for group in plan.groups:
        backends = ", ".join(sorted({a.backend.name for a in group.attention_groups})) or "-"
        kernel = "-" if group.kernel_block_size is None else str(group.kernel_block_size)
        if group.virtual_blocks_per_manager_block and group.virtual_blocks_per_manager_block > 1:
            kernel += f" (x{group.virtual_blocks_per_manager_block} per manager block)"
        groups.add_row(str(group.index), group.layers, group.kind, backends, str(group.manager_block_size),
                       kernel, ", ".join(str(p) for p in group.page_size_bytes),
                       str(group.bytes_per_token), group.cudagraph_support)
    parts.append(groups)
    summary = PlainTable(show_header=False, title="Negotiated")
    summary.add_column("item")
    summary.add_column("value")
    if plan.block_size is not None:
        summary.add_row("block size", str(plan.block_size.block_size))
        for message in plan.block_size.messages:
            summary.add_row("vLLM says", message)
    if plan.layout is not None:
        summary.add_row("KV-cache layout", str(plan.layout.layout))
    summary.add_row("reorder batch threshold", reorder_threshold_text(plan.reorder_batch_threshold))
    cg = plan.cudagraph
    if cg is not None:
        mode = str(cg.resolved)
        if cg.requested != cg.resolved:
            mode += f" (requested {cg.requested}; support {cg.min_support} from {cg.min_support_backend})"
        summary.add_row("CUDA-graph mode", mode)
        summary.add_row("decode / mixed batches", f"{cg.decode_graphs} / {cg.mixed_graphs}")
        for line in cg.cost:
            summary.add_row("", line)
    capacity = plan.capacity
    if capacity is not None:
        summary.add_row("bytes per block (all groups)", str(capacity.bytes_per_block))
        if capacity.kv_cache_tokens is not None:
            summary.add_row("KV cache tokens", f"{capacity.kv_cache_tokens:,}")
            summary.add_row("max concurrency",
                            f"{capacity.max_concurrency:.2f} x {capacity.max_model_len} tokens")
    # vLLM's warnings and errors of the plan (the CUDA-graph downgrade or refusal among them)
    # are the check's findings (AS002-AS005), printed once after the report
    parts.append(summary)
    return Group(*parts, *_startup_parts(result))


def encoder_table(encoder: EncoderReport) -> PlainTable:
    """The multimodal encoder at start-up: each encoder's attention backend, the tokens
    per item, the batched tokens after vLLM's raise and the notes (vLLM's log lines)."""
    table = PlainTable(show_header=False, title="Multimodal encoder at start-up")
    table.add_column("item")
    table.add_column("value")
    for enc in encoder.encoders:
        backend = enc.backend or f"not selected by vLLM ({enc.tower} module)"
        size = f"head size {enc.head_size}, " if enc.head_size else ""
        table.add_row(f"{enc.encoder} encoder attention",
                      f"{backend} ({size}{enc.dtype}{', explicit' if enc.explicit else ''})")
    if encoder.tokens_per_item:
        table.add_row("tokens per item", ", ".join(
            f"{modality} {count:,}" for modality, count in encoder.tokens_per_item.items()))
    if encoder.max_num_batched_tokens is not None:
        table.add_row("max_num_batched_tokens", f"{encoder.max_num_batched_tokens:,} (raised by vLLM)")
    for code, message in encoder.notices:
        table.add_row(f"note [{code}]", message)
    return table


def encoder_json(encoder: EncoderReport) -> dict[str, Any]:
    return encoder.model_dump(mode="json", exclude={"issues", "notice_code"})


def _startup_parts(result: ModelCheckResult) -> list[RenderableType]:
    """The memory budget and vLLM's start-up refusals, each in vLLM's words."""
    parts: list[RenderableType] = []
    if result.encoder is not None:
        parts.append(encoder_table(result.encoder))
    if result.memory is not None:
        parts.append(memory_table(result.memory))
    for issue in result.startup:
        line = Text()
        line.append(f"vLLM refuses to start [{issue.code}]: ", style="bold red")
        line.append(issue.message)
        if issue.hint:
            line.append(f"\n  fix: {issue.hint}", style="dim")
        parts.append(line)
    return parts


def model_to_json(result: ModelCheckResult, *, source: str | None = None,
                  device: str | None = None) -> dict[str, Any]:
    """The same as a JSON document (``schema_version`` shared with ``check``)."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "source": source,
        "device": device,
        "engine": result.engine,
        "valid": result.valid,
        "model": {"name": result.model.name, "tp_size": result.model.tp_size,
                  "num_layers": result.model.num_layers, "architecture": result.model.architecture,
                  **({"config_defaults": list(result.model.config_defaults)}
                     if result.model.config_defaults else {})},
        "layers": [
            {"layers": list(s.layers), "ranges": _ranges(s.layers), "kind": s.kind,
             **({"draft": True} if s.draft else {}),
             "check": result_to_json(s.result, device=device)}
            for s in result.selections
        ],
        "plan": result.plan.model_dump(mode="json") if result.plan is not None else None,
        "memory": memory_json(result.memory) if result.memory is not None else None,
        "startup_errors": [issue_json(issue) for issue in result.startup],
        "encoder": encoder_json(result.encoder) if result.encoder is not None else None,
        **({"draft": result.draft.model_dump(mode="json", exclude={"issues"})}
           if result.draft is not None else {}),
    }
