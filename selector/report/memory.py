"""The memory section of a model report: vLLM's start-up budget, the KV cache it leaves,
and vLLM's own log lines for it (text, JSON and markdown)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from selector.memory import MemoryReport, StartupIssue
from selector.report.plain import PlainTable

__all__ = ["issue_json", "memory_json", "memory_markdown", "memory_table"]

_GIB = 1024**3


def _gib(value: int) -> str:
    """Every GiB figure of the memory section: vLLM's rounding (``format_gib``,
    vllm/utils/mem_utils.py:30-31: ``round(bytes / GiB, 2)``), always two decimals, so a
    figure reads the same in the table and in vLLM's words."""
    return f"{round(value / _GIB, 2):.2f}"


def _basis(basis: str) -> str:
    return {"estimate": "estimate", "vllm": "vLLM's formula", "input": "given"}[basis]


def _profile_inputs(report: MemoryReport) -> str:
    inputs = report.budget.inputs
    text = (f"max_num_batched_tokens {inputs.max_num_batched_tokens}, max_num_seqs "
            f"{inputs.max_num_seqs}, TP {inputs.tensor_parallel_size}")
    return text + ("" if inputs.cudagraphs else ", no CUDA graphs")


def memory_table(report: MemoryReport) -> PlainTable:
    """Where one GPU's memory goes; estimates are labelled as such."""
    budget = report.budget
    inputs = budget.inputs
    table = PlainTable(title="Memory per GPU at start-up (estimates are labelled)",
                       show_header=True)
    for column in ("item", "GiB", "how it is known"):
        table.add_column(column)
    util = f"{inputs.gpu_memory_utilization:g}" + (" (vLLM's default)" if inputs.utilization_default else "")
    if report.pp_stage:
        table.add_row("pipeline parallelism", "", Text(report.pp_stage))
    table.add_row("GPU memory", _gib(inputs.total_memory_bytes),
                  Text(inputs.total_memory_source))
    table.add_row(Text(f"requested = ceil(total x {util})"),
                  _gib(budget.requested_bytes), "vLLM's formula")
    table.add_row("profile run inputs", "", Text(_profile_inputs(report)))
    for line in budget.lines:
        table.add_row(Text(f"- {line.name}"), _gib(line.bytes),
                      Text(f"{_basis(line.basis)}: {line.detail}" if line.detail else _basis(line.basis)))
    if report.no_kv_cache:
        table.add_row(Text("= available for the KV cache", style="bold"), _gib(0),
                      Text(f"vLLM: {report.no_kv_cache}"))
    elif inputs.kv_cache_memory_bytes is not None:
        table.add_row("KV cache (--kv-cache-memory-bytes)",
                      _gib(inputs.kv_cache_memory_bytes), "given; skips profiling")
    else:
        table.add_row(Text("= available for the KV cache", style="bold"),
                      _gib(budget.available_kv_bytes),
                      "estimate" if budget.estimated else "vLLM's formula")
    if report.not_checked:
        table.add_row(Text("fit check", style="bold"), "", Text(f"not checked: {report.not_checked}"))
    fit = report.fit
    if fit is not None and _gib(fit.check_bytes) != _gib(fit.available_bytes):
        # vLLM's refusal names the memory less the null block: show the step between them
        held = fit.available_bytes - fit.check_bytes
        table.add_row(Text("- the null block the block pool holds back"), _gib(held),
                      f"vLLM's formula: {held:,} bytes")
        table.add_row(Text("= checked against one max_model_len request"),
                      _gib(fit.check_bytes), "vLLM's start-up check")
    if fit is not None:
        table.add_row("KV needed for one max_model_len request",
                      _gib(fit.needed_bytes), f"{fit.max_model_len:,} tokens")
    cap = report.capacity
    if cap is not None and cap.num_blocks is not None:
        table.add_row("KV blocks", str(cap.num_blocks), f"{cap.bytes_per_block:,} bytes per block")
    for logged in report.log:
        table.add_row(Text("vLLM would log", style="dim"), "", Text(logged))
    return table


