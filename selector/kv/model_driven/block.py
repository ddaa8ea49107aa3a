"""The block the caches take (``update_block_size_for_backend``): ``--block-size``, the
chosen backend's kernel block, or the smallest block every cache's backend accepts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from selector.kv.backend_facts import BackendKVFacts
from selector.kv.block_size import distinct_backends, preferred_block_size
from selector.kv.errors import EngineStartupError
from selector.kv.model_driven.backends import block_size_rules, kernel_block, kernel_sizes
from selector.kv.model_driven.caches import DrivenEntry, driven_caches
from selector.kv.model_driven.rules import DrivenModel, ModelDrivenData
from selector.kv.model_driven.selection import driven_backend
from selector.kv.plan_types import PlanError

__all__ = [
    "aligned_block",
    "aligned_block_or_error",
]


def aligned_block_or_error(rule: DrivenModel, data: ModelDrivenData, selected: str,
                           config: Mapping[str, Any], block_size: int | None, *,
                           element_bytes: int | None, cache_dtype: str, architecture: str = "",
                           tp_size: int = 1, cc_major: int = 0) -> tuple[int, PlanError | None]:
    """``aligned_block`` with the error of ``common`` where no block fits every backend
    (the block is then the default, and ``plan_driven`` reports the error)."""
    preferred = block_size or 16  # CacheConfig.DEFAULT_BLOCK_SIZE
    if block_size:
        return block_size, None
    backend = driven_backend(data, rule, selected, cc_major)
    if rule.aligned_block_size == "kernel_block":
        return kernel_block(backend, cc_major) or preferred, None
    at_default = driven_caches(rule, config, selected=selected, element_bytes=element_bytes,
                               cache_dtype=cache_dtype, cache_block=preferred,
                               layer_class=backend.layer_class, architecture=architecture,
                               tp_size=tp_size, cc_major=cc_major)
    try:
        return _common_block(at_default, rule, data, selected, preferred), None
    except EngineStartupError as exc:
        return preferred, PlanError(stage="block_size", exc_type=exc.exc_type, message=exc.message)


def aligned_block(rule: DrivenModel, data: ModelDrivenData, selected: str,
                  config: Mapping[str, Any], block_size: int | None, *,
                  element_bytes: int | None, cache_dtype: str, architecture: str = "",
                  tp_size: int = 1, cc_major: int = 0) -> int:
    """The block the caches take (``update_block_size_for_backend``) on a GPU of
    ``cc_major``: ``--block-size`` when given, else the chosen backend's kernel block
    (``kernel_block``) or the smallest block every registered cache's
    backend accepts (``common``; the default 16 where no block fits, which ``plan_driven``
    reports)."""
    return aligned_block_or_error(rule, data, selected, config, block_size, element_bytes=element_bytes,
                                  cache_dtype=cache_dtype, architecture=architecture, tp_size=tp_size,
                                  cc_major=cc_major)[0]


def _common_block(entries: Sequence[DrivenEntry], rule: DrivenModel, data: ModelDrivenData,
                  selected: str, default: int) -> int:
    """``_preferred_block_size_for_backends`` over the distinct backends the registered
    cache modules name, in layer order (vllm/platforms/interface.py:700-745 in 0.33.0)."""
    backends = [BackendKVFacts(name=name, class_name=name, kernel_block_sizes=block_size_rules(sizes))
                for name, sizes in ((e.backend, kernel_sizes(e.backend, rule, data, selected))
                                    for e in entries)]
    return preferred_block_size(distinct_backends(backends), default)
