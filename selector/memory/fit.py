"""Does one request of ``max_model_len`` tokens fit? vLLM's ``check_enough_kv_cache_memory``
and ``estimate_max_model_len`` (vllm/v1/core/kv_cache_planning.py:50-185 in 0.33.0),
on the KV plan's per-layer specs."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from selector.kv.capacity import max_memory_usage_bytes
from selector.kv.specs import AnySpec

__all__ = ["KVFit", "format_gib", "kv_fit"]

_GIB = 1024**3


def format_gib(value: int) -> str:
    """vLLM's ``format_gib``: ``f"{round(bytes / GiB, 2)}"`` (vllm/utils/mem_utils.py:30-31)."""
    return f"{round(value / _GIB, 2)}"


class KVFit(BaseModel):
    """The outcome of vLLM's start-up memory check."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    available_bytes: int
    check_bytes: int
    """Available memory less the null block the pool holds back."""
    needed_bytes: int
    """KV memory one request of ``max_model_len`` tokens needs (all layers)."""
    max_model_len: int
    outcome: str
    """``ok``, ``no_memory`` (nothing left) or ``too_long`` (max_model_len does not fit)."""
    estimated_max_len: int = 0


def _needed(specs: Sequence[AnySpec], length: int, in_flight: int) -> int:
    return sum(max_memory_usage_bytes(spec, length, in_flight) for spec in specs)


def kv_fit(specs: Sequence[AnySpec], *, available_bytes: int, pool_block_bytes: int,
           max_model_len: int, in_flight_tokens: int) -> KVFit:
    """vLLM's check for ``available_bytes`` of KV memory."""
    check = available_bytes - pool_block_bytes if specs else available_bytes
    needed = _needed(specs, max_model_len, in_flight_tokens)
    if check <= 0:
        return KVFit(available_bytes=available_bytes, check_bytes=check, needed_bytes=needed,
                     max_model_len=max_model_len, outcome="no_memory")
    if needed <= check:
        return KVFit(available_bytes=available_bytes, check_bytes=check, needed_bytes=needed,
                     max_model_len=max_model_len, outcome="ok")
    left, right, best = 1, max_model_len, 0
    while left <= right:
        mid = (left + right) // 2
        if _needed(specs, mid, in_flight_tokens) <= check:
            best, left = mid, mid + 1
        else:
            right = mid - 1
    return KVFit(available_bytes=available_bytes, check_bytes=check, needed_bytes=needed,
                 max_model_len=max_model_len, outcome="too_long", estimated_max_len=best)