def issue_json(issue: StartupIssue) -> dict[str, Any]:
    return {"code": issue.code, "name": issue.name, "message": issue.message,
            "hint": issue.hint, "field": ".".join(issue.field) or None}


def memory_json(report: MemoryReport) -> dict[str, Any]:
    """The memory section of the JSON document (docs/json-output.md)."""
    budget = report.budget
    weights = budget.weights
    cap = report.capacity
    fit = report.fit
    return {
        "engine": budget.engine,
        "pp_stage": report.pp_stage,
        "estimated": budget.estimated,
        "inputs": budget.inputs.model_dump(mode="json"),
        "requested_bytes": budget.requested_bytes,
        "reservations": [
            {"name": line.name, "bytes": line.bytes, "basis": line.basis, "detail": line.detail}
            for line in budget.lines],
        "weights": {
            "bytes_per_gpu": weights.bytes_per_gpu,
            "total_params": weights.total_params,
            "quantization": weights.quantization,
            "moe_backend": weights.moe_backend,
            "tensor_parallel_size": weights.tensor_parallel_size,
            "unknown": list(weights.unknown),
            "parts": [{"name": p.name, "params": p.params, "bits": p.bits, "bytes": p.bytes}
                      for p in weights.parts],
        },
        "available_kv_bytes": budget.available_kv_bytes,
        "kv_cache": _no_kv_cache_json(report) if fit is None else {
            "max_model_len": fit.max_model_len,
            "needed_bytes": fit.needed_bytes,
            "check_bytes": fit.check_bytes,
            "fits": fit.outcome == "ok",
            "outcome": fit.outcome,
            "estimated_max_model_len": fit.estimated_max_len or None,
            "num_blocks": cap.num_blocks if cap else None,
            "bytes_per_block": cap.bytes_per_block if cap else None,
            "tokens": cap.kv_cache_tokens if cap else None,
            "max_concurrency": cap.max_concurrency if cap else None,
        },
        "log": list(report.log),
        "not_checked": report.not_checked,
        "no_kv_cache": report.no_kv_cache,
        "error": issue_json(report.issue) if report.issue is not None else None,
    }


def _no_kv_cache_json(report: MemoryReport) -> dict[str, Any] | None:
    """The ``kv_cache`` of a model without a KV-cache spec (its pool of the null block);
    None for a report that planned nothing."""
    cap = report.capacity
    if report.no_kv_cache is None or cap is None:
        return None
    return {"max_model_len": cap.max_model_len, "needed_bytes": 0, "check_bytes": 0,
            "fits": True, "outcome": "ok", "estimated_max_model_len": None,
            "num_blocks": cap.num_blocks, "bytes_per_block": cap.bytes_per_block,
            "tokens": None, "max_concurrency": None}


def memory_markdown(report: MemoryReport) -> list[str]:
    """The memory section as markdown lines."""
    budget = report.budget
    inputs = budget.inputs
    lines = ["| Memory per GPU | GiB | How it is known |", "|---|---|---|",
             *([f"| pipeline parallelism | | {report.pp_stage} |"] if report.pp_stage else []),
             f"| GPU memory | {_gib(inputs.total_memory_bytes)} | "
             f"{inputs.total_memory_source.replace('|', '/')} |",
             f"| requested = ceil(total x {inputs.gpu_memory_utilization:g}) | "
             f"{_gib(budget.requested_bytes)} | vLLM's formula |",
             f"| profile run inputs | | {_profile_inputs(report)} |"]
    for line in budget.lines:
        how = _basis(line.basis) + (f": {line.detail}" if line.detail else "")
        lines.append(f"| - {line.name} | {_gib(line.bytes)} | {how.replace('|', '/')} |")
    how = (f"vLLM: {report.no_kv_cache}" if report.no_kv_cache
           else "estimate" if budget.estimated else "given")
    lines.append(f"| **available for the KV cache** | {_gib(budget.available_kv_bytes)} | "
                 f"{how.replace('|', '/')} |")
    if report.not_checked:
        lines.append(f"| **fit check** | | not checked: {report.not_checked} |")
    lines.append("")
    if report.log:
        lines += ["vLLM would log:", "", "```", *report.log, "```", ""]
    return lines
