"""The deployment knobs the KV planner reads (a subset of vLLM's CLI)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from selector.catalog import EngineData
from selector.kv.backend_facts import BackendKVFacts, KVLayout, wired_backends
from selector.kv.cudagraph import CudaGraphMode
from selector.schema.engine import HybridAlignmentRules, KVSpecRules

__all__ = ["KVOptions"]


class KVOptions(BaseModel):
    """Inputs besides the model and the per-layer backends. The values vLLM defaults by
    release and device (the CUDA-graph mode, the batch limits, the memory fraction) have
    no default here: the caller states them (a deployment: from its resolved target,
    :func:`selector.inputs.config.resolve_target`, which reads the engine's ``defaults.yaml``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kv_cache_dtype: str = "auto"
    """``--kv-cache-dtype``."""
    block_size: int | None = Field(default=None, gt=0)
    """``--block-size`` (None: vLLM picks it from the backends)."""
    enable_prefix_caching: bool | None = None
    """Hybrid models use Mamba ``align`` cache mode when on; None: vLLM's default (on,
    but for hybrid models the release's ``hybrid_alignment.hybrid_prefix_caching``)."""
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    mamba_prefill_checkpoint_alignment: int | None = Field(default=None, gt=0)
    """LCM of the Mamba layers' prefill checkpoint alignments in align mode (a Qwen GDN
    layer with the FlashInfer prefill kernel declares 64:
    :func:`selector.kv.checkpoint.prefill_checkpoint_alignment`, which the pipeline
    calls with the deployment's device); None: none declared."""
    state_spec_checkpoint_alignment: int | None = Field(default=None, gt=0)
    """The checkpoint alignment the state layers stamp on their own specs
    (:func:`selector.kv.checkpoint.spec_checkpoint_alignment`: GLM-5.3's FlashKDA, 16);
    None: none."""
    hybrid_alignment: HybridAlignmentRules | None = None
    """The steps of the release's hybrid block-size alignment (the profile's
    ``hybrid_alignment``); None: not stated yet (:meth:`for_engine`; the planner refuses
    to plan without it)."""
    kv_spec: KVSpecRules | None = None
    """The release's block-size preference and spec steps (the profile's ``kv_spec``);
    None: every backend decides (the newest releases')."""
    num_speculative_tokens: int = Field(default=0, ge=0)
    cudagraph_mode: CudaGraphMode | None
    """None or ``NONE``: no CUDA graphs."""
    cudagraph_override: str | None = None
    """vLLM's log line where the kind of model changed the requested mode before any
    backend was read (an encoder-decoder's FULL_DECODE_ONLY: ``defaults.yaml``
    ``cudagraph_model_overrides``); None: the mode is the deployment's or the default."""
    vllm_compile: bool = True
    """Compilation mode is ``VLLM_COMPILE`` (the default)."""
    attention_in_splitting_ops: bool = True
    """Attention ops are piecewise split points (the default)."""
    inductor_graph_partition: bool = False
    piecewise_capture_available: bool = True
    kv_cache_layout: str | None = None
    """``VLLM_KV_CACHE_LAYOUT`` (NHD/HND accepted as aliases)."""
    connector_layout: str | None = None
    """A KV connector's preferred layout, if one is configured."""
    layout_aliases: dict[str, KVLayout] = Field(default_factory=dict)
    """The legacy layout names vLLM accepts (``NHD`` -> ``LBNHC``; ``kv-layouts.yaml``),
    stated by :meth:`for_engine`."""
    default_layout_preference: tuple[KVLayout, ...] = ()
    """The layouts most preferred first when no backend declares a set
    (``kv-layouts.yaml``), stated by :meth:`for_engine`."""
    max_model_len: int | None = Field(default=None, gt=0)
    """None: the model's ``max_position_embeddings``."""
    max_num_batched_tokens: int = Field(gt=0)
    max_concurrent_batches: int = Field(default=1, gt=0)
    max_num_seqs: int = Field(gt=0)
    gpu_memory_utilization: float = Field(gt=0, le=1)
    device_memory_bytes: int | None = Field(default=None, gt=0)
    """Total device memory; None skips the token capacity."""
    reserved_bytes: int = Field(default=0, ge=0)
    """Weights, activations and other non-KV memory to subtract."""
    available_kv_bytes: int | None = None
    """KV memory from the start-up memory model (selector.memory); when set it replaces
    ``gpu_memory_utilization x device_memory_bytes - reserved_bytes``."""
    wired_backends: dict[str, BackendKVFacts] | None = None
    """The backends vLLM wires without selection, by ``wired_for`` (Mamba / GDN state,
    the sparse indexer: :func:`selector.kv.backend_facts.wired_backends`); None: not
    stated yet (:meth:`for_engine`; the planner refuses to plan without it)."""
    mamba_cache_mode: Literal["auto", "none", "align", "all"] = "auto"
    """``auto``: for hybrid models with prefix caching ``align`` (``all`` for a model with
    ``SupportsMambaPrefixCaching`` where the release's ``hybrid_alignment.all_mode``
    says so), else ``none``."""

    def for_engine(self, engine: EngineData) -> KVOptions:
        """These options with what the engine states and they do not: its wired backends,
        its hybrid block-size alignment and its KV-spec rules."""
        update: dict[str, object] = {}
        if self.wired_backends is None:
            update["wired_backends"] = wired_backends(engine)
        if self.hybrid_alignment is None:
            update["hybrid_alignment"] = engine.profile.hybrid_alignment
        if self.kv_spec is None:
            update["kv_spec"] = engine.profile.kv_spec
        if not self.layout_aliases:
            update["layout_aliases"] = dict(engine.layout_aliases)
        if not self.default_layout_preference:
            update["default_layout_preference"] = engine.default_layout_preference
        return self.model_copy(update=update) if update else self

    def engine_rules(self) -> tuple[dict[str, BackendKVFacts], HybridAlignmentRules]:
        """(the wired backends, the hybrid alignment): stated by :meth:`for_engine`;
        ValueError when not (the planner reads the release's, never a default one's)."""
        if self.wired_backends is None or self.hybrid_alignment is None:
            raise ValueError("KVOptions without the engine's wired backends and hybrid "
                             "alignment: call KVOptions.for_engine(engine) first")
        return self.wired_backends, self.hybrid_alignment

    @property
    def uniform_decode_query_len(self) -> int:
        return 1 + self.num_speculative_tokens

    @property
    def max_in_flight_tokens(self) -> int:
        return self.max_concurrent_batches * self.max_num_batched_tokens
