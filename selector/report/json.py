"""Machine output of ``check`` (versioned, documented in docs/json-output.md)."""

from __future__ import annotations

from typing import Any

from selector.report.mla import mla_json
from selector.result import SolveResult

__all__ = ["JSON_SCHEMA_VERSION", "result_to_json"]

JSON_SCHEMA_VERSION = "1.0"


def result_to_json(result: SolveResult, *, source: str | None = None,
                   device: str | None = None) -> dict[str, Any]:
    """The stable JSON document of one check."""
    runtime = None
    if result.runtime is not None:
        r = result.runtime
        runtime = {
            "kernel_block_sizes": list(r.kernel_block_sizes),
            "preferred_block_size": r.preferred_block_size,
            "block_size": r.block_size,
            "kv_layouts": list(r.kv_layouts) if r.kv_layouts else None,
            "kv_layout": r.kv_layout,
            "cudagraph_support": r.cudagraph_support,
            "cudagraph_mode_requested": r.cudagraph_mode_requested,
            "cudagraph_mode": r.cudagraph_mode,
            "cudagraph_messages": list(r.cudagraph_messages),
            "reorder_batch_threshold": r.reorder_batch_threshold,
            "update_block_table": r.update_block_table,
            "facts": {t.name: {"value": t.value, "rules": list(t.steps)} for t in r.explained_facts},
            "kv_cache": None if r.kv_cache_shape_values is None else {
                "shape": r.kv_cache_shape,
                "shape_values": r.kv_cache_shape_values,
                "layout": r.kv_cache_layout,
                "stride_order": (list(r.kv_cache_stride_order)
                                 if r.kv_cache_stride_order is not None else None),
            },
            "cascade_attention": None if r.cascade_attention is None else {
                "supported": r.cascade_attention, "note": r.cascade_attention_note,
            },
        }
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "source": source,
        "engine": result.engine,
        "device": device,
        "valid": result.valid,
        "mode": result.mode,
        "requested_backend": result.requested_backend,
        "selected": result.selected,
        "error": result.error.to_dict() if result.error else None,
        "warnings": [w.to_dict() for w in result.warnings],
        "priority": list(result.priority),
        "backends": {
            v.backend: {
                "valid": v.valid,
                "priority_index": v.priority_index,
                "selection": v.selection,
                "reasons": [d.to_dict() for d in v.reasons],
            }
            for v in result.verdicts
        },
        "runtime": runtime,
        "suggestions": [
            {"summary": s.summary, "changes": s.changes, "selected": s.selected, "flags": list(s.flags)}
            for s in result.suggestions
        ],
        "facts": result.facts,
        "derived": result.derived,
        "mla": mla_json(result),
    }
