"""The KV plan vLLM builds for the model-driven layers: the caches at the aligned block,
their groups and the CUDA-graph mode."""

from __future__ import annotations

from selector.kv.backend_facts import CG_LEVEL, CGSupport
from selector.kv.cudagraph import CudaGraphResolution, resolve_cudagraph_mode
from selector.kv.layer_specs import CacheEntry
from selector.kv.layout import LayoutResolution
from selector.kv.model_driven.backends import backend_facts
from selector.kv.model_driven.block import aligned_block_or_error
from selector.kv.model_driven.caches import driven_caches
from selector.kv.model_driven.grouping import packed_groups
from selector.kv.model_driven.rules import DrivenModel, ModelDrivenData
from selector.kv.model_driven.selection import driven_backend
from selector.kv.options import KVOptions
from selector.kv.plan_types import (
    AttentionGroupPlan,
    BlockSizeDecision,
    GroupPlan,
    ModelPlan,
    PlanError,
    format_ranges,
)
from selector.kv.specs import AnySpec, MambaSpec
from selector.models.facts import ModelFacts

__all__ = [
    "plan_driven",
]


def _page(spec: AnySpec) -> int:
    return spec.page_size_bytes


def plan_driven(model: ModelFacts, rule: DrivenModel, data: ModelDrivenData, backend_name: str,
                *, cache_dtype: str, element_bytes: int | None, options: KVOptions,
                cc_major: int = 0) -> ModelPlan:
    """The KV plan vLLM builds for the model-driven layers on a GPU of ``cc_major``: the
    caches at the aligned block (``update_block_size_for_backend``), the packed groups,
    the CUDA-graph mode."""
    backend = driven_backend(data, rule, backend_name, cc_major)
    config = model.config or {}
    block, block_error = aligned_block_or_error(rule, data, backend_name, config, options.block_size,
                                                element_bytes=element_bytes, cache_dtype=cache_dtype,
                                                architecture=model.architecture, tp_size=model.tp_size,
                                                cc_major=cc_major)
    entries = driven_caches(rule, config, selected=backend_name, element_bytes=element_bytes,
                            cache_dtype=cache_dtype, cache_block=block,
                            layer_class=backend.layer_class, architecture=model.architecture,
                            tp_size=model.tp_size, cc_major=cc_major)
    specs: dict[str, AnySpec] = {e.name: e.spec for e in entries if e.spec is not None}
    names, padded = packed_groups(specs, rule.grouping)
    for name, page in padded.items():
        specs[name] = specs[name].model_copy(update={"page_size_padded": page})
    by_name = {e.name: e for e in entries}
    groups: list[GroupPlan] = []
    supports: list[tuple[CGSupport, str]] = []
    cache_entries: list[CacheEntry] = []
    for entry in entries:
        if entry.spec is None:
            continue
        facts = backend_facts(entry.backend, rule, data, backend_name)
        cache_entries.append(CacheEntry(name=entry.name, layer_index=entry.layer_index,
                                        role="indexer" if "indexer" in entry.name else "attention",
                                        backend=facts, spec=specs[entry.name],
                                        num_q_heads=model.layers[entry.layer_index].num_q_heads))
    for index, layer_names in enumerate(names):
        layer_specs = tuple(specs[n] for n in layer_names)
        by_backend: dict[str, list[str]] = {}
        for name in layer_names:
            by_backend.setdefault(by_name[name].backend, []).append(name)
        attention = []
        for name, members in by_backend.items():
            facts = backend_facts(name, rule, data, backend_name)
            supports.append((facts.cudagraph_support, name))
            member_indices = [by_name[n].layer_index for n in members]
            attention.append(AttentionGroupPlan(
                backend=facts, layer_names=tuple(members), layers=format_ranges(member_indices),
                num_q_heads=model.layers[member_indices[0]].num_q_heads,
                spec=specs[members[0]], kernel_block_size=None,
                virtual_blocks_per_manager_block=None,
                cudagraph_support=facts.cudagraph_support,
                reorder_batch_threshold=facts.reorder_batch_threshold))
        support = min((a.cudagraph_support for a in attention), key=lambda lv: CG_LEVEL[lv])
        indices = tuple(by_name[n].layer_index for n in layer_names)
        block_size = layer_specs[0].block_size
        group_bytes = sum(_page(s) for s in layer_specs)
        groups.append(GroupPlan(
            index=index, kind="uniform_type", layer_names=tuple(layer_names),
            layer_indices=indices, layers=format_ranges(list(indices)), spec=None,
            layer_specs=layer_specs, uniform_type=True,
            manager_block_size=block_size, kernel_block_size=None,
            virtual_blocks_per_manager_block=None,
            page_size_bytes=tuple(sorted({_page(s) for s in layer_specs})),
            bytes_per_token=sum(s.bytes_per_token for s in layer_specs
                                if not isinstance(s, MambaSpec)),
            bytes_per_block=group_bytes, blocks_per_request=0,
            attention_groups=tuple(attention), cudagraph_support=support))
    level: CGSupport = "ALWAYS"
    lowest: str | None = None
    for support_level, name in supports:  # the first backend reaching the minimum
        if CG_LEVEL[support_level] < CG_LEVEL[level]:
            level, lowest = support_level, name
    cg: CudaGraphResolution = resolve_cudagraph_mode(
        options.cudagraph_mode, level, lowest,
        uniform_decode_query_len=options.uniform_decode_query_len,
        vllm_compile=options.vllm_compile,
        attention_in_splitting_ops=options.attention_in_splitting_ops,
        inductor_graph_partition=options.inductor_graph_partition,
        piecewise_capture_available=options.piecewise_capture_available)
    errors = (PlanError(stage="cudagraph", exc_type="ValueError", message=cg.error),) if cg.error else ()
    errors = (block_error, *errors) if block_error is not None else errors
    decision = BlockSizeDecision(block_size=block, user_specified=options.block_size is not None,
                                 preferred=block)
    layout = LayoutResolution.model_validate({
        "layout": rule.kv_cache_layout, "candidates": (rule.kv_cache_layout,),
        "supported_sets": (), "source": "default",
        "info": f"KV-cache layout {rule.kv_cache_layout} (vLLM's resolve_kv_cache_layout for "
                "these caches)"})
    return ModelPlan(
        model=model.name, tp_size=model.tp_size, kv_cache_dtype=cache_dtype, ok=not errors,
        errors=errors, warnings=tuple(cg.warnings), block_size=decision, layout=layout,
        grouping_path=rule.grouping, groups=tuple(groups),
        reorder_batch_threshold=backend.reorder_batch_threshold, cudagraph=cg, capacity=None,
        entries=tuple(cache_entries))
