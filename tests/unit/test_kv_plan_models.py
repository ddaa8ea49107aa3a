"""Whole-model KV plans for the issue's hybrid cases, every number worked by
hand from vLLM 0.33.0's rules (reference 7-9) in the comments."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.kv import BackendKVFacts, KVOptions, ModelPlan, plan_model
from selector.models import LayerFacts, load_model, shard_model
from tests.unit.kv_stubs import (
    FLASH_ATTN,
    FLASHINFER_SM90,
    FLASHINFER_SM100,
    FLASHINFER_SM100_GQA,
    FLASHMLA,
    FLASHMLA_SPARSE_SM90,
    FLEX_ATTENTION,
    TRITON_ATTN,
)

GiB = 1 << 30


def every(backend: BackendKVFacts) -> Callable[[LayerFacts], BackendKVFacts]:
    return lambda layer: backend


SCENARIO: dict[str, object] = {"cudagraph_mode": "FULL_AND_PIECEWISE", "max_num_batched_tokens": 8192,
                               "max_num_seqs": 256, "gpu_memory_utilization": 0.9}
"""The planner has no vLLM defaults of its own: these tests state the scheduler settings."""


def plan(name: str, backend: BackendKVFacts, tp: int = 1, **options: object) -> ModelPlan:
    return plan_model(shard_model(load_model(name), tp), every(backend),
                      (KVOptions(**{**SCENARIO, **options})).for_engine(load_catalog().engine()))  # type: ignore[arg-type]


def test_gpt_oss_20b_sinks_and_sliding_window_on_h100() -> None:
    p = plan("gpt-oss-20b", FLASH_ATTN, max_model_len=131072)
    assert p.ok and p.grouping_path == "uniform_page_size"
    assert p.block_size is not None and p.block_size.block_size == 16
    sw, full = p.groups
    # layer 0 is sliding, so the SW bucket comes first; 12 layers each, no padding
    assert (sw.kind, sw.layers) == ("sliding_window", "0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22")
    assert (full.kind, len(full.layer_names)) == ("full_attention", 12)
    # page: 8 KV heads x 16 tokens x (64 + 64) x 2 B = 32768 for both kinds -> no unification
    assert sw.page_size_bytes == full.page_size_bytes == (32768,)
    assert sw.bytes_per_block == 12 * 32768
    # SW: cdiv(min(128 - 1 + 8192, 131072), 16) + 1 = 521; full: 131072 / 16 = 8192
    assert (sw.blocks_per_request, full.blocks_per_request) == (521, 8192)
    assert (sw.kernel_block_size, full.kernel_block_size) == (16, 16)
    assert p.layout is not None and p.layout.layout == "LBNHC"
    assert p.cudagraph is not None and p.cudagraph.resolved == "FULL_AND_PIECEWISE"
    assert p.warnings == ()


def test_gpt_oss_20b_capacity() -> None:
    p = plan(
        "gpt-oss-20b",
        FLASH_ATTN,
        device_memory_bytes=80 * GiB,
        gpu_memory_utilization=0.9,
        reserved_bytes=20 * GiB,
    )
    assert p.capacity is not None
    available = int(0.9 * 80 * GiB) - 20 * GiB
    assert p.capacity.available_bytes == available
    assert p.capacity.bytes_per_block == 393216
    assert p.capacity.num_blocks == available // 393216
    assert p.capacity.blocks_per_request == 521 + 8192
    assert p.capacity.kv_cache_tokens == int(p.capacity.num_blocks / 8713 * 131072)


def test_gpt_oss_on_blackwell_flashinfer_uses_hnd() -> None:
    p = plan("gpt-oss-20b", FLASHINFER_SM100_GQA, num_speculative_tokens=2)
    assert p.layout is not None and p.layout.layout == "LBHNC"
    assert p.reorder_batch_threshold == 1
    # UNIFORM_BATCH keeps full decode graphs even with spec decode
    assert p.cudagraph is not None and p.cudagraph.resolved == "FULL_AND_PIECEWISE"
    assert p.cudagraph.min_support == "UNIFORM_BATCH"


def test_flashinfer_single_token_decode_with_spec_decode_downgrades() -> None:
    fi = FLASHINFER_SM90.model_copy(update={"cudagraph_support": "UNIFORM_SINGLE_TOKEN_DECODE"})
    p = plan("gpt-oss-20b", fi, num_speculative_tokens=1)
    assert p.cudagraph is not None and p.cudagraph.resolved == "PIECEWISE"
    assert p.warnings == (
        "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with spec-decode for attention "
        "backend FlashInferBackend (support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); "
        "setting cudagraph_mode=PIECEWISE",
    )
    assert p.cudagraph.cost == (
        "uniform decode batches run piecewise instead of full CUDA graphs (more kernel "
        "launches per decode step)",
    )


def test_gemma3_27b_five_local_one_global() -> None:
    p = plan("gemma-3-27b", TRITON_ATTN)
    assert p.ok and len(p.groups) == 7
    # 52 SW + 10 full; 52 >= 1.5 x 10 so groups hold 10 layers: 6 SW groups + 1 full,
    # 6 x 10 - 52 = 8 padding slots
    assert p.warnings == ("Add 8 padding layers, may waste at most 15.38% KV cache memory",)
    kinds = [g.kind for g in p.groups]
    assert kinds == ["sliding_window"] * 6 + ["full_attention"]
    assert [len(g.layer_names) for g in p.groups] == [9, 9, 9, 9, 8, 8, 10]
    assert [g.padding_layers for g in p.groups] == [1, 1, 1, 1, 2, 2, 0]
    # round robin over the SW layer list [0, 1, 2, 3, 4, 6, 7, ...]: every 6th
    assert p.groups[0].layers == "0, 7, 14, 21, 28, 36, 43, 50, 57"
    assert p.groups[6].layers == "5, 11, 17, 23, 29, 35, 41, 47, 53, 59"
    # page: 16 KV heads x 16 x (128 + 128) x 2 B = 131072; the widest group has 10 layers
    assert {g.page_size_bytes for g in p.groups} == {(131072,)}
    assert p.capacity is not None and p.capacity.bytes_per_block == 10 * 131072
    # SW window 1024: cdiv(1023 + 8192, 16) + 1 = 577
    assert p.groups[0].blocks_per_request == 577


def test_qwen3_next_gdn_and_full_attention_page_unification() -> None:
    p = plan("qwen3-next-80b-a3b", FLASH_ATTN)
    assert p.ok and p.block_size is not None
    # GDN state (3 x 8192 + 32 x 128 x 128) x 2 B = 1_097_728; attention 2048 B/token
    # -> 16 x ceil(1_097_728 / 32_768) = 544 tokens; Mamba padded to 544 x 2048
    assert p.block_size.block_size == 544
    hybrid = p.block_size.hybrid
    assert hybrid is not None
    assert (hybrid.mamba_page_bytes, hybrid.mamba_page_size_padded) == (1097728, 1114112)
    assert p.block_size.mamba_cache_mode == "align" and p.block_size.mamba_block_size == 544
    assert [g.kind for g in p.groups] == ["mamba", "mamba", "mamba", "full_attention"]
    assert {g.page_size_bytes for g in p.groups} == {(1114112,)}
    assert p.groups[3].layers == "3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47"
    assert [g.kernel_block_size for g in p.groups] == [544] * 4
    assert p.layout is not None and p.layout.layout == "LBNHC"  # mixed HNC: block-compact
    assert "Padding mamba page size by 1.49%" in p.info[1]
    assert p.reorder_batch_threshold == 1  # GDN builder
    assert p.cudagraph is not None and p.cudagraph.min_support_backend == "GDNAttentionBackend"
    assert p.cudagraph.resolved == "FULL_AND_PIECEWISE"


def test_qwen3_next_on_b200_flashinfer_pins_kernel_block_32() -> None:
    # the vllm#25811 case: 544-token pages; FlashInfer runs 32-token kernel blocks
    p = plan("qwen3-next-80b-a3b", FLASHINFER_SM100_GQA)
    attention = p.groups[3]
    assert (attention.manager_block_size, attention.kernel_block_size) == (544, 32)
    assert attention.virtual_blocks_per_manager_block == 17
    assert p.layout is not None and p.layout.layout == "LBHNC"


def test_deepseek_v32_sparse_mla_with_indexer() -> None:
    p = plan("deepseek-v3.2", FLASHMLA_SPARSE_SM90, tp=8)
    assert p.ok and p.grouping_path == "uniform_type" and len(p.groups) == 1
    group = p.groups[0]
    # indexer [64] and FLASHMLA_SPARSE MultipleOf(64) reject 16 -> lcm 64
    assert p.block_size is not None and p.block_size.block_size == 64
    assert p.info[0] == (
        "Setting kv cache block size to 64 for DEEPSEEK_V32_INDEXER/FLASHMLA_SPARSE backend(s)."
    )
    # MLA latent 576 x 2 B x 64 = 73728; indexer (128 + 4) x 64 = 8448
    assert group.page_size_bytes == (8448, 73728)
    assert group.bytes_per_block == 61 * (73728 + 8448)
    assert len(group.layer_names) == 122 and group.layers == "0-60"
    assert [a.backend.name for a in group.attention_groups] == [
        "DEEPSEEK_V32_INDEXER",
        "FLASHMLA_SPARSE",
    ]
    assert group.attention_groups[1].num_q_heads == 16  # 128 heads / TP 8
    assert group.kernel_block_size == 64
    assert p.layout is not None and p.layout.layout == "LBNHC"
    assert p.reorder_batch_threshold == 256  # the indexer opts out (None)


def test_deepseek_v32_fp8_ds_mla_page() -> None:
    sparse = FLASHMLA_SPARSE_SM90.model_copy(update={"canonical_kv_cache_dtype": "fp8_ds_mla"})
    p = plan("deepseek-v3.2", sparse, kv_cache_dtype="fp8")
    assert p.groups[0].page_size_bytes == (8448, 656 * 64)


def test_deepseek_v3_manager_128_splits_into_flashmla_64() -> None:
    p = plan("deepseek-v3", FLASHMLA, block_size=128)
    group = p.groups[0]
    assert (group.manager_block_size, group.kernel_block_size) == (128, 64)
    assert group.virtual_blocks_per_manager_block == 2
    assert p.block_size is not None and p.block_size.user_specified
    assert p.info == ("Using LBNHC KV cache layout.",)  # no 'Setting ...' log for a user size


def test_jamba_mamba_padding() -> None:
    p = plan("jamba-v0.1", FLASH_ATTN)
    # Mamba-1: (3 x 8192 + 8192 x 16) x 2 B = 311_296; attention 8 x 256 x 2 = 4096 B/token
    # 16 x ceil(311_296 / 65_536) = 80 tokens; 80 x 4096 = 327_680; padding 5.26 %
    assert p.block_size is not None and p.block_size.block_size == 80
    assert p.info[:2] == (
        "Setting attention block size to 80 tokens to ensure that attention page size is >= "
        "mamba page size.",
        "Padding mamba page size by 5.26% to ensure that mamba page size and attention page "
        "size are exactly equal.",
    )
    # 28 Mamba layers in groups of 4 (the 4 attention layers): 7 + 1 groups
    assert [g.kind for g in p.groups] == ["mamba"] * 7 + ["full_attention"]
    assert p.groups[0].layers == "0, 8, 16, 24"
    assert p.groups[7].layers == "4, 12, 20, 28"
    assert {g.page_size_bytes for g in p.groups} == {(327680,)}
    # align mode: a Mamba group needs 2 blocks per request
    assert p.groups[0].blocks_per_request == 2


def test_jamba_flashinfer_kernel_block_and_mamba_block_error() -> None:
    budget = 100 * 4 * 327680  # room for exactly 100 block ids
    p = plan("jamba-v0.1", FLASHINFER_SM90, device_memory_bytes=budget, gpu_memory_utilization=1.0)
    attention = p.groups[7]
    assert (attention.manager_block_size, attention.kernel_block_size) == (80, 16)
    assert p.capacity is not None and p.capacity.num_blocks == 100
    assert not p.ok
    assert p.errors[0].message == (
        "max_num_seqs (256) exceeds available Mamba cache blocks (100). Each decode sequence "
        "requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower "
        "max_num_seqs to at most 100 or increase gpu_memory_utilization."
    )


def test_llama4_scout_chunked_local_attention_downgrades_cuda_graphs() -> None:
    p = plan("llama-4-scout", FLASH_ATTN, tp=8, max_model_len=131072)
    assert [g.kind for g in p.groups] == ["chunked_local_attention"] * 3 + ["full_attention"]
    assert p.groups[3].layers == "3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47"
    # chunk 8192: cdiv(min(8192 + 8192, 131072), 16) = 1024 blocks
    assert p.groups[0].blocks_per_request == 1024
    chunked = p.groups[0].attention_groups[0]
    assert chunked.backend.class_name == "ChunkedLocalAttention_8192_FlashAttentionBackend"
    assert chunked.cudagraph_support == "NEVER"
    assert p.cudagraph is not None and p.cudagraph.resolved == "PIECEWISE"
    assert p.warnings == (
        "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with "
        "ChunkedLocalAttention_8192_FlashAttentionBackend backend (support: "
        "AttentionCGSupport.NEVER); setting cudagraph_mode=PIECEWISE because attention is "
        "compiled piecewise",
    )
    # page with 1 KV head per rank (8 heads / TP 8): 16 x 256 x 2 B
    assert {g.page_size_bytes for g in p.groups} == {(8192,)}


def test_mixed_backends_with_disjoint_layouts_fail() -> None:
    def choose(layer: LayerFacts) -> BackendKVFacts:
        return FLEX_ATTENTION if layer.sliding_window else FLASHINFER_SM100

    p = plan_model(load_model("gpt-oss-20b"), choose, (KVOptions(**SCENARIO)).for_engine(load_catalog().engine()))  # type: ignore[arg-type]
    assert not p.ok and p.errors[0].stage == "layout"
    assert p.errors[0].message == (
        "No KV cache layout satisfies every supported set: [['LBNHC'], ['LBHNC', 'BLHNC']]."
    )


def test_kernel_block_failure_is_reported() -> None:
    p = plan("deepseek-v3", FLASHMLA, block_size=24)
    assert not p.ok and p.errors[0].stage == "kernel_block_size"
    assert p.errors[0].message == "No common block size for 24 (FLASHMLA: [64])."
    # the groups are still reported, with the failing one marked
    assert p.groups[0].kernel_block_size is None
    assert p.groups[0].kernel_block_error == p.errors[0].message
    assert p.cudagraph is None and p.capacity is None


def test_per_layer_backends_form_attention_groups() -> None:
    def choose(layer: LayerFacts) -> BackendKVFacts:
        return TRITON_ATTN if layer.sliding_window else FLASH_ATTN

    p = plan_model(load_model("gemma-2-9b"), choose, (KVOptions(**SCENARIO)).for_engine(load_catalog().engine()))  # type: ignore[arg-type]
    assert [a.backend.name for g in p.groups for a in g.attention_groups] == [
        "TRITON_ATTN",
        "FLASH_ATTN",
    ]


def test_uniform_llama_fp8_tp2() -> None:
    p = plan("llama-3.1-8b", FLASH_ATTN, tp=2, kv_cache_dtype="fp8")
    (group,) = p.groups
    assert group.page_size_bytes == (4 * 16 * 256,)
    assert group.bytes_per_token == 32 * 4 * 256
    assert p.grouping_path == "uniform_spec"


def test_missing_max_model_len_is_an_input_error() -> None:
    model = load_model("llama-3.1-8b").model_copy(update={"max_position_embeddings": None})
    with pytest.raises(InputError, match="max_position_embeddings"):
        plan_model(model, every(FLASH_ATTN), (KVOptions(**SCENARIO)).for_engine(load_catalog().engine()))  # type: ignore[arg-type]


def test_plan_is_deterministic_and_serialisable() -> None:
    a = plan("gemma-3-27b", FLASH_ATTN)
    b = plan("gemma-3-27b", FLASH_ATTN)
    assert a == b
    assert ModelPlan.model_validate_json(a.model_dump_json()) == a
