"""Stub backend facts for the KV tests, written from reference section 3 (not
from the solver): kernel block sizes, layouts, CUDA-graph support, thresholds."""

from __future__ import annotations

from selector.kv import BackendKVFacts, MultipleOf

M16 = MultipleOf(multiple_of=16)
M64 = MultipleOf(multiple_of=64)

FLASH_ATTN = BackendKVFacts(
    name="FLASH_ATTN",
    class_name="FlashAttentionBackend",
    kernel_block_sizes=(M16,),
    cudagraph_support="ALWAYS",
    fa_version=3,
)
FLASH_ATTN_FA2 = FLASH_ATTN.model_copy(
    update={"cudagraph_support": "UNIFORM_BATCH", "fa_version": 2}
)
TRITON_ATTN = BackendKVFacts(
    name="TRITON_ATTN",
    class_name="TritonAttentionBackend",
    kernel_block_sizes=(M16,),
    cudagraph_support="ALWAYS",
)
FLASHINFER_SM90 = BackendKVFacts(
    name="FLASHINFER",
    class_name="FlashInferBackend",
    kernel_block_sizes=(16, 32, 64),
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=1,
    packing="flashinfer_nvfp4",
)
FLASHINFER_SM100 = FLASHINFER_SM90.model_copy(update={"supported_layouts": ("LBHNC", "BLHNC")})
FLASHINFER_SM100_GQA = FLASHINFER_SM100.model_copy(
    update={"kernel_block_sizes": (16, 32, 64, 128, 256, 512, 1024)}
)
FLEX_ATTENTION = BackendKVFacts(
    name="FLEX_ATTENTION",
    class_name="FlexAttentionBackend",
    kernel_block_sizes=(M16,),
    supported_layouts=("LBNHC",),
    cudagraph_support="ALWAYS",
)
FLASHMLA = BackendKVFacts(
    name="FLASHMLA",
    class_name="FlashMLABackend",
    kernel_block_sizes=(64,),
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=128,
    is_mla=True,
)
CUTLASS_MLA = BackendKVFacts(
    name="CUTLASS_MLA",
    class_name="CutlassMLABackend",
    kernel_block_sizes=(128,),
    cudagraph_support="UNIFORM_SINGLE_TOKEN_DECODE",
    reorder_batch_threshold=1,
    is_mla=True,
)
FLASHMLA_SPARSE_SM90 = BackendKVFacts(
    name="FLASHMLA_SPARSE",
    class_name="FlashMLASparseBackend",
    kernel_block_sizes=(M64,),
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=256,
    is_mla=True,
    canonical_kv_cache_dtype=None,
)
TURBOQUANT = BackendKVFacts(
    name="TURBOQUANT",
    class_name="TurboQuantAttentionBackend",
    kernel_block_sizes=(16, 32, 64, 128),
    supported_layouts=("LBNHC",),
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=1,
)
DEEPSEEK_V32_INDEXER = BackendKVFacts(
    name="DEEPSEEK_V32_INDEXER",
    class_name="DeepseekV32IndexerBackend",
    kernel_block_sizes=(64,),
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=None,
)
