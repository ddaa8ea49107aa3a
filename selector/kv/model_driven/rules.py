"""The data model of ``model-driven.yaml``: the model-driven backends, the helper backends
their cache modules name, and each model family's rule (its selection, KV-cache dtype,
cache modules, refusals and grouping)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from selector.kv.backend_facts import CGSupport, KVLayout

__all__ = [
    "BackendOnGPU",
    "CacheDtypeRule",
    "DrivenBackend",
    "DrivenCache",
    "DrivenModel",
    "DrivenRecord",
    "HelperBackend",
    "ModelDrivenData",
    "SelectionRule",
]


class DrivenRecord(BaseModel):
    """Base of this package's records: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class BackendOnGPU(DrivenRecord):
    """What a backend's layers are on GPUs of one major capability where the model builds
    another layer class for it (DeepSeek-V4.1's FlashInfer name on SM12x)."""

    layer_class: str | None = None
    packed_layout: bool | None = None
    source: str = ""


class DrivenBackend(DrivenRecord):
    """One model-driven member of the release's ``AttentionBackendEnum``."""

    class_path: str
    """The enum member's value (``vllm/v1/attention/backends/registry.py``)."""
    platform: Literal["cuda", "rocm"]
    """The platform whose model code builds it (a ROCm twin is data for the ROCm platform)."""
    models: tuple[str, ...]
    """The architectures whose layers select it."""
    kernel_block_sizes: tuple[int, ...] = ()
    """``get_supported_kernel_block_sizes()`` (empty: not importable on the reference host)."""
    kernel_block_size: str = ""
    """An expression over ``cc_major`` where the class answers per GPU (DeepSeek-V4.1's
    FlashMLA: 64 on SM90, 128 elsewhere); empty: the first of ``kernel_block_sizes``."""
    cudagraph_support: CGSupport | None = None
    """The metadata builder's ``_cudagraph_support``."""
    reorder_batch_threshold: int | None = None
    kv_cache_dtypes: tuple[str, ...] = ()
    layer_class: str = ""
    """The attention layer class the model builds with it (its modules' class name)."""
    packed_layout: bool = False
    """The layer class stores the ``fp8_ds_mla`` packed layout (``use_fp8_ds_mla_layout``)."""
    packed_cache_dtype: str = "fp8_ds_mla"
    """The packed record ``auto`` / ``fp8`` resolves to (the layer's
    ``packed_kv_cache_dtype``: DeepSeek-V4.1's mega attention takes ``nvfp4_ds_mla``)."""
    on_cc_major: dict[int, BackendOnGPU] = Field(default_factory=dict)
    """The layer class built on GPUs of that major capability, where it is another."""
    source: str = ""

    def on_gpu(self, cc_major: int) -> DrivenBackend:
        """The backend as the layers are built on a GPU of ``cc_major``."""
        override = self.on_cc_major.get(cc_major)
        if override is None:
            return self
        changes = {k: v for k, v in (("layer_class", override.layer_class),
                                     ("packed_layout", override.packed_layout)) if v is not None}
        return self.model_copy(update=changes)


class SelectionRule(DrivenRecord):
    """One step of the model's own backend choice; the first whose ``when`` holds decides.
    ``when`` reads ``requested`` (the ``--attention-backend`` name, ``none`` when not
    given), ``cc_major``, ``cc``, ``cc_minor``, ``tp_size``, ``pcp_size``, the rule's
    ``probes`` and the config's fields (its scalars, its lists of integers and the rule's
    ``fields``). As a layer refusal (``layer_refusals``, ``spec_refusals``), ``when`` reads
    the layer's environment (``layer_refusal``)."""

    when: str | bool = True
    backend: str | None = None
    """The backend the layers then name; null with ``refuse``."""
    refuse: str | None = None
    """vLLM's error, word for word (``{requested}`` is the name given; any name of the
    environment may be filled in, e.g. ``{cc_major}``)."""
    exc_type: str = "ValueError"
    code: Literal["MD001", "MD002", "MD004", "MD005"] = "MD001"
    """The refusal's code: MD001 (of the ``--attention-backend`` given), MD002 (of the
    KV-cache dtype), MD004 (of the checkpoint or the GPU, whatever is given) or MD005 (of
    a config field the layer code cannot build)."""
    note: str = ""


