"""``plan_model``: the whole-model KV negotiation, step by step as vLLM 0.33.0
starts up. A step vLLM would fail is recorded with its exact text and the plan
stops there (``ok`` is False)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from selector.errors import InputError
from selector.kv.backend_facts import BackendKVFacts
from selector.kv.capacity import Capacity, capacity
from selector.kv.cudagraph import CudaGraphResolution, minimum_support, resolve_cudagraph_mode
from selector.kv.errors import EngineStartupError
from selector.kv.group_plan import plan_groups
from selector.kv.grouping import GroupingResult, group_layers
from selector.kv.layer_specs import (
    CacheEntry,
    SpecContext,
    build_spec,
    customize,
    indexer_spec,
    indexer_tail_spec,
)
from selector.kv.layout import (
    LayoutResolution,
    is_block_outermost,
    resolve_layout,
    supported_layouts,
    validate_layout,
)
from selector.kv.manager_block import negotiate_block_size
from selector.kv.options import KVOptions
from selector.kv.plan_types import BlockSizeDecision, GroupPlan, ModelPlan, PlanError
from selector.kv.specs import AnySpec
from selector.models.facts import LayerFacts, ModelFacts

__all__ = ["BackendChooser", "effective_backend", "plan_model"]

BackendChooser = Callable[[LayerFacts], BackendKVFacts]
"""The core solver's per-layer answer (called for attention and MLA layers only)."""

_Module = tuple[LayerFacts, BackendKVFacts, str, int]
"""(layer, backend, role, module): ``module`` numbers a decoder layer's attention modules."""


def effective_backend(layer: LayerFacts, chosen: BackendKVFacts) -> BackendKVFacts:
    """The backend class vLLM actually wires for a layer: chunked local attention
    wraps the chosen one in ``ChunkedLocalAttention_{chunk}_{Class}``, whose
    builder never supports CUDA graphs."""
    if layer.attention_chunk_size and layer.kind == "attention":
        wrapped = f"ChunkedLocalAttention_{layer.attention_chunk_size}_{chosen.class_name}"
        return chosen.model_copy(update={"class_name": wrapped, "cudagraph_support": "NEVER"})
    return chosen


def _modules(model: ModelFacts, choose: BackendChooser, options: KVOptions) -> list[_Module]:
    """(layer, backend, role, module) per KV-holding module, in registration order."""
    out: list[_Module] = []
    # the state backend per mixer type (MambaBase.get_attn_backend), the indexer's
    wired, _ = options.engine_rules()
    for layer in model.layers:
        if layer.kind == "none":
            continue
        if layer.is_ssm:
            out.append((layer, wired[layer.ssm.ssm_type if layer.ssm else "gdn"], "state", 0))
            continue
        if layer.is_sparse:
            assert layer.indexer is not None
            out.append((layer, _wired(wired, layer.indexer.backend or "sparse_indexer"),
                        "indexer", 0))
            if layer.indexer.tail is not None:  # registered after the index-key cache
                out.append((layer, _wired(wired, layer.indexer.tail.backend), "indexer_tail", 0))
        if layer.conv_cache is not None:  # registered before the layer's attention
            out.append((layer.conv_view(), _wired(wired, layer.conv_cache.backend), "conv", 0))
        backend = effective_backend(
            layer, _wired(wired, layer.own_backend) if layer.own_backend else choose(layer))
        out.extend((layer, backend, "attention", k) for k in range(layer.attentions))
        if layer.cross_attention:
            cross = layer.cross_view()
            out.append((cross, effective_backend(cross, choose(cross)), "cross", 0))
        if layer.has_parallel_state:
            state = layer.state_view()
            assert state.ssm is not None
            out.append((state, wired[state.ssm.ssm_type], "parallel_state", 0))
    return out


def _wired(wired: dict[str, BackendKVFacts], name: str) -> BackendKVFacts:
    """The backend a layer's own code wires (the engine's, or a model-driven one the
    pipeline added: ``selector.kv.model_driven.own_backend_facts``)."""
    if name not in wired:
        raise InputError(f"the release states no facts of backend {name}, which the model's "
                         "layers build (schemas/engines/*/model-driven.yaml)")
    return wired[name]


def _spec_context(
    model: ModelFacts, decision: BlockSizeDecision, options: KVOptions, max_model_len: int
) -> SpecContext:
    hybrid = decision.hybrid
    return SpecContext(
        model_dtype=model.runtime_dtype,
        kv_cache_dtype=options.kv_cache_dtype,
        block_size=decision.block_size,
        mamba_block_size=decision.mamba_block_size or max_model_len,
        mamba_page_size_padded=hybrid.mamba_page_size_padded if hybrid else None,
        mamba_cache_mode=("align" if decision.mamba_cache_mode == "align"
                          else "all" if decision.mamba_cache_mode == "all" else "none"),
        mamba_cache_dtype=options.mamba_cache_dtype,
        mamba_ssm_cache_dtype=options.mamba_ssm_cache_dtype,
        num_speculative_tokens=options.num_speculative_tokens,
        # a layer that exports checkpoints keeps its offsets on the prefix-cache grid:
        # the Mamba block (get_mamba_prefill_checkpoint_grid, abstract.py:115-129)
        prefill_checkpoint_alignment=(
            decision.mamba_block_size if decision.prefill_checkpoints else None
        ),
        spec_checkpoint_alignment=options.state_spec_checkpoint_alignment,
        tp_size=model.tp_size,
    )


