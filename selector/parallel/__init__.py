"""Tensor-parallel and decode-context-parallel shard checks of the attention kernels.

:mod:`selector.parallel.sharding` and :mod:`selector.parallel.workload` are pure
Python (vLLM's token-to-rank and head-to-rank rules); everything that touches torch
imports it inside functions, so importing this package stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

if TYPE_CHECKING:
    from selector.parallel.plan import ShardOptions, ShardPlan
    from selector.parallel.report import ShardReport
    from selector.parallel.simulate import run_shard_check

_LAZY = {
    "ShardOptions": "selector.parallel.plan", "ShardPlan": "selector.parallel.plan",
    "ShardReport": "selector.parallel.report", "run_shard_check": "selector.parallel.simulate",
}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = ["ShardOptions", "ShardPlan", "ShardReport", "run_shard_check"]