class CacheDtypeRule(DrivenRecord):
    """The KV-cache dtype the layer resolves (``_resolve_dsv4_kv_cache_dtype``); reads
    ``packed`` (the backend's layout), ``kv_cache_dtype`` (``--kv-cache-dtype``) and
    ``kv_fp8`` (vLLM's ``kv_cache_dtype.startswith("fp8")``) and ``cc_major``."""

    when: str | bool = True
    cache_dtype: str | None = None
    """An expression: the ``cache_dtype_str`` the specs carry."""
    element_bytes: int | None = None
    """Bytes per element of a plain KV row (null: the packed ``uint8`` layout)."""
    refuse: str | None = None
    """vLLM's error (``{kv_cache_dtype}``: the dtype given)."""
    exc_type: str = "ValueError"


class DrivenCache(DrivenRecord):
    """One KV-cache module a decoder layer registers, when ``when`` holds. Expressions
    read the config's fields (its scalars and the rule's ``fields``), ``layer_index``,
    ``layer_type`` (this layer's entry of the rule's ``layer_types_fields``),
    ``compress_ratio`` (this layer's), ``packed``, ``kv_bytes`` (the plain row's element
    bytes), ``cache_block`` (``cache_config.block_size``) and ``tp_size``."""

    name: str
    """The module's name under ``<layer_prefix>.<i>.`` (vLLM's static forward context;
    ``model.layers`` unless the rule's ``layer_prefix`` names the architecture's own)."""
    module: str
    backend: str
    """What the module's ``get_attn_backend().get_name()`` says (``selected``: the
    model-driven backend chosen)."""
    when: str | bool = True
    spec: Literal["mla", "sliding_window_mla", "full_attention", "sliding_window",
                  "circular_buffer", "none"]
    """The spec class: ``MLAAttentionSpec``, ``SlidingWindowMLASpec``, ``FullAttentionSpec``,
    ``SlidingWindowSpec``, ``CircularBufferSpec`` (vllm/v1/kv_cache_interface.py), or none."""
    block_size: str | int = "cache_block"
    num_kv_heads: str | int = 1
    head_size: str | int = 0
    head_size_v: str | int = 0
    """``head_size_v`` (0: a key-only cache, as every MLA cache)."""
    tokens_per_state: str | int = 1
    sliding_window: str | int | None = None
    dtype: str = "uint8"
    """The spec's element dtype: ``uint8``, ``float32`` or ``kv`` (the resolved row dtype)."""
    state_bytes: str | int | None = None
    """Bytes per state when packed (``state_content_bytes``); null: head_size x dtype."""
    alignment: str | int | None = None
    """``_apply_alignment_padding``: the page rounded up to this many bytes."""
    source: str = ""


class HelperBackend(DrivenRecord):
    """A backend a cache module names that is not in the enum (its builder and kernel
    sizes, as the release's classes state them)."""

    class_name: str = ""
    cudagraph_support: CGSupport
    """What the builder's ``get_cudagraph_support(vllm_config, spec)`` answers for these
    caches (recorded per layer: it may differ from the class attribute)."""
    by_selected: dict[str, CGSupport] = Field(default_factory=dict)
    """The support when the layers chose another model-driven backend (its own helper
    class, e.g. the FlashInfer path's sliding-window backend)."""
    kernel_block_sizes: tuple[int | str, ...] = ()
    kernel_block_states: tuple[int, ...] = ()
    """Exact kernel block sizes in states of the cache's ``tokens_per_state`` tokens
    (``Glm5NextIndexerBackend``: ``index_kpool`` times DeepGEMM's paged-MQA page sizes)."""
    supported_layouts: tuple[KVLayout, ...] | None = None
    """``supported_kv_cache_layouts()`` (None: AttentionBackend's, any)."""
    enum_member: bool = False
    """The release's ``AttentionBackendEnum`` has the name (a valid ``--attention-backend``
    though no model-driven suffix names it, e.g. ``STEP5_DSA``)."""
    source: str = ""

    def support_with(self, selected: str) -> CGSupport:
        return self.by_selected.get(selected, self.cudagraph_support)


