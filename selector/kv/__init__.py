"""KV-cache negotiation as vLLM 0.33.0 does it: per-layer specs, KV-cache
groups, block sizes, layout, CUDA-graph mode and capacity."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

if TYPE_CHECKING:
    from selector.kv.backend_facts import (
        BackendKVFacts,
        BlockSizeRule,
        CGSupport,
        KVLayout,
        MultipleOf,
        wired_backends,
    )
    from selector.kv.block_size import (
        preferred_block_size,
        select_common_block_size,
    )
    from selector.kv.capacity import (
        Capacity,
    )
    from selector.kv.checkpoint import (
        prefill_checkpoint_alignment,
        spec_checkpoint_alignment,
    )
    from selector.kv.cudagraph import (
        CudaGraphMode,
        CudaGraphResolution,
        resolve_cudagraph_mode,
    )
    from selector.kv.errors import (
        EngineStartupError,
    )
    from selector.kv.grouping import (
        GroupingResult,
        KVGroup,
        group_layers,
        unify_page_sizes,
    )
    from selector.kv.hybrid import (
        HybridAlignment,
        align_hybrid_block_size,
    )
    from selector.kv.layer_specs import (
        CacheEntry,
    )
    from selector.kv.layout import (
        LayoutResolution,
        resolve_layout,
        supported_layouts,
    )
    from selector.kv.model_driven import model_driven_names
    from selector.kv.options import (
        KVOptions,
    )
    from selector.kv.plan import (
        BackendChooser,
        effective_backend,
        plan_model,
    )
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
    "model_driven_names",
    "plan_model",
    "preferred_block_size",
    "prefill_checkpoint_alignment",
    "resolve_cudagraph_mode",
    "resolve_layout",
    "select_common_block_size",
    "spec_checkpoint_alignment",
    "supported_layouts",
    "unify_page_sizes",
    "wired_backends",
]

_LAZY: dict[str, str] = {
    "AttentionGroupPlan": "selector.kv.plan_types",
    "BackendChooser": "selector.kv.plan",
    "BackendKVFacts": "selector.kv.backend_facts",
    "BlockSizeDecision": "selector.kv.plan_types",
    "BlockSizeRule": "selector.kv.backend_facts",
    "CGSupport": "selector.kv.backend_facts",
    "CacheEntry": "selector.kv.layer_specs",
    "Capacity": "selector.kv.capacity",
    "ChunkedLocalAttentionSpec": "selector.kv.specs",
    "CrossAttentionSpec": "selector.kv.specs",
    "CudaGraphMode": "selector.kv.cudagraph",
    "CudaGraphResolution": "selector.kv.cudagraph",
    "EncoderOnlyAttentionSpec": "selector.kv.specs",
    "EngineStartupError": "selector.kv.errors",
    "FullAttentionSpec": "selector.kv.specs",
    "GroupPlan": "selector.kv.plan_types",
    "GroupingResult": "selector.kv.grouping",
    "HybridAlignment": "selector.kv.hybrid",
    "KVCacheSpec": "selector.kv.specs",
    "KVGroup": "selector.kv.grouping",
    "KVLayout": "selector.kv.backend_facts",
    "KVOptions": "selector.kv.options",
    "LayoutResolution": "selector.kv.layout",
    "MLAAttentionSpec": "selector.kv.specs",
    "MambaSpec": "selector.kv.specs",
    "ModelPlan": "selector.kv.plan_types",
    "MultipleOf": "selector.kv.backend_facts",
    "PlanError": "selector.kv.plan_types",
    "SlidingWindowSpec": "selector.kv.specs",
    "align_hybrid_block_size": "selector.kv.hybrid",
    "effective_backend": "selector.kv.plan",
    "format_ranges": "selector.kv.plan_types",
    "group_layers": "selector.kv.grouping",
    "model_driven_names": "selector.kv.model_driven",
    "plan_model": "selector.kv.plan",
    "preferred_block_size": "selector.kv.block_size",
    "prefill_checkpoint_alignment": "selector.kv.checkpoint",
    "resolve_cudagraph_mode": "selector.kv.cudagraph",
    "resolve_layout": "selector.kv.layout",
    "select_common_block_size": "selector.kv.block_size",
    "spec_checkpoint_alignment": "selector.kv.checkpoint",
    "supported_layouts": "selector.kv.layout",
    "unify_page_sizes": "selector.kv.grouping",
    "wired_backends": "selector.kv.backend_facts",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
