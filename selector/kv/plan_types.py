"""The frozen result of planning a model's KV cache."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from selector.kv.backend_facts import BackendKVFacts, CGSupport
from selector.kv.capacity import Capacity
from selector.kv.cudagraph import CudaGraphResolution
from selector.kv.hybrid import HybridAlignment
from selector.kv.layer_specs import CacheEntry
from selector.kv.layout import LayoutResolution
from selector.kv.specs import KVCacheSpec

__all__ = [
    "AttentionGroupPlan",
    "BlockSizeDecision",
    "GroupPlan",
    "ModelPlan",
    "PlanError",
    "format_ranges",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def format_ranges(indices: tuple[int, ...] | list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = prev = None
    for index in ordered:
        if start is None:
            start = prev = index
        elif prev is not None and index == prev + 1:
            prev = index
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = index
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


class PlanError(_Frozen):
    """What vLLM would raise at startup, and in which step."""

    stage: str
    exc_type: str
    message: str


class BlockSizeDecision(_Frozen):
    """The manager block size (``cache_config.block_size``) and how it was reached."""

    block_size: int
    user_specified: bool
    preferred: int
    """After 8.1 step 1 (the user's value when given)."""
    hybrid: HybridAlignment | None = None
    mamba_block_size: int | None = None
    mamba_cache_mode: str = "none"
    prefill_checkpoints: bool = False
    """The state layers export prefill checkpoints (align mode, every one declares an
    alignment): their specs hold one checkpoint block on the Mamba block grid."""
    messages: tuple[str, ...] = ()


class AttentionGroupPlan(_Frozen):
    """Layers of one KV-cache group sharing (backend, spec, q heads per rank)."""

    backend: BackendKVFacts
    layer_names: tuple[str, ...]
    layers: str
    """Layer indices as ranges, e.g. ``"0-4, 6-10"``."""
    num_q_heads: int
    spec: KVCacheSpec
    kernel_block_size: int | None
    virtual_blocks_per_manager_block: int | None
    cudagraph_support: CGSupport
    reorder_batch_threshold: int | None


class GroupPlan(_Frozen):
    """One KV-cache group."""

    index: int
    kind: str
    """vLLM's ``KVCacheSpecKind`` of the group."""
    layer_names: tuple[str, ...]
    layer_indices: tuple[int, ...]
    layers: str
    spec: KVCacheSpec | None
    """The merged spec; None for a ``UniformTypeKVCacheSpecs`` group."""
    layer_specs: tuple[KVCacheSpec, ...]
    uniform_type: bool
    manager_block_size: int
    kernel_block_size: int | None
    virtual_blocks_per_manager_block: int | None
    page_size_bytes: tuple[int, ...]
    """Distinct per-layer page sizes."""
    bytes_per_token: int
    """KV bytes per token over the group's layers (unpadded; 0 for state groups)."""
    bytes_per_block: int
    """The group's bytes per block id (sum of layer block strides)."""
    blocks_per_request: int
    attention_groups: tuple[AttentionGroupPlan, ...]
    cudagraph_support: CGSupport
    padding_layers: int = 0
    kernel_block_error: str | None = None
    """vLLM's ``select_common_block_size`` error when no kernel size fits."""


class ModelPlan(_Frozen):
    """The whole-model KV plan: groups, block sizes, layout, CUDA graphs, capacity."""

    model: str
    tp_size: int
    kv_cache_dtype: str
    ok: bool
    errors: tuple[PlanError, ...] = ()
    warnings: tuple[str, ...] = ()
    info: tuple[str, ...] = ()
    block_size: BlockSizeDecision | None = None
    layout: LayoutResolution | None = None
    grouping_path: str | None = None
    groups: tuple[GroupPlan, ...] = ()
    reorder_batch_threshold: int | None = None
    cudagraph: CudaGraphResolution | None = None
    capacity: Capacity | None = None
    entries: tuple[CacheEntry, ...] = ()