class DrivenModel(DrivenRecord):
    """The rule of one model family whose layers choose their backend."""

    architectures: tuple[str, ...]
    source: str
    compress_ratios_field: str = ""
    """The config's per-layer list of compression ratios (empty: none, every ratio 0)."""
    fields: dict[str, str] = Field(default_factory=dict)
    """Config values the expressions read by name: a dotted path into the (text) config,
    null when absent (a section: true when present)."""
    config_defaults: dict[str, Any] = Field(default_factory=dict)
    """What the layer code takes for a value the config omits, by the name the expressions
    read: a config field's ``getattr`` default, also for a field given null or empty
    (vLLM's ``getattr(config, name, None) or ()``: DeepSeek-V4.1's ``kv_source_layer_ids``),
    or a ``fields`` entry's where its path is absent but its section is there (the config
    class's default: Step5's ``Step5SparseConfig``)."""
    layer_types_fields: tuple[str, ...] = ()
    """The config's per-layer type lists, the first present wins (``layer_type`` in the
    expressions: Dots3Note's ``layer_types``, Step5's ``layer_types_with_mtp``)."""
    layer_type_default: str = "'full_attention'"
    """``layer_type`` when no list is present (an expression over ``layer_index``)."""
    layer_refusals: tuple[SelectionRule, ...] = ()
    """A layer's build refused (``layer_refusal``): the first layer, then the first rule,
    whose ``when`` holds; checked after the backend choice (``selection``) and before the
    KV-cache dtype (``cache_dtype``)."""
    spec_refusals: tuple[SelectionRule, ...] = ()
    """A layer's KV-cache spec refused (``get_kv_cache_spec``, once every layer is built)."""
    layer_values: dict[str, str] = Field(default_factory=dict)
    """Per-layer values the caches' expressions read by name, each an expression over the
    layer's environment and the values before it."""
    main_cache: str = ""
    """The cache module whose backend names a layer's backend (``layer_backends``; empty:
    ``selected`` where one of the layer's cache modules names it, else its last one's)."""
    selection: tuple[SelectionRule, ...]
    platform_first: Literal["", "sparse_mla"] = ""
    """vLLM's platform selects a backend first for a layer the model then discards
    (``sparse_mla``: the config's first sparse MLA layer, Dots3Note's
    ``DeepseekV2MLAAttention`` before it swaps in its own): that selection's refusal of the
    ``--attention-backend`` given (or of every backend) is the model's."""
    cache_dtype: tuple[CacheDtypeRule, ...]
    caches: tuple[DrivenCache, ...]
    layer_backends: dict[str, HelperBackend] = Field(default_factory=dict)
    aligned_block_size: Literal["kernel_block", "common"] = "kernel_block"
    """``update_block_size_for_backend``: the block the caches take without ``--block-size``
    (``kernel_block``: the chosen backend's one kernel block size; ``common``:
    ``_preferred_block_size_for_backends``, the smallest block every cache's backend
    accepts: the cache config's 16 when every backend's ``MultipleOf`` sizes accept it)."""
    kv_cache_layout: str = "BLHNC"
    layer_prefix: dict[str, str] = Field(default_factory=dict)
    """The decoder layers' module prefix by architecture (a wrapper builds the text model
    under its own prefix, e.g. ``language_model.model.layers``); ``model.layers`` else."""
    kind_prefix: str = "model-driven"
    """How the report names these layers' kind (with each layer's compression ratio)."""
    probes: dict[str, bool] = Field(default_factory=dict)
    """Facts vLLM's layer code probes on the GPU (a kernel build's ops), by the name the
    ``selection`` reads, with the value taken when the deployment does not state it (the
    CPU reference answers without the GPU build: its value is in the test)."""
    grouping: Literal["packed", "uniform_groups", "uniform_groups_padded"] = "packed"
    """How the release groups these caches: ``uniform_groups_padded`` (0.25.1-0.26.0:
    ``group_and_unify_kv_cache_specs`` + ``_get_kv_cache_groups_uniform_groups``, each
    sliding-window page padded to the nearest larger MLA page), ``uniform_groups``
    (0.27.0-0.28.0: the same without the padding) or ``packed`` (0.29.0+:
    ``_get_packed_kv_cache_groups``)."""


class ModelDrivenData(DrivenRecord):
    engine: str
    source: str = ""
    backends: dict[str, DrivenBackend]
    models: dict[str, DrivenModel]
    layer_backends: dict[str, HelperBackend] = Field(default_factory=dict)
    """Backends a model's own layers wire that are not enum members, for layers the
    ordinary planner keeps (a family's ``attention.own_sparse``: MiniMax-M3's index-key
    cache)."""

    def models_choosing(self, name: str) -> tuple[str, ...]:
        """The architectures whose own layer code chooses backend ``name`` (an enum member
        of ``backends``, or one a rule's ``layer_backends`` marks ``enum_member``)."""
        if name in self.backends:
            return self.backends[name].models
        return tuple(a for rule in self.models.values() for a in rule.architectures
                     if name in rule.layer_backends and rule.layer_backends[name].enum_member)

    def rule_for(self, architecture: str) -> DrivenModel | None:
        for rule in self.models.values():
            if architecture in rule.architectures:
                return rule
        return None
