"""vLLM's start-up: the memory budget that sizes the KV cache (weights from the model's
shapes and quantization, the reservations vLLM makes, the KV memory left) and the other
checks that decide whether ``vllm serve`` starts, each with vLLM's own words."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

if TYPE_CHECKING:
    from selector.memory.budget import BudgetInputs, MemoryBudget, MemoryLine, memory_budget
    from selector.memory.fit import KVFit, format_gib, kv_fit
    from selector.memory.issues import StartupIssue, dcp_issue, dtype_issue, kv_heads_issue
    from selector.memory.profile import StartupProfile, startup_profile
    from selector.memory.startup import (
        MemoryReport,
        auto_fit_length,
        captured_graph_count,
        default_max_model_len,
        derived_max_model_len,
        device_total_memory,
        max_model_len_issue,
        memory_report,
        plan_budget,
        raw_config,
        tensor_parallel_issue,
    )
    from selector.memory.weights import WeightEstimate, WeightPart, estimate_weights

__all__ = [
    "BudgetInputs",
    "KVFit",
    "MemoryBudget",
    "MemoryLine",
    "MemoryReport",
    "StartupIssue",
    "StartupProfile",
    "WeightEstimate",
    "WeightPart",
    "auto_fit_length",
    "captured_graph_count",
    "dcp_issue",
    "default_max_model_len",
    "derived_max_model_len",
    "device_total_memory",
    "dtype_issue",
    "estimate_weights",
    "format_gib",
    "kv_fit",
    "kv_heads_issue",
    "max_model_len_issue",
    "memory_budget",
    "memory_report",
    "plan_budget",
    "raw_config",
    "startup_profile",
    "tensor_parallel_issue",
]

_LAZY = {
    "BudgetInputs": "selector.memory.budget",
    "MemoryBudget": "selector.memory.budget",
    "MemoryLine": "selector.memory.budget",
    "memory_budget": "selector.memory.budget",
    "KVFit": "selector.memory.fit",
    "format_gib": "selector.memory.fit",
    "kv_fit": "selector.memory.fit",
    "StartupProfile": "selector.memory.profile",
    "startup_profile": "selector.memory.profile",
    "StartupIssue": "selector.memory.issues",
    "dtype_issue": "selector.memory.issues",
    "dcp_issue": "selector.memory.issues",
    "kv_heads_issue": "selector.memory.issues",
    "MemoryReport": "selector.memory.startup",
    "auto_fit_length": "selector.memory.startup",
    "captured_graph_count": "selector.memory.startup",
    "default_max_model_len": "selector.memory.startup",
    "derived_max_model_len": "selector.memory.startup",
    "device_total_memory": "selector.memory.startup",
    "max_model_len_issue": "selector.memory.startup",
    "memory_report": "selector.memory.startup",
    "plan_budget": "selector.memory.startup",
    "raw_config": "selector.memory.startup",
    "tensor_parallel_issue": "selector.memory.startup",
    "WeightEstimate": "selector.memory.weights",
    "WeightPart": "selector.memory.weights",
    "estimate_weights": "selector.memory.weights",
}

__getattr__ = lazy_getattr(__name__, _LAZY)
