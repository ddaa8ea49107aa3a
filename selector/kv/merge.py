"""Spec merging and uniformity tests (``KVCacheSpec.merge`` and friends)."""

from __future__ import annotations

from collections.abc import Sequence

from selector.kv.specs import (
    ATTENTION_SPEC_FIELDS,
    AnySpec,
    AttentionSpecBase,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    SlidingWindowSpec,
    replace_spec,
)

__all__ = ["MergeAssertion", "MergeValueError", "is_uniform_spec", "is_uniform_type", "merge_specs"]


class MergeAssertion(Exception):
    """vLLM's ``AssertionError`` from ``merge``: the specs cannot share a group."""


class MergeValueError(Exception):
    """vLLM's ``ValueError`` from ``merge`` (different window sizes)."""


_SAME_SPEC = "All layers in the same KV cache group must be the same."
_SAME_ATTENTION = (
    "All attention layers in the same KV cache group must have the same attention spec."
)


def _attention_fields_equal(specs: Sequence[AttentionSpecBase]) -> bool:
    first = specs[0]
    return all(
        getattr(spec, field) == getattr(first, field)
        for spec in specs[1:]
        for field in ATTENTION_SPEC_FIELDS
    )


def _one_window(values: set[int]) -> int | None:
    if len(values) > 1:
        raise MergeValueError(
            "All attention layers in the same KV cache group must have the same window size."
        )
    return next(iter(values), None)


def _merge_mla(specs: Sequence[AnySpec]) -> AnySpec:
    mla = [spec for spec in specs if isinstance(spec, MLAAttentionSpec)]
    if len(mla) != len(specs):
        raise MergeAssertion(
            "All attention layers in the same KV cache group must be MLAAttentionSpec."
        )
    for attribute in (
        "cache_dtype_str",
        "topk_buffer_width",
        "cache_role",
        "is_index_group_leader",
        "block_stride_alignment",
    ):
        if len({getattr(spec, attribute) for spec in mla}) != 1:
            raise MergeAssertion(
                "All attention layers in the same KV cache group must use the same "
                "quantization method, top-k buffer width, tokens per state, model version, "
                "cache role, index-sharing role, and block stride alignment."
            )
    if not _attention_fields_equal(mla):
        raise MergeAssertion(_SAME_ATTENTION)
    return mla[0]


def _merge_full(specs: Sequence[AnySpec]) -> AnySpec:
    # RSWASpec subclasses FullAttentionSpec in vLLM: FullAttentionSpec.merge takes it
    full = [spec for spec in specs if isinstance(spec, FullAttentionSpec | MLAAttentionSpec | RSWASpec)]
    if len(full) != len(specs):
        raise MergeAssertion(
            "All attention layers in the same KV cache group must be FullAttentionSpec."
        )
    plain = [spec for spec in full if isinstance(spec, FullAttentionSpec | RSWASpec)]
    if len(plain) != len(full):
        raise MergeAssertion("MLAAttentionSpec should be merged in MLAAttentionSpec.merge")
    window = _one_window({s.sliding_window for s in plain if s.sliding_window is not None})
    chunk = _one_window(
        {s.attention_chunk_size for s in plain if s.attention_chunk_size is not None}
    )
    if not _attention_fields_equal(plain):
        raise MergeAssertion(_SAME_ATTENTION)
    if window is not None and chunk is not None:
        raise MergeAssertion(
            "Model with both sliding window layers and chunked local attention layers is "
            "not supported."
        )
    return replace_spec(plain[0], sliding_window=window, attention_chunk_size=chunk)


def _merge_rswa(specs: Sequence[AnySpec]) -> AnySpec:
    """``RSWASpec.merge`` (vllm/v1/kv_cache_interface.py:828-857 in 0.33.0): R-SWA specs
    only, one ``rswa_window``, then ``FullAttentionSpec.merge``'s checks."""
    rswa = [spec for spec in specs if isinstance(spec, RSWASpec)]
    if len(rswa) != len(specs):
        raise MergeAssertion("All attention layers in the same KV cache group must be RSWASpec.")
    windows = {spec.rswa_window for spec in rswa}
    if len(windows) != 1:
        raise MergeAssertion(f"All R-SWA layers must share the same rswa_window, got {windows}")
    return _merge_full(rswa)


def merge_specs(specs: Sequence[AnySpec]) -> AnySpec:
    """One spec for a group, by the rules of the first spec's class."""
    first = specs[0]
    if isinstance(first, MLAAttentionSpec):
        return _merge_mla(specs)
    if isinstance(first, RSWASpec):
        return _merge_rswa(specs)
    if isinstance(first, FullAttentionSpec):
        return _merge_full(specs)
    if not all(spec == first for spec in specs[1:]):
        raise MergeAssertion(_SAME_SPEC)
    return first


def is_uniform_spec(specs: Sequence[AnySpec]) -> bool:
    """``is_kv_cache_spec_uniform``: the first spec's ``merge`` accepts them all
    (only an assertion means no; a window-size ``ValueError`` propagates)."""
    if not specs:
        return True
    try:
        merge_specs(specs)
    except MergeAssertion:
        return False
    return True


def _full_like(spec: AnySpec) -> bool:
    """Of ``uniform_type_base_spec`` FullAttentionSpec: full attention, MLA and R-SWA
    (vllm/v1/core/single_type_kv_cache_manager.py:2708-2713 in 0.33.0)."""
    return isinstance(spec, FullAttentionSpec | MLAAttentionSpec | RSWASpec)


def _uniform_with(first: AnySpec, spec: AnySpec) -> bool:
    """``first.is_uniform_with_collection`` for one member."""
    if _full_like(first):
        return _full_like(spec)
    if isinstance(first, SlidingWindowSpec):
        return isinstance(spec, SlidingWindowSpec) and spec.sliding_window == first.sliding_window
    if isinstance(first, ChunkedLocalAttentionSpec):
        return (
            isinstance(spec, ChunkedLocalAttentionSpec)
            and spec.attention_chunk_size == first.attention_chunk_size
        )
    if isinstance(first, MambaSpec):
        return (
            isinstance(spec, MambaSpec)
            and spec.num_speculative_blocks == first.num_speculative_blocks
            and spec.num_prefill_checkpoint_blocks == first.num_prefill_checkpoint_blocks
            and spec.prefill_checkpoint_alignment == first.prefill_checkpoint_alignment
            and spec.page_size_bytes == first.page_size_bytes
        )
    if isinstance(first, CrossAttentionSpec):
        return isinstance(spec, CrossAttentionSpec)
    if isinstance(first, CircularBufferSpec):
        return isinstance(spec, CircularBufferSpec)
    return False


def _dcp_sharded(spec: AnySpec) -> bool:
    """``KVCacheSpec.dcp_sharded``: False for a Mamba state (the base class's default),
    an attention spec's own (True unless the module says otherwise)."""
    if isinstance(spec, MambaSpec):
        return False
    return spec.dcp_sharded if isinstance(spec, CircularBufferSpec) else True


def is_uniform_type(specs: Sequence[AnySpec]) -> bool:
    """``UniformTypeKVCacheSpecs.is_uniform_type``: one block size and one
    registered spec type (full attention and MLA count as one)."""
    if not specs or len({spec.block_size for spec in specs}) > 1:
        return False
    if len({_dcp_sharded(spec) for spec in specs}) > 1:
        return False
    return all(_uniform_with(specs[0], spec) for spec in specs)
