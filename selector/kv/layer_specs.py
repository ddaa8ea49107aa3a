"""Each layer's KV-cache spec, as its vLLM layer builds it (reference 7.2) and
the runner's ``customize_attention_spec`` adjusts it."""

from __future__ import annotations

from typing import Literal, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict

from selector.kv.backend_facts import BackendKVFacts
from selector.kv.block_size import largest_kernel_block_within
from selector.kv.dtypes import DS_MLA_CONTENT_BYTES, dtype_bytes, is_nvfp4, resolve_kv_dtype
from selector.kv.specs import (
    AnySpec,
    AttentionSpecBase,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    SlidingWindowSpec,
    replace_spec,
)
from selector.kv.ssm_state import ssm_state_dtypes, ssm_state_shapes
from selector.models.facts import LayerFacts

__all__ = [
    "CacheEntry",
    "SpecContext",
    "attention_bytes_per_token",
    "build_spec",
    "customize",
    "indexer_spec",
    "indexer_tail_spec",
    "mamba_page_bytes",
    "mamba_spec",
]

INDEXER_QUANT_BLOCK = 128
"""The DeepSeek-V3.2 indexer stores fp8 values plus one fp32 scale per 128."""


class CacheEntry(BaseModel):
    """One KV-cache-holding module: a layer's attention or state, or the
    sparse indexer cache next to a DeepSeek-V3.2 MLA layer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    layer_index: int
    role: Literal["attention", "indexer", "indexer_tail", "state"]
    backend: BackendKVFacts
    spec: KVCacheSpec
    num_q_heads: int


class SpecContext(BaseModel):
    """The run-time values a layer's spec depends on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_dtype: str
    kv_cache_dtype: str = "auto"
    block_size: int
    mamba_block_size: int
    mamba_page_size_padded: int | None = None
    mamba_cache_mode: Literal["none", "align", "all"] = "none"
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    num_speculative_tokens: int = 0
    prefill_checkpoint_alignment: int | None = None
    spec_checkpoint_alignment: int | None = None
    """A layer's own checkpoint stamp (``KVOptions.state_spec_checkpoint_alignment``)."""
    tp_size: int = 1


_A = TypeVar("_A", bound=AttentionSpecBase)


def customize(spec: _A, backend: BackendKVFacts) -> _A:
    """``customize_attention_spec``: the backend's repacking, then a
    ``MultipleOf(max)`` block-stride alignment when it declares only exact sizes."""
    nvfp4 = backend.packing == "flashinfer_nvfp4" and is_nvfp4(spec.kv_cache_dtype)
    if nvfp4 and spec.state_content_bytes is None:
        packed = spec.head_size // 2 + spec.head_size // 16
        spec = replace_spec(
            spec,
            num_head_slots=2 * spec.num_kv_heads,
            state_content_bytes=packed * spec.dtype_bytes,
        )
    if spec.block_stride_alignment is None and backend.only_exact_sizes \
            and backend.exact_size_alignment:
        largest = max(rule for rule in backend.kernel_block_sizes if isinstance(rule, int))
        spec = replace_spec(spec, block_stride_alignment=largest)
    return spec


class _DenseFields(TypedDict):
    block_size: int
    num_kv_heads: int
    head_size: int
    head_size_v: int
    kv_cache_dtype: str
    dtype_bytes: int


def _dense_fields(layer: LayerFacts, kv_dtype: str, block_size: int) -> _DenseFields:
    return {
        "block_size": block_size,
        "num_kv_heads": layer.num_kv_heads,
        "head_size": layer.head_size,
        "head_size_v": layer.head_size_v,
        "kv_cache_dtype": kv_dtype,
        "dtype_bytes": dtype_bytes(kv_dtype),
    }


