"""Memory per block, blocks per request and the tokens a budget holds
(``get_kv_cache_config_from_groups``, ``get_max_concurrency_for_kv_cache_config``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from selector.kv.grouping import KVGroup
from selector.kv.specs import (
    AnySpec,
    AttentionSpecBase,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    EncoderOnlyAttentionSpec,
    MambaSpec,
    SlidingWindowSpec,
    replace_spec,
)

__all__ = [
    "Capacity",
    "blocks_per_request",
    "bytes_per_block",
    "capacity",
    "group_pages_per_request",
    "layer_block_stride",
    "max_memory_usage_bytes",
]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Capacity(BaseModel):
    """What the KV pool holds for a memory budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_model_len: int
    bytes_per_block: int
    """One block id across every layer of the widest group (all groups share ids)."""
    blocks_per_request: int
    """Block ids one request of ``max_model_len`` tokens takes, summed over groups."""
    available_bytes: int | None = None
    num_blocks: int | None = None
    max_concurrency: float | None = None
    """Requests of ``max_model_len`` tokens that fit at once."""
    kv_cache_tokens: int | None = None
    """vLLM's "KV cache size: N tokens" (``max_concurrency x max_model_len``)."""


def layer_block_stride(spec: AnySpec) -> int:
    """A layer's bytes per block: its page rounded up to its block-stride alignment."""
    page = spec.page_size_bytes
    if not isinstance(spec, AttentionSpecBase) or spec.block_stride_alignment is None:
        return page
    kernel = math.gcd(spec.block_stride_alignment, spec.block_size)
    if kernel == spec.block_size:
        return page
    unit = replace_spec(spec, block_size=kernel).page_size_bytes
    return _cdiv(page, unit) * unit


def bytes_per_block(groups: Sequence[KVGroup]) -> int:
    """Layer-outer layouts: the largest group's sum of layer block strides."""
    sized = [g for g in groups if not isinstance(g.layer_specs[0], EncoderOnlyAttentionSpec)]
    if not sized:
        return 0
    return max(
        sum(layer_block_stride(group.spec_of(name)) for name in group.layer_names)
        for group in sized
    )


def _pages_needed(spec: AnySpec, max_model_len: int, in_flight: int) -> int:
    """``cdiv(max_memory_usage_bytes, page_size_bytes)`` for one spec."""
    if isinstance(spec, EncoderOnlyAttentionSpec):
        return 0
    if isinstance(spec, MambaSpec):
        if spec.mamba_cache_mode == "align":
            return 2 + spec.num_speculative_blocks + spec.num_prefill_checkpoint_blocks
        if spec.mamba_cache_mode == "all":  # a state per block (0.25.1-0.31.0)
            return _cdiv(max_model_len, spec.block_size) + spec.num_speculative_blocks
        return 1 + spec.num_speculative_blocks
    if isinstance(spec, CircularBufferSpec):  # one ring block per request (kv_cache_interface.py:982-989)
        return 1
    if isinstance(spec, SlidingWindowSpec):
        tokens = min(spec.sliding_window - 1 + in_flight, max_model_len)
        return _cdiv(tokens, spec.block_size) + 1
    if isinstance(spec, ChunkedLocalAttentionSpec):
        tokens = min(spec.attention_chunk_size + in_flight, max_model_len)
        return _cdiv(tokens, spec.block_size)
    return _cdiv(max_model_len, spec.block_size)


def max_memory_usage_bytes(spec: AnySpec, max_model_len: int, in_flight: int) -> int:
    """vLLM's ``KVCacheSpec.max_memory_usage_bytes``: the pages one ``max_model_len``
    request takes from this layer, in bytes."""
    return _pages_needed(spec, max_model_len, in_flight) * spec.page_size_bytes


def group_pages_per_request(spec: AnySpec | None, layer_specs: Sequence[AnySpec],
                            max_model_len: int, in_flight: int) -> int:
    """Blocks one ``max_model_len`` request takes from a group: its merged spec's, or the
    most any of its layers takes (``UniformTypeKVCacheSpecs.max_memory_usage_pages``)."""
    if spec is not None:
        return _pages_needed(spec, max_model_len, in_flight)
    return max((_pages_needed(s, max_model_len, in_flight) for s in layer_specs), default=0)


def blocks_per_request(group: KVGroup, max_model_len: int, in_flight: int) -> int:
    """Blocks one ``max_model_len`` request takes from this group."""
    if group.merged_spec is not None:
        return _pages_needed(group.merged_spec, max_model_len, in_flight)
    return max(_pages_needed(spec, max_model_len, in_flight) for spec in group.layer_specs)


def capacity(
    groups: Sequence[KVGroup],
    *,
    max_model_len: int,
    in_flight_tokens: int,
    available_bytes: int | None,
) -> Capacity:
    """Blocks, concurrency and tokens for ``available_bytes`` of KV memory."""
    per_block = bytes_per_block(groups)
    per_request = sum(blocks_per_request(g, max_model_len, in_flight_tokens) for g in groups)
    if available_bytes is None or per_block == 0:
        return Capacity(
            max_model_len=max_model_len,
            bytes_per_block=per_block,
            blocks_per_request=per_request,
            available_bytes=available_bytes,
        )
    num_blocks = max(available_bytes, 0) // per_block
    concurrency = num_blocks / per_request if per_request else 0.0
    return Capacity(
        max_model_len=max_model_len,
        bytes_per_block=per_block,
        blocks_per_request=per_request,
        available_bytes=available_bytes,
        num_blocks=num_blocks,
        max_concurrency=concurrency,
        kv_cache_tokens=int(concurrency * max_model_len),
    )
