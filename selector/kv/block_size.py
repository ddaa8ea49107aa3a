"""Block-size negotiation (reference sections 7.2, 8.1, 8.3).

``cache_config.block_size`` (the manager block size) is picked once for the
model from its distinct non-SSM backends; each KV-cache group then picks the
kernel block size its backends run (``select_common_block_size``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from selector.kv.backend_facts import BackendKVFacts, MultipleOf, render_sizes, rule_base
from selector.kv.errors import EngineStartupError

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "check_aligned_block_size",
    "distinct_backends",
    "largest_kernel_block_within",
    "preferred_block_size",
    "select_common_block_size",
]

DEFAULT_BLOCK_SIZE = 16
"""``CacheConfig.DEFAULT_BLOCK_SIZE``."""


def distinct_backends(backends: Sequence[BackendKVFacts]) -> list[BackendKVFacts]:
    """Distinct non-SSM backends in first-use order (vLLM dedups by class)."""
    seen: list[BackendKVFacts] = []
    keys: set[tuple[str, str]] = set()
    for backend in backends:
        key = (backend.name, backend.class_name)
        if backend.is_ssm or key in keys:
            continue
        keys.add(key)
        seen.append(backend)
    return seen


def _listing(backends: Sequence[BackendKVFacts]) -> str:
    return "; ".join(f"{b.name}: {render_sizes(b.kernel_block_sizes)}" for b in backends)


def preferred_block_size(
    backends: Sequence[BackendKVFacts], default: int = DEFAULT_BLOCK_SIZE
) -> int:
    """``_preferred_block_size_for_backends``: the smallest size every backend
    accepts (LCM candidates of one declared base per backend)."""
    if len(backends) == 1:
        return backends[0].preferred_block_size(default)
    if all(b.supports_block_size(default) for b in backends):
        return default
    per_backend = [[rule_base(r) for r in b.kernel_block_sizes] or [1] for b in backends]
    candidates = sorted({math.lcm(*combo) for combo in itertools.product(*per_backend)})
    for candidate in candidates:
        if all(b.supports_block_size(candidate) for b in backends):
            return candidate
    raise EngineStartupError(
        f"The attention backends share no supported KV cache block size ({_listing(backends)}).",
        stage="block_size",
    )


def check_aligned_block_size(
    backends: Sequence[BackendKVFacts], block_size: int, pre_block_size: int
) -> None:
    """``_check_aligned_block_size``: a size changed by alignment must still be
    accepted by every backend."""
    if block_size == pre_block_size:
        return
    rejecting = [b.name for b in backends if not b.supports_block_size(block_size)]
    if rejecting:
        raise EngineStartupError(
            f"Aligned KV cache block size {block_size} is not supported by attention "
            f"backend(s): {', '.join(rejecting)}.",
            stage="block_size",
        )


def select_common_block_size(manager_block_size: int, backends: Sequence[BackendKVFacts]) -> int:
    """The kernel block size for a group: the manager size if every backend
    accepts it exactly, else the largest declared int size dividing it that
    every backend accepts."""
    if all(b.accepts_kernel_block(manager_block_size) for b in backends):
        return manager_block_size
    candidates = {
        rule
        for b in backends
        for rule in b.kernel_block_sizes
        if not isinstance(rule, MultipleOf) and manager_block_size % rule == 0
    }
    for size in sorted(candidates, reverse=True):
        if all(b.accepts_kernel_block(size) for b in backends):
            return size
    raise EngineStartupError(
        f"No common block size for {manager_block_size} ({_listing(backends)}).",
        stage="kernel_block_size",
    )


def largest_kernel_block_within(
    backend: BackendKVFacts, per_token_bytes: int, page_budget: int, fallback: int
) -> int:
    """``_largest_kernel_block_within``: a sliding-window layer's own block size,
    the largest supported kernel block whose page fits ``page_budget``."""
    max_block = page_budget // per_token_bytes
    candidates = [r for r in backend.kernel_block_sizes if not isinstance(r, MultipleOf)]
    candidates.extend(
        max(r.multiple_of, max_block // r.multiple_of * r.multiple_of)
        for r in backend.kernel_block_sizes
        if isinstance(r, MultipleOf)
    )
    if not candidates:
        return fallback
    fitting = [b for b in candidates if b * per_token_bytes <= page_budget]
    return max(fitting) if fitting else min(candidates)