def _mla_spec(layer: LayerFacts, backend: BackendKVFacts, ctx: SpecContext) -> MLAAttentionSpec:
    cache_dtype_str = backend.canonical_kv_cache_dtype or ctx.kv_cache_dtype
    kv_dtype = resolve_kv_dtype(cache_dtype_str, ctx.model_dtype)
    return MLAAttentionSpec(
        block_size=ctx.block_size,
        num_kv_heads=1,
        head_size=layer.head_size,
        head_size_v=0,
        kv_cache_dtype=kv_dtype,
        dtype_bytes=dtype_bytes(kv_dtype),
        state_content_bytes=DS_MLA_CONTENT_BYTES.get(cache_dtype_str),
        cache_dtype_str=cache_dtype_str,
        topk_buffer_width=layer.indexer.index_topk if layer.indexer else None,
        is_index_group_leader=layer.is_sparse,
    )


def _sliding_spec(
    layer: LayerFacts, backend: BackendKVFacts, ctx: SpecContext, kv_dtype: str
) -> SlidingWindowSpec:
    window = layer.sliding_window or 0
    probe = SlidingWindowSpec(**_dense_fields(layer, kv_dtype, 1), sliding_window=window)
    per_token = customize(probe, backend).unpadded_page_size_bytes
    budget = per_token * ctx.block_size
    block = layer.own_block_size or largest_kernel_block_within(
        backend, per_token, budget, ctx.block_size)
    return SlidingWindowSpec(**_dense_fields(layer, kv_dtype, block), sliding_window=window)


def attention_spec(layer: LayerFacts, backend: BackendKVFacts, ctx: SpecContext) -> AnySpec:
    """The spec an attention layer's module returns (before customisation)."""
    if layer.kind == "mla":
        return _mla_spec(layer, backend, ctx)
    kv_dtype = resolve_kv_dtype(ctx.kv_cache_dtype, ctx.model_dtype)
    fields = _dense_fields(layer, kv_dtype, ctx.block_size)
    if layer.kind == "encoder_only":
        return EncoderOnlyAttentionSpec(**fields)
    if layer.kind == "cross_attention":
        return CrossAttentionSpec(**fields)
    if layer.sliding_window:
        return _sliding_spec(layer, backend, ctx, kv_dtype)
    if layer.attention_chunk_size:
        chunk = layer.attention_chunk_size
        return ChunkedLocalAttentionSpec(**fields, attention_chunk_size=chunk)
    if layer.rswa_window is not None:  # RSWAAttention.get_kv_cache_spec (rswa_attention.py:25-37)
        return RSWASpec(**fields, rswa_window=layer.rswa_window)
    return FullAttentionSpec(**fields)


def indexer_spec(layer: LayerFacts, ctx: SpecContext) -> MLAAttentionSpec:
    """``DeepseekV32IndexerCache``: uint8 rows of ``head_dim + head_dim/128*4`` bytes."""
    head_dim = layer.indexer.index_head_dim if layer.indexer else 128
    if layer.indexer is not None and layer.indexer.row == "bfloat16":
        # MiniMaxM3IndexerCache.get_kv_cache_spec (vllm/models/minimax_m3/common/
        # indexer.py:145-153 in 0.33.0): key-only bf16 rows (indexer_kv_dtype "bf16")
        return MLAAttentionSpec(block_size=ctx.block_size, num_kv_heads=1, head_size=head_dim,
                                head_size_v=0, kv_cache_dtype="bfloat16", dtype_bytes=2,
                                cache_role="indexer")
    return MLAAttentionSpec(
        block_size=ctx.block_size,
        num_kv_heads=1,
        head_size=head_dim + head_dim // INDEXER_QUANT_BLOCK * 4,
        head_size_v=0,
        kv_cache_dtype="uint8",
        dtype_bytes=1,
        cache_role="indexer",
        # Glm5NextIndexerCache.get_kv_cache_spec (vllm/models/glm5next/common/
        # attention.py:114-120 in 0.33.0): one state per index_kpool tokens
        tokens_per_state=layer.indexer.tokens_per_state if layer.indexer else 1,
    )