def _entry_name(layer: LayerFacts, role: str, module: int) -> str:
    """The cache's layer name: ``layers.I`` (``.self_attn.K`` for each of a decoder layer's
    several attention modules, ``.mixer`` for a parallel state, ``.cross_attn``)."""
    base = f"layers.{layer.index}"
    if role == "conv":
        return f"{base}.conv"
    if role == "parallel_state":
        return f"{base}.mixer"
    if role == "cross":
        return f"{base}.cross_attn"
    if layer.attentions > 1:
        return f"{base}.self_attn.{module}"
    return base


def _entry(layer: LayerFacts, backend: BackendKVFacts, role: str, module: int,
           ctx: SpecContext) -> CacheEntry:
    spec: AnySpec
    if layer.kv_cache_dtype is not None:
        ctx = ctx.model_copy(update={"kv_cache_dtype": layer.kv_cache_dtype})
    if layer.own_block_size is not None:
        ctx = ctx.model_copy(update={"block_size": layer.own_block_size})
    if role in ("indexer", "indexer_tail"):
        tail = role == "indexer_tail"
        spec = customize(indexer_tail_spec(layer, ctx) if tail else indexer_spec(layer, ctx),
                         backend)
        return CacheEntry(
            name=f"layers.{layer.index}.indexer" + (".tail" if tail else ""),
            layer_index=layer.index,
            role="indexer_tail" if tail else "indexer",
            backend=backend,
            spec=spec,
            num_q_heads=layer.num_q_heads,
        )
    spec = build_spec(layer, backend, ctx)
    return CacheEntry(
        name=_entry_name(layer, role, module),
        layer_index=layer.index,
        role="state" if role in ("state", "parallel_state") else "attention",
        backend=backend,
        spec=spec,
        num_q_heads=layer.num_q_heads,
    )


def _max_model_len(model: ModelFacts, options: KVOptions) -> int:
    value = options.max_model_len or model.max_position_embeddings
    if value is None:
        raise InputError(
            "the model declares no max_position_embeddings",
            file=model.source,
            field="max_model_len",
            hint="pass max_model_len",
        )
    return value


@dataclass
class _Partial:
    """What is known so far; becomes the plan when a step fails or all succeed."""

    model: ModelFacts
    options: KVOptions
    decision: BlockSizeDecision | None = None
    entries: tuple[CacheEntry, ...] = ()
    layout: LayoutResolution | None = None
    grouping: GroupingResult | None = None
    groups: tuple[GroupPlan, ...] = ()
    errors: list[PlanError] = field(default_factory=list)

    def fail(self, exc: EngineStartupError, stage: str) -> ModelPlan:
        self.errors.append(
            PlanError(stage=exc.stage or stage, exc_type=exc.exc_type, message=exc.message)
        )
        return self.build()

    def build(
        self,
        cudagraph: CudaGraphResolution | None = None,
        capacity_: Capacity | None = None,
        reorder: int | None = None,
    ) -> ModelPlan:
        info = list(self.decision.messages) if self.decision else []
        warnings: list[str] = []
        if self.layout is not None:
            info.append(self.layout.info)
            warnings.extend(self.layout.warnings)
        if self.grouping is not None:
            warnings.extend(self.grouping.warnings)
        if cudagraph is not None:
            warnings.extend(cudagraph.warnings)
        return ModelPlan(
            model=self.model.name,
            tp_size=self.model.tp_size,
            kv_cache_dtype=self.options.kv_cache_dtype,
            ok=not self.errors,
            errors=tuple(self.errors),
            warnings=tuple(warnings),
            info=tuple(info),
            block_size=self.decision,
            layout=self.layout,
            grouping_path=self.grouping.path if self.grouping else None,
            groups=self.groups,
            reorder_batch_threshold=reorder,
            cudagraph=cudagraph,
            capacity=capacity_,
            entries=self.entries,
        )


def _layout_and_groups(part: _Partial) -> None:
    options = part.options
    cached = [e for e in part.entries if e.spec.kind != "encoder_only_attention"]
    distinct = {(e.backend.name, e.backend.class_name): e.backend for e in part.entries}
    supported = supported_layouts([b.supported_layouts for b in distinct.values()],
                                  options.default_layout_preference)
    part.layout = resolve_layout(
        supported,
        {e.spec.hnc_shape for e in cached},
        requested=options.kv_cache_layout,
        connector=options.connector_layout,
        aliases=options.layout_aliases,
    )
    specs = {e.name: e.spec for e in cached}
    layout = part.layout.layout
    part.grouping = group_layers(specs, block_outermost=is_block_outermost(layout))
    unified_pages = {spec.page_size_bytes for _, spec in part.grouping.unified_specs}
    validate_layout(layout, unified_pages, len(part.grouping.groups))


