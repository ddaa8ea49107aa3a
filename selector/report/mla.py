"""The MLA part of the ``check`` report: the model dimensions the rules read, the
package probes the MLA backends depend on, and vLLM's separate MLA prefill-backend
selection.  Shown for MLA layers only (text without ``-v``; JSON under ``"mla"``)."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from selector.report.plain import PlainTable
from selector.result import MLAPrefillResult, SolveResult

__all__ = ["mla_json", "mla_parts"]

_DIMENSIONS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "index_topk")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "-" if value is None else str(value)


def _heads(facts: dict[str, Any]) -> tuple[int | None, int]:
    per_rank = facts.get("num_heads") or facts.get("model_num_q_heads")
    return (int(per_rank) if per_rank is not None else None), int(facts.get("tp_size") or 1)


def _dimensions_table(result: SolveResult) -> PlainTable:
    facts = result.facts
    table = PlainTable(title="MLA dimensions (what the MLA rules read)", show_header=False)
    table.add_column("item")
    table.add_column("value")
    for name in _DIMENSIONS:
        note = ""
        if name == "index_topk":
            note = "  (sparse MLA: top-k indexer)" if facts.get("use_sparse") else "  (dense MLA)"
        table.add_row(name, _value(facts.get(name)) + note)
    lora, rope = facts.get("kv_lora_rank"), facts.get("qk_rope_head_dim")
    head = _value(facts.get("head_size"))
    if lora is not None and rope is not None:
        head += f"  (kv_lora_rank {lora} + qk_rope_head_dim {rope})"
    table.add_row("MLA head size", head)
    per_rank, tp = _heads(facts)
    if per_rank is not None:
        table.add_row("q heads per rank", f"{per_rank}  ({per_rank * tp} heads / tensor parallel {tp})")
    table.add_row("context parallel", f"DCP {_value(facts.get('dcp_size') or 1)}, "
                  f"PCP {_value(facts.get('pcp_size') or 1)}, "
                  f"cp_kv_cache_interleave_size {_value(facts.get('cp_kv_cache_interleave_size') or 1)}")
    return table


def _packages_table(result: SolveResult, names: tuple[str, ...]) -> PlainTable:
    table = PlainTable(title="MLA packages (probed at start-up; defaults: "
                             f"{result.environment_basis})", show_header=False)
    table.add_column("fact")
    table.add_column("value")
    for name in names:
        default = result.environment_defaults.get(name)
        value = result.facts.get(name, default)
        note = "  (default)" if value == default else f"  (overridden; default {_value(default)})"
        table.add_row(name.removeprefix("env_"), _value(value) + note)
    return table


def _prefill_table(prefill: MLAPrefillResult, show_all: bool) -> PlainTable:
    how = f"pinned {prefill.requested}" if prefill.requested else "auto"
    table = PlainTable(title=f"MLA prefill backend ({how})")
    table.add_column("#", justify="right")
    table.add_column("backend")
    table.add_column("verdict")
    table.add_column("reasons (vLLM's text) [code]")
    for v in prefill.verdicts:
        if not show_all and v.priority_index is None and v.backend != prefill.requested:
            continue
        index = "" if v.priority_index is None else str(v.priority_index + 1)
        verdict = Text("valid", style="green") if v.valid else Text("invalid", style="red")
        reasons = "\n".join(f"{d.message} [{d.code}]" for d in v.reasons) or "-"
        table.add_row(index, v.backend, verdict, reasons)
    return table


def _prefill_line(result: SolveResult, prefill: MLAPrefillResult) -> Text:
    if prefill.consulted is None:
        return Text("MLA prefill: not reached (the attention-backend selection fails first); "
                    "the table shows what vLLM would answer next.", style="dim")
    if not prefill.consulted:
        return Text(f"MLA prefill: not consulted: {result.selected} has no dense-MHA prefill path for "
                    "this layer, so prefill runs the sparse top-k path.")
    if prefill.selected is not None:
        how = "pinned" if prefill.requested else "first valid of " + " > ".join(prefill.priority)
        return Text(f"MLA prefill: {prefill.selected} ({how}) for {prefill.config}.")
    if prefill.fatal and prefill.requested:
        return Text(f"MLA prefill: the pinned {prefill.requested} fails for {prefill.config}; vLLM fails "
                    "while building the MLA layers (the error above).", style="red")
    if prefill.fatal:
        return Text(f"MLA prefill: no backend for {prefill.config}; vLLM fails while building the MLA "
                    "layers (the error above).", style="red")
    return Text(f"MLA prefill: no backend for {prefill.config}; the sparse layer falls back to its "
                "top-k path (the warning above).", style="yellow")


def mla_parts(result: SolveResult, verbose: int = 0) -> list[RenderableType]:
    """Renderables for an MLA layer (empty for other layers)."""
    if not result.facts.get("use_mla"):
        return []
    parts: list[RenderableType] = [_dimensions_table(result)]
    prefill = result.mla_prefill
    if prefill is not None:
        if prefill.environment:
            parts.append(_packages_table(result, prefill.environment))
        parts.append(_prefill_table(prefill, show_all=verbose > 0))
        parts.append(_prefill_line(result, prefill))
    return parts


def _prefill_json(prefill: MLAPrefillResult) -> dict[str, Any]:
    return {
        "mode": prefill.mode,
        "requested": prefill.requested,
        "config": prefill.config,
        "dimensions": list(prefill.dimensions),
        "priority": list(prefill.priority),
        "selected": prefill.selected,
        "error": prefill.error.to_dict() if prefill.error else None,
        "warning": prefill.warning.to_dict() if prefill.warning else None,
        "consulted": prefill.consulted,
        "fatal": prefill.fatal,
        "backends": {
            v.backend: {"valid": v.valid, "priority_index": v.priority_index, "raises": v.raises,
                        "reasons": [d.to_dict() for d in v.reasons]}
            for v in prefill.verdicts
        },
    }


def mla_json(result: SolveResult) -> dict[str, Any] | None:
    """The ``"mla"`` object of the JSON report (None for other layers)."""
    facts = result.facts
    if not facts.get("use_mla"):
        return None
    per_rank, tp = _heads(facts)
    prefill = result.mla_prefill
    environment = prefill.environment if prefill is not None else ()
    return {
        "dimensions": {name: facts.get(name) for name in _DIMENSIONS},
        "head_size": facts.get("head_size"),
        "sparse": bool(facts.get("use_sparse")),
        "q_heads_per_rank": per_rank,
        "tensor_parallel_size": tp,
        "dcp_size": facts.get("dcp_size") or 1,
        "pcp_size": facts.get("pcp_size") or 1,
        "cp_kv_cache_interleave_size": facts.get("cp_kv_cache_interleave_size") or 1,
        "environment": {name: {"value": facts.get(name, result.environment_defaults.get(name)),
                               "default": result.environment_defaults.get(name)}
                        for name in environment},
        "prefill": _prefill_json(prefill) if prefill is not None else None,
    }
