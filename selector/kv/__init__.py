"""KV-cache negotiation as vLLM 0.33.0 does it: per-layer specs, KV-cache
groups, block sizes, layout, CUDA-graph mode and capacity."""

from selector.kv.backend_facts import (
    DEEPSEEK_V32_INDEXER,
    GDN_ATTN,
    MAMBA1_ATTN,
    BackendKVFacts,
    BlockSizeRule,
    CGSupport,
    KVLayout,
    MultipleOf,
)
from selector.kv.block_size import preferred_block_size, select_common_block_size
from selector.kv.capacity import Capacity
from selector.kv.cudagraph import CudaGraphMode, CudaGraphResolution, resolve_cudagraph_mode
from selector.kv.errors import EngineStartupError
from selector.kv.grouping import GroupingResult, KVGroup, group_layers, unify_page_sizes
from selector.kv.hybrid import HybridAlignment, align_hybrid_block_size
from selector.kv.layer_specs import CacheEntry
from selector.kv.layout import LayoutResolution, resolve_layout, supported_layouts
from selector.kv.options import KVOptions
from selector.kv.plan import BackendChooser, effective_backend, plan_model
from selector.kv.plan_types import (
    AttentionGroupPlan,
    BlockSizeDecision,
    GroupPlan,
    ModelPlan,
    PlanError,
    format_ranges,
)
from selector.kv.specs import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)

__all__ = [
    "DEEPSEEK_V32_INDEXER",
    "GDN_ATTN",
    "MAMBA1_ATTN",
    "AttentionGroupPlan",
    "BackendChooser",
    "BackendKVFacts",
    "BlockSizeDecision",
    "BlockSizeRule",
    "CGSupport",
    "CacheEntry",
    "Capacity",
    "ChunkedLocalAttentionSpec",
    "CrossAttentionSpec",
    "CudaGraphMode",
    "CudaGraphResolution",
    "EncoderOnlyAttentionSpec",
    "EngineStartupError",
    "FullAttentionSpec",
    "GroupPlan",
    "GroupingResult",
    "HybridAlignment",
    "KVCacheSpec",
    "KVGroup",
    "KVLayout",
    "KVOptions",
    "LayoutResolution",
    "MLAAttentionSpec",
    "MambaSpec",
    "ModelPlan",
    "MultipleOf",
    "PlanError",
    "SlidingWindowSpec",
    "align_hybrid_block_size",
    "effective_backend",
    "format_ranges",
    "group_layers",
    "plan_model",
    "preferred_block_size",
    "resolve_cudagraph_mode",
    "resolve_layout",
    "select_common_block_size",
    "supported_layouts",
    "unify_page_sizes",
]