def _cudagraph(part: _Partial) -> CudaGraphResolution:
    options = part.options
    support, backend = minimum_support(
        [
            (a.cudagraph_support, a.backend.class_name)
            for g in part.groups
            for a in g.attention_groups
        ]
    )
    resolution = resolve_cudagraph_mode(
        options.cudagraph_mode,
        support,
        backend,
        uniform_decode_query_len=options.uniform_decode_query_len,
        vllm_compile=options.vllm_compile,
        attention_in_splitting_ops=options.attention_in_splitting_ops,
        inductor_graph_partition=options.inductor_graph_partition,
        piecewise_capture_available=options.piecewise_capture_available,
    )
    if options.cudagraph_override is None:
        return resolution
    return resolution.model_copy(
        update={"warnings": (options.cudagraph_override, *resolution.warnings)})


def _mamba_blocks_error(part: _Partial, cg: CudaGraphResolution, cap: Capacity) -> None:
    """Resolution step 7: full graphs need one Mamba block per decode sequence."""
    seqs = part.options.max_num_seqs
    full = cg.resolved in ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
    if full and part.model.is_hybrid and cap.num_blocks is not None and seqs > cap.num_blocks:
        part.errors.append(
            PlanError(
                stage="cudagraph",
                exc_type="ValueError",
                message=(
                    f"max_num_seqs ({seqs}) exceeds available Mamba cache blocks "
                    f"({cap.num_blocks}). Each decode sequence requires one Mamba cache block, "
                    "so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most "
                    f"{cap.num_blocks} or increase gpu_memory_utilization."
                ),
            )
        )


def _available_bytes(options: KVOptions) -> int | None:
    if options.available_kv_bytes is not None:
        return options.available_kv_bytes
    if options.device_memory_bytes is None:
        return None
    budget = int(options.gpu_memory_utilization * options.device_memory_bytes)
    return budget - options.reserved_bytes


def plan_model(
    model: ModelFacts, backend_for_layer: BackendChooser, options: KVOptions
) -> ModelPlan:
    """Plan the KV cache of ``model`` (already sharded with ``shard_model``) given each
    attention layer's backend. Pure and deterministic; user-input problems raise
    :class:`InputError`, engine refusals are returned in ``ModelPlan.errors``."""
    max_model_len = _max_model_len(model, options)
    part = _Partial(model=model, options=options)
    modules = _modules(model, backend_for_layer, options)
    try:
        part.decision = negotiate_block_size(
            model, [(layer, backend) for layer, backend, _, _ in modules], options, max_model_len
        )
    except EngineStartupError as exc:
        return part.fail(exc, "block_size")
    ctx = _spec_context(model, part.decision, options, max_model_len)
    part.entries = tuple(_entry(layer, backend, role, module, ctx)
                         for layer, backend, role, module in modules)
    try:
        _layout_and_groups(part)
        assert part.grouping is not None
        encoder_only = [e for e in part.entries if e.spec.kind == "encoder_only_attention"]
        by_name = {e.name: e for e in part.entries}
        part.groups = plan_groups(part.grouping, encoder_only, by_name, max_model_len, options)
    except EngineStartupError as exc:
        return part.fail(exc, "grouping")
    kernel_errors = [g.kernel_block_error for g in part.groups if g.kernel_block_error]
    if kernel_errors:
        part.errors.append(
            PlanError(stage="kernel_block_size", exc_type="ValueError", message=kernel_errors[0])
        )
        return part.build()
    thresholds = [
        a.reorder_batch_threshold
        for g in part.groups
        for a in g.attention_groups
        if a.reorder_batch_threshold is not None
    ]
    cg = _cudagraph(part)
    if cg.error is not None:
        part.errors.append(PlanError(stage="cudagraph", exc_type="ValueError", message=cg.error))
    if part.grouping.path == "packed":
        # the block-outermost pool (get_kv_cache_config_from_groups: the widest group's
        # bytes rounded up to the lcm of every layer's get_block_stride_alignment, which the
        # sparse MLA backends set, kv_cache_planning.py:574-604 in 0.33.0) is not modelled
        return part.build(cg, None, min(thresholds) if thresholds else None)
    cap = capacity(
        part.grouping.groups,
        max_model_len=max_model_len,
        in_flight_tokens=options.max_in_flight_tokens,
        available_bytes=_available_bytes(options),
    )
    _mamba_blocks_error(part, cg, cap)
    return part.build(cg, cap, min(thresholds) if thresholds else None)
