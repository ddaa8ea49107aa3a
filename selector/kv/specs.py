"""KV-cache specs as vLLM 0.33.0 builds them (``vllm/v1/kv_cache_interface.py``):
a discriminated union of frozen models on ``kind``, with page sizes."""

from __future__ import annotations

from math import prod
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ATTENTION_SPEC_FIELDS",
    "AnySpec",
    "AttentionSpecBase",
    "ChunkedLocalAttentionSpec",
    "CircularBufferSpec",
    "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec",
    "FullAttentionSpec",
    "KVCacheSpec",
    "MLAAttentionSpec",
    "MambaSpec",
    "RSWASpec",
    "SlidingWindowSpec",
    "replace_spec",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AttentionSpecBase(_Frozen):
    """``AttentionSpec``: page = head slots x states x content bytes."""

    block_size: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_size: int = Field(gt=0)
    head_size_v: int = Field(ge=0)
    kv_cache_dtype: str
    """The resolved cache dtype string (``auto`` already replaced by the model dtype)."""
    dtype_bytes: int = Field(gt=0)
    num_head_slots: int | None = None
    """H of the page when a backend repacks (e.g. FlashInfer NVFP4: 2 x KV heads)."""
    state_content_bytes: int | None = None
    """C of the page when packed (e.g. ``fp8_ds_mla``: 656); None: dense K+V."""
    page_size_padded: int | None = None
    tokens_per_state: int = Field(default=1, gt=0, exclude=True)
    """Tokens one state holds (``AttentionSpec.tokens_per_state``: DeepSeek-V4's
    compressed caches keep one state per ``compress_ratio`` tokens); a page holds
    ``block_size // tokens_per_state`` states. Left out of dumps (1 everywhere else)."""
    block_stride_alignment: int | None = None
    """``MultipleOf(n)`` block-stride alignment set when a backend declares only
    exact kernel block sizes (n = the largest); None otherwise."""

    @property
    def num_heads(self) -> int:
        return self.num_head_slots if self.num_head_slots is not None else self.num_kv_heads

    @property
    def content_bytes(self) -> int:
        if self.state_content_bytes is not None:
            return self.state_content_bytes
        return (self.head_size + self.head_size_v) * self.dtype_bytes

    @property
    def bytes_per_token(self) -> int:
        """One layer's KV bytes per token (unpadded)."""
        return self.num_heads * self.content_bytes // self.tokens_per_state

    @property
    def unpadded_page_size_bytes(self) -> int:
        return self.num_heads * (self.block_size // self.tokens_per_state) * self.content_bytes

    @property
    def page_size_bytes(self) -> int:
        if self.page_size_padded is not None:
            return max(self.page_size_padded, self.unpadded_page_size_bytes)
        return self.unpadded_page_size_bytes

    @property
    def hnc_shape(self) -> tuple[int, int, int]:
        """``(num_heads, num_states, page_size_bytes)`` as layout resolution compares."""
        return (self.num_heads, self.block_size, self.page_size_bytes)


ATTENTION_SPEC_FIELDS: tuple[str, ...] = tuple(AttentionSpecBase.model_fields)
"""The fields vLLM's ``merge`` requires equal across a group (``fields(AttentionSpec)``)."""


class FullAttentionSpec(AttentionSpecBase):
    kind: Literal["full_attention"] = "full_attention"
    sliding_window: int | None = None
    attention_chunk_size: int | None = None


class SlidingWindowSpec(AttentionSpecBase):
    kind: Literal["sliding_window"] = "sliding_window"
    sliding_window: int = Field(gt=0)


class ChunkedLocalAttentionSpec(AttentionSpecBase):
    kind: Literal["chunked_local_attention"] = "chunked_local_attention"
    attention_chunk_size: int = Field(gt=0)


class MLAAttentionSpec(AttentionSpecBase):
    """A ``FullAttentionSpec`` subclass: one latent per token, no separate V."""

    kind: Literal["mla_attention"] = "mla_attention"
    cache_dtype_str: str | None = None
    topk_buffer_width: int | None = None
    cache_role: Literal["sparse", "indexer"] = "sparse"
    is_index_group_leader: bool = False


class CircularBufferSpec(AttentionSpecBase):
    """``CircularBufferSpec`` (vllm/v1/kv_cache_interface.py:967-1004 in 0.33.0): one
    block per request (``max_num_blocks_per_req`` 1, ``max_memory_usage_bytes`` one
    page) holding a ring of raw rows, ``block_size`` the ring's capacity; ``AttentionSpec``'s
    page (heads x ``block_size // tokens_per_state`` x ``(head_size + head_size_v)`` x dtype
    bytes); uniform only with other circular buffers (``is_uniform_with_collection``), never
    prefix-cached: one block per request for its lifetime. ``dcp_sharded``:
    vLLM's ``AttentionSpec.dcp_sharded`` (default True), which ``is_uniform_type`` requires
    equal across a group."""

    kind: Literal["circular_buffer"] = "circular_buffer"
    dcp_sharded: bool = True


class RSWASpec(AttentionSpecBase):
    """``RSWASpec(FullAttentionSpec)`` (vllm/v1/kv_cache_interface.py:815-857 in 0.33.0): the
    spec of an ``RSWAAttention`` (Reference Sliding Window Attention,
    vllm/model_executor/layers/attention/rswa_attention.py:25-37), a full-attention page
    (``AttentionSpec``'s: heads x block x ``(head_size + head_size_v)`` x dtype bytes) and a
    full-attention memory bound; its ``RSWAManager`` only frees decode "gap" blocks at run
    time (single_type_kv_cache_manager.py:900-943). Uniform in type with full attention
    (``uniform_type_base_spec=FullAttentionSpec``, single_type_kv_cache_manager.py:2711-2713);
    its own ``merge`` takes only R-SWA specs of one ``rswa_window``. ``sliding_window`` and
    ``attention_chunk_size``: the inherited ``FullAttentionSpec`` fields (None)."""

    kind: Literal["rswa"] = "rswa"
    rswa_window: int = Field(gt=0)
    sliding_window: int | None = None
    attention_chunk_size: int | None = None


class CrossAttentionSpec(AttentionSpecBase):
    kind: Literal["cross_attention"] = "cross_attention"


class EncoderOnlyAttentionSpec(AttentionSpecBase):
    """Zero memory: encoder-only layers keep no autoregressive cache."""

    kind: Literal["encoder_only_attention"] = "encoder_only_attention"


class MambaSpec(_Frozen):
    """Recurrent state: the page comes from the state shapes, not the block size."""

    kind: Literal["mamba"] = "mamba"
    block_size: int = Field(gt=0)
    shapes: tuple[tuple[int, ...], ...]
    dtype_bytes: tuple[int, ...]
    dtypes: tuple[str, ...]
    mamba_type: str
    page_size_padded: int | None = None
    mamba_cache_mode: Literal["none", "align", "all"] = "none"
    num_speculative_blocks: int = 0
    num_prefill_checkpoint_blocks: int = 0
    prefill_checkpoint_alignment: int | None = None

    @property
    def num_heads(self) -> int:
        return 1

    @property
    def real_page_size_bytes(self) -> int:
        pairs = zip(self.shapes, self.dtype_bytes, strict=True)
        return sum(prod(shape) * size for shape, size in pairs)

    @property
    def page_size_bytes(self) -> int:
        if self.page_size_padded is not None:
            return max(self.page_size_padded, self.real_page_size_bytes)
        return self.real_page_size_bytes

    @property
    def hnc_shape(self) -> tuple[int, int, int]:
        return (1, 1, self.page_size_bytes)


KVCacheSpec = Annotated[
    FullAttentionSpec
    | SlidingWindowSpec
    | ChunkedLocalAttentionSpec
    | MLAAttentionSpec
    | CircularBufferSpec
    | RSWASpec
    | CrossAttentionSpec
    | EncoderOnlyAttentionSpec
    | MambaSpec,
    Field(discriminator="kind"),
]
"""One layer's KV-cache spec."""

AnySpec = (
    FullAttentionSpec
    | SlidingWindowSpec
    | ChunkedLocalAttentionSpec
    | MLAAttentionSpec
    | CircularBufferSpec
    | RSWASpec
    | CrossAttentionSpec
    | EncoderOnlyAttentionSpec
    | MambaSpec
)


_S = TypeVar("_S", bound=BaseModel)


def replace_spec(spec: _S, **changes: object) -> _S:
    """A copy of ``spec`` with ``changes`` (like ``dataclasses.replace``)."""
    return spec.model_copy(update=changes)
