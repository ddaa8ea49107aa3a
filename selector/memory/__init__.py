"""vLLM's start-up: the memory budget that sizes the KV cache (weights from the model's
shapes and quantization, the reservations vLLM makes, the KV memory left) and the other
checks that decide whether ``vllm serve`` starts, each with vLLM's own words."""

from selector.memory.budget import BudgetInputs, MemoryBudget, MemoryLine, memory_budget
from selector.memory.fit import KVFit, format_gib, kv_fit
from selector.memory.profile import StartupProfile, startup_profile
from selector.memory.startup import (
    MemoryReport,
    StartupIssue,
    derived_max_model_len,
    device_total_memory,
    dtype_issue,
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
    "derived_max_model_len",
    "device_total_memory",
    "dtype_issue",
    "estimate_weights",
    "format_gib",
    "kv_fit",
    "max_model_len_issue",
    "memory_budget",
    "memory_report",
    "plan_budget",
    "raw_config",
    "startup_profile",
    "tensor_parallel_issue",
]