def indexer_tail_spec(layer: LayerFacts, ctx: SpecContext) -> CircularBufferSpec:
    """A pooled indexer's tail ring (``Glm5NextTailCache.get_kv_cache_spec``,
    vllm/models/glm5next/common/attention.py:153-180 in 0.33.0): a ``CircularBufferSpec``
    whose block is the ring, of the ring's heads and dtype, no V."""
    assert layer.indexer is not None and layer.indexer.tail is not None
    tail = layer.indexer.tail
    return CircularBufferSpec(
        block_size=tail.ring(ctx.num_speculative_tokens),
        num_kv_heads=tail.num_kv_heads,
        head_size=tail.head_size,
        head_size_v=0,
        kv_cache_dtype=tail.dtype,
        dtype_bytes=dtype_bytes(tail.dtype),
        dcp_sharded=tail.dcp_sharded,
    )


def mamba_spec(layer: LayerFacts, ctx: SpecContext) -> MambaSpec:
    """The state spec of a Mamba / GDN layer."""
    assert layer.ssm is not None
    ssm_dtype = ctx.mamba_ssm_cache_dtype
    if ssm_dtype == "auto" and layer.ssm.state_dtype:
        ssm_dtype = layer.ssm.state_dtype
    names, sizes = ssm_state_dtypes(ctx.model_dtype, ctx.mamba_cache_dtype, ssm_dtype)
    shapes = ssm_state_shapes(layer.ssm, ctx.tp_size, ctx.num_speculative_tokens)
    checkpoint = ctx.prefill_checkpoint_alignment if ctx.mamba_cache_mode == "align" else None
    if getattr(layer.ssm, "spec_checkpoint", ()):
        # the layer stamps its spec itself, whatever the mode (kda.py:166-176 in 0.33.0)
        checkpoint = ctx.spec_checkpoint_alignment
    return MambaSpec(
        block_size=ctx.mamba_block_size,
        shapes=shapes,
        # one dtype per state: a short convolution keeps the conv state only
        dtype_bytes=sizes[:len(shapes)],
        dtypes=names[:len(shapes)],
        mamba_type=layer.ssm.ssm_type,
        page_size_padded=ctx.mamba_page_size_padded,
        mamba_cache_mode=ctx.mamba_cache_mode,
        num_speculative_blocks=ctx.num_speculative_tokens,
        num_prefill_checkpoint_blocks=1 if checkpoint else 0,
        prefill_checkpoint_alignment=checkpoint,
    )


def build_spec(layer: LayerFacts, backend: BackendKVFacts, ctx: SpecContext) -> AnySpec:
    """A layer's final spec: the module's spec, then the runner's customisation."""
    if layer.is_ssm:
        return mamba_spec(layer, ctx)
    spec = attention_spec(layer, backend, ctx)
    return spec if isinstance(spec, MambaSpec) else customize(spec, backend)


def attention_bytes_per_token(layer: LayerFacts, backend: BackendKVFacts, ctx: SpecContext) -> int:
    """One attention layer's page for a single token, as the hybrid alignment
    computes it (model-level head size and KV heads, the first backend's packing)."""
    one = ctx.model_copy(update={"block_size": 1})
    if layer.kind == "mla":
        return _mla_spec(layer, backend, one).page_size_bytes
    kv_dtype = resolve_kv_dtype(ctx.kv_cache_dtype, ctx.model_dtype)
    spec = FullAttentionSpec(**_dense_fields(layer, kv_dtype, 1))
    return customize(spec, backend).page_size_bytes


def mamba_page_bytes(layer: LayerFacts, ctx: SpecContext) -> int:
    """The unpadded state page of an SSM layer."""
    unpadded = ctx.model_copy(update={"mamba_page_size_padded": None})
    return mamba_spec(layer, unpadded).page_size_bytes
