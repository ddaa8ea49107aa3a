"""Model families as data: ``schemas/models/families.yaml`` (how vLLM builds
each family's layers) and the architecture -> family index built from it and
from the engines' extracted model registries."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from selector.models.facts import BuildCheck
from selector.models.presets import preset_dir, read_preset_yaml
from selector.schema.backend import PrefillCheckpointRule

__all__ = [
    "GENERIC",
    "AttentionRules",
    "ConfigRefusal",
    "FFNSizing",
    "Family",
    "LanguageModelRule",
    "MixerRules",
    "SSMRules",
    "VersionRule",
    "VersionWhen",
    "VisionRules",
    "WeightRules",
    "causal_lm_architecture",
    "families",
    "family_for",
    "kv_heads_fields",
    "mapped_modules",
    "unmapped_reason",
]

GENERIC = "generic"
"""The family of a supported architecture without a mapping."""

MixerName = Literal[
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
    "mamba",
    "short_conv",
    "cross_attention",
    "none",
]
RuleName = Literal[
    "uniform",
    "alternating",
    "qwen_window",
    "interval",
    "period_offset",
    "period_middle",
    "char_pattern",
    "list_pattern",
    "llama4",
    "block_configs",
    "index_list",
    "state_only",
    "repeat",
]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MixerRules(_Strict):
    """Which token mixer each layer has (see the header of families.yaml)."""

    rule: RuleName
    field: str | None = None
    period_field: str | None = None
    period: int = 2
    offset_field: str | None = None
    offset: int = 0
    interval: int = 4
    interval_tail: bool = False
    listed: MixerName = "full_attention"
    """``index_list``: the mixer of the listed layers (``other`` elsewhere)."""
    index_base: int = 0
    """``index_list``: the number of the first layer in the list (KimiLinear's are 1-based)."""
    """``interval``: the layers after the last whole interval are full attention too
    (BailingMoeV3's ``_is_kda_layer``)."""
    other: MixerName = "full_attention"
    chars: dict[str, MixerName] = Field(default_factory=dict)
    values: dict[str, MixerName] = Field(default_factory=dict)
    layer_types: Literal["use", "ignore"] = "use"
    layer_type_values: dict[str, MixerName] = Field(default_factory=dict)
    """``layer_types`` entries of the family's own beyond ``LAYER_TYPE_TOKENS`` (Dory's
    ``mlp``: a block without attention)."""
    refuse_mixed: str | None = None
    """vLLM's start-up error when the config's layers mix sliding and full
    attention (``{max_window_layers}`` and ``{num_hidden_layers}`` are filled in)."""
    unit: list[MixerName] = Field(default_factory=list)
    """``repeat``: the layers each config layer becomes (Cosmos3-Edge's dense layer is a
    Nemotron-H attention layer and an MLP layer: ``[full_attention, none]``)."""
    fallback: MixerRules | None = None
    """The rule when the config lacks this rule's ``field`` (NemotronHConfig of
    transformers 5 writes ``layers_block_type``, not ``hybrid_override_pattern``)."""
    replace: dict[MixerName, MixerName] = Field(default_factory=dict)
    """Mixers the family's model class builds as another: {mixer: what it builds}
    (Lfm2BidirectionalModel's conv layers are a stateless bidirectional convolution:
    ``{short_conv: none}``)."""


class LoopRules(_Strict):
    """The decoder stack runs ``count`` times (config field ``count_field``); every loop
    after the first has its own attention caches, layer ``k * L + i``, with a sliding
    window of ``window`` tokens (``window_field``: IQuest-LoopCoder), or, without one, the
    same caches as the first loop's (Ouro)."""

    count_field: str
    count: int
    window_field: str | None = None
    window: int | None = None


class DecoderLayerRules(_Strict):
    """Each decoder layer builds ``attentions`` attention modules of the same shapes, each
    with a KV cache of its own, all numbered with the decoder layer's index (LongCat-Flash:
    ``self_attn.0`` and ``self_attn.1``); ``layers_field`` counts the decoder layers (its
    ``num_hidden_layers`` is transformers' ``attentions * num_layers``)."""

    attentions: int = Field(ge=2)
    layers_field: str


class PerLayerRules(_Strict):
    """Per-layer attention shapes (DomynEdge): ``head_size`` names a mapping from layer
    index to overrides and the key that holds the layer's head size
    (``per_layer_config.head_dim``: transformers' heterogeneous configs, a layer not
    listed keeps the model's head size); ``window`` a list of windows, one per layer (an
    entry that is a list gives its first element), 0 or null meaning full attention and any other
    sliding over ``window + window_offset`` tokens."""

    head_size: str | None = None
    window: str | None = None


class OwnSparseRules(_Strict):
    """Layers whose own code builds a block-sparse attention with a lightning indexer
    (MiniMax-M3's ``MiniMaxM3SparseAttention``): the layer names a model-driven backend
    (``model-driven.yaml``), not the platform's choice, and registers an index-key cache
    beside its K/V cache."""

    flags_field: str
    """A per-layer list (dotted path): a nonzero entry makes the layer sparse."""
    backend: str
    """The model-driven backend the sparse layers name (``model-driven.yaml`` ``backends``)."""
    index_head_dim_field: str
    index_heads_field: str
    index_topk_field: str
    index_backend: str
    """The backend the index-key cache names (``model-driven.yaml`` ``layer_backends``)."""
    index_row: Literal["fp8_scaled", "bfloat16"] = "bfloat16"


class SparseLayerRules(_Strict):
    """Sparse MLA on some layers only (HY-V4, vllm/models/hy_v4/nvidia/attention.py:318-341
    in 0.33.0): a layer is sparse when the config has ``requires`` (the indexer's
    ``index_topk``) and its ``types_field`` entry is one of ``sparse_types``; other layers
    are dense MLA. A sparse layer builds its own indexer (and index-key cache) unless its
    ``shared_field`` entry is ``shared_value``: then it reads an earlier layer's top-k.
    Without ``shared_field`` the config class's default holds: an own indexer at layer 0
    and where ``(i - full_offset) % full_every == 0``."""

    types_field: str
    sparse_types: list[str]
    requires: str
    shared_field: str = ""
    """Empty (Dots3Note): every sparse layer's indexer follows ``full_every`` (1: each its own)."""
    shared_value: str = "shared"
    shared_values: list[str] = Field(default_factory=list)
    """The entries ``shared_field`` may hold; another is refused (``values_refusal``)."""
    full_every: int = Field(ge=1)
    full_offset: int = 0
    length_refusal: str | None = None
    """vLLM's ValueError when ``shared_field`` has not one entry per layer and a layer is
    sparse (``{expected}``: the layers, ``{got}``: the entries)."""
    values_refusal: str | None = None
    """vLLM's ValueError for entries outside ``shared_values`` (``{invalid}``: them, sorted,
    as a Python list)."""


class SinkBackendRules(_Strict):
    """A learnable sink the module applies through a backend it binds itself
    (``LayerFacts.sink_backend``), when the boolean config field ``field`` is true
    (``default`` when the config omits it)."""

    field: str
    default: bool = False
    backend: str


class ConvCacheRules(_Strict):
    """Each attention layer's decoder layer also owns a short-convolution state registered
    as a sliding-window cache of its own (Inkling's ``InklingConvState``): ``kernel_field``
    gives the convolution width, which is the cache's block size and window; the layer's
    KV heads (after the mixer's overrides) are its heads; ``head_size`` is an expression
    over the layer's ``head_size``, ``total_kv_heads`` and the model's ``hidden_size``,
    rounded up to a power of two when ``round_pow2``; V head size 0; the model's dtype,
    whatever the KV-cache dtype; ``backend`` the backend its module returns itself."""

    kernel_field: str
    head_size: str
    round_pow2: bool = False
    backend: str
    name: str
    """The module's name under the decoder layer (``conv_state``)."""


class IndexerTailRules(_Strict):
    """The circular buffer a pooled indexer keeps for its in-progress pool (GLM-5.3's
    ``Glm5NextTailCache``): ``num_kv_heads`` slots of ``head_size_field`` values of
    ``dtype``, one block per request of the ring the pool and the speculative tokens give
    (``IndexerTail.ring``), on the backend its module returns."""

    num_kv_heads: int = Field(ge=1)
    head_size_field: str
    dtype: str
    backend: str
    name: str
    dcp_sharded: bool = True


class RSWARules(_Strict):
    """``attention.rswa``: where ``when`` holds over the text config's fields (read as the
    family reads them; ``model_type`` the text config's) and ``field`` is set (not null) in
    the text config, else the top-level config, every non-MLA attention layer is an
    ``RSWAAttention`` of that window (DeepseekAttention, vllm/model_executor/models/
    deepseek_v2.py:208-218 in 0.33.0: ``getattr(hf_config, "rswa_window", None)``)."""

    field: str
    when: str = "true"


class IndexerPoolRules(_Strict):
    """A sparse layer's indexer compresses its index keys by a pool of ``pool_field``
    tokens (the spec's ``tokens_per_state``) on the backend ``backend`` (``model-driven.yaml``
    ``layer_backends``) and keeps the ``tail`` ring beside it: GLM-5.3's kpool indexer."""

    pool_field: str
    backend: str
    tail: IndexerTailRules


class KVCacheDtypeDefaultRules(_Strict):
    """The model's ``verify_and_update_config`` replaces an auto ``--kv-cache-dtype`` by
    ``dtype`` on CUDA devices of ``capability_families`` (``is_device_capability_family``)
    when the config has ``requires`` (GLM-5.3's sparse indexer: ``index_topk``; empty:
    always) and the served architecture is one of ``architectures`` (vLLM's
    ``MODELS_CONFIG_MAP`` keys; empty: every architecture of the family)."""

    source: str
    requires: str = ""
    architectures: list[str] = Field(default_factory=list)
    capability_families: list[int]
    dtype: str
    message: str = ""
    since: str | None = None
    """The first vLLM release whose model class does so (None: every release)."""


class AttentionRules(_Strict):
    mla: str | None = None
    multi_query: str | None = None
    """A boolean config field: when true the layers have ``multi_query_heads``
    KV heads (1 when that is unset); when false, one per query head."""
    multi_query_heads: str | None = None
    head_size_fields: list[str] = Field(default_factory=list)
    """Config fields whose sum is the (K and V) head size."""
    kv_heads_field: str | None = None
    """The config field giving the KV heads (instead of the usual aliases)."""
    kv_heads_optional: bool = False
    """``kv_heads_field`` may be absent: then one KV head per query head (MPT reads
    ``attn_config.kv_n_heads`` only when the attention config has it)."""
    sinks: bool | dict[MixerName, str] = False
    head_size_v: str | None = None
    overrides: dict[MixerName, dict[str, str]] = Field(default_factory=dict)
    kv_sharing: str | None = None
    window_offset: int = 0
    """Added to the config's window on sliding layers (Cohere2 attends to
    ``sliding_window + 1`` tokens)."""
    window_field: str = "sliding_window"
    """The config field giving the sliding window (ModernBERT: ``local_attention``)."""
    window_divisor: int = 1
    """The field is this multiple of the window (ModernBertConfig.sliding_window is
    ``local_attention // 2``), before ``window_offset``."""
    cross_attention: bool = False
    """Every attention layer also has a cross-attention of the same heads beside it (an
    encoder-decoder's decoder layers)."""
    per_layer_field: str | None = None
    """A config field mapping a layer index to fields that layer overrides (transformers
    5's heterogeneous configs, ``per_layer_config``: ``head_dim``, ``num_key_value_heads``)."""
    causal_field: str | None = None
    """A boolean config field (true when absent): false makes every attention layer
    encoder-only (bidirectional, no KV cache), as ``getattr(config, "is_causal", True)``
    decides in vLLM's Llama / Qwen decoder layers."""
    bidirectional_field: str | None = None
    """A boolean config field (false when absent): true makes every attention layer
    encoder-only (bidirectional, no KV cache) when the config's first architecture is one
    of ``bidirectional_architectures``, whose ``MODELS_CONFIG_MAP`` hook sets
    ``is_causal = not <field>`` (Gemma3TextModelConfig.verify_and_update_model_config)."""
    bidirectional_architectures: tuple[str, ...] = ()
    causal_value: str | None = None
    """With ``causal_field`` a string field: the value that means causal; another value
    makes every attention layer encoder-only. The field is read from the text config, else
    the top-level config (ColQwen3.5's ``retrieval_attention_contract``, ``causal`` or
    ``bidirectional``, which vllm/model_executor/models/config.py:1081-1115 reads from
    either and turns into ``is_causal``)."""
    chunk_lookback: dict[MixerName, int] = Field(default_factory=dict)
    """{mixer: chunk_lookback}: the mixer's layers pass ``chunk_lookback`` and the model's
    sliding window (``window_field``) to their Attention (Rnj1's chunked_attention layers:
    a sliding-window cache, not a chunked-local one)."""
    nope_mixers: list[MixerName] = Field(default_factory=list)
    """Mixers whose layers apply no rotary embedding (Llama-4's global NoPE layers)."""
    loops: LoopRules | None = None
    per_layer: PerLayerRules | None = None
    per_decoder_layer: DecoderLayerRules | None = None
    own_sparse: OwnSparseRules | None = None
    """Layers that build their own block-sparse attention and indexer cache."""
    sparse_layers: SparseLayerRules | None = None
    """Sparse MLA (and an indexer of its own, or another layer's top-k) on some layers."""
    sink_backend: SinkBackendRules | None = None
    """The backend a layer binds to apply its learnable sink (HY-V4)."""
    backend: str | None = None
    """The attention backend the family's attention module passes to its ``Attention``
    (``attn_backend=``): vLLM's selector is not asked for these layers, so neither the
    platform's priority list nor ``--attention-backend`` applies (openPangu's sink attention:
    ``FLASH_ATTN_DIFFKV``)."""
    conv_cache: ConvCacheRules | None = None
    """A short-convolution state cache beside every attention layer (Inkling)."""
    indexer_pool: IndexerPoolRules | None = None
    """The sparse layers' indexer pools its index keys and keeps a tail ring (GLM-5.3)."""
    static_sinks: str | None = None
    """The config field giving the number of static sink tokens of a ``StaticSinkAttention``
    (its ``sink_len``): the layer's cache is a ``SinkFullAttentionSpec``, a full-attention
    page, and vLLM's KV-cache manager asserts ``sink_len % block_size == 0``."""
    rswa: RSWARules | None = None
    """The layers that build an ``RSWAAttention`` (Reference Sliding Window Attention) once
    the config sets the window: their cache is an ``RSWASpec``."""


class SSMRefusal(_Strict):
    """A state-mixer layout the model's config class (or vLLM) refuses: ``when`` is a
    condition over the mixer's dimensions (the names of its facts, e.g. ``num_heads``,
    ``intermediate_size``), ``message`` the refusal's text."""

    when: str
    message: str


class ConfigRefusal(_Strict):
    """A config the family's model class (or vLLM's config convertor for it) refuses while
    vLLM builds it: ``when`` is a condition over config fields (canonical names, read through
    the family's ``reads`` and aliases, or dotted paths into the config), ``error`` the
    exception's type and ``message`` vLLM's text, word for word, ``{field}`` filled in with
    the config's value."""

    when: str
    error: Literal["ValueError", "AssertionError", "NotImplementedError"]
    message: str
    source: str


class SSMRules(_Strict):
    type: Literal["mamba1", "mamba2", "gdn", "short_conv", "linear"]
    fields: dict[str, list[Any]]
    """dimension -> [config field] or [config field, default]."""
    parallel: bool = False
    """Every attention layer also has this state mixer beside it (Falcon-H1)."""
    state_dtype: list[Any] | None = None
    """[config field] or [config field, default]: the SSM state dtype the model
    fixes when ``--mamba-ssm-cache-dtype`` is auto."""
    mixer_class: str | None = None
    """vLLM's mixer class (a ``MambaBase`` subclass), which the engine's
    prefill-checkpoint rules name (``prefill_checkpoint.mixers`` of the state backend)."""
    refusals: list[SSMRefusal] = Field(default_factory=list)
    """Mixer layouts that are refused (the first that holds is the refusal)."""
    mamba_prefix_caching: bool = False
    """The model class implements ``SupportsMambaPrefixCaching`` (Mamba cache mode
    ``all`` with prefix caching before 0.28.0)."""
    spec_checkpoint: list[PrefillCheckpointRule] = Field(default_factory=list)
    """The mixer's own prefill kernel rules (first match wins) when the layer stamps its
    state spec with the kernel's checkpoint alignment itself (``num_prefill_checkpoint_blocks``
    1, ``prefill_checkpoint_alignment``) but declares none to the platform
    (``get_prefill_checkpoint_alignment`` stays MambaBase's None: GLM-5.3's FlashKDA).
    The rules read ``cc``, ``cc_major``, ``head_k_dim``, ``model_dtype`` and ``requested``."""
    spec_checkpoint_since: str | None = None
    """The first vLLM release whose layer stamps its spec so (None: every release)."""


FFNKind = Literal["dense", "moe", "none"]


class VisionRules(_Strict):
    """One vision tower's shapes from its ``vision_config`` (read by
    selector/memory/weights.py): encoder blocks of fused QKV, output projection and an MLP,
    a patch embedding, and optional spatial mergers, position table and projection."""

    source: str
    width_field: str = "hidden_size"
    layers_fields: list[str] = Field(default_factory=lambda: ["depth", "num_hidden_layers"])
    intermediate_field: str | None = "intermediate_size"
    mlp_ratio_field: str | None = None
    """The MLP width is this multiple of the width (when the intermediate field is absent)."""
    mlp_matrices: Literal[2, 3] = 2
    merger: bool = False
    """A spatial merger: ``(width * m^2)^2 + width * m^2 * out`` with m =
    ``spatial_merge_size`` and out = ``out_hidden_size`` (default the text hidden size)."""
    merger_copies_field: str | None = None
    """A list field whose length counts further mergers (Qwen3-VL's deepstack)."""
    position_field: str | None = None
    """Rows of a learned position table of the width."""
    position_tables: int = 1
    position_grid: bool = False
    """A learned position table of ``(image_size / patch_size)^2`` rows (SigLIP)."""
    projection: bool = False
    """A projection from the width to the text hidden size."""
    replicated: bool = False
    """Every rank holds the whole tower (ReplicatedLinear)."""
    replicated_mlp: bool = False
    """The blocks' attention is split over ranks, their MLP is not (``nn.Linear``)."""
    projector_widths: list[str] = Field(default_factory=list)
    """Top-level config fields giving a projector's successive widths: an ``nn.Linear``
    (on every rank) from each to the next and from the last to the text hidden size
    (Muse Glimmer's adapter and projection); with ``projection``, instead of the width."""




class FFNSizing(_Strict):
    """The MLP width derived from a width field as Meta's Llama sized it: when
    ``flag_field`` is true, two thirds of it, times ``multiplier_field`` (if set), rounded
    up to a multiple of ``multiple_of_field`` (LFM2: vllm/model_executor/models/lfm2.py:59-78
    in 0.33.0)."""

    flag_field: str
    multiplier_field: str
    multiple_of_field: str


class NgramEmbeddingRules(_Strict):
    """Hashed n-gram embedding tables beside the token embedding, present when the config
    sets ``ratio_field`` (vLLM's ``NgramEmbedding``, longcat_flash_ngram.py:58-96):
    ``splits * (neighbors - 1)`` tables, table i of ``ratio * vocab_size + 2i + 1`` rows of
    ``hidden_size // tables``, concatenated into one ``VocabParallelEmbedding`` (its rows
    padded to 64 and split over the ranks), and a replicated projection of each table's
    width back to ``hidden_size``."""

    ratio_field: str
    neighbors_field: str
    splits_field: str


class WeightRules(_Strict):
    """How the family's model class lays out its weights beyond the token mixers (the
    ``weights`` column of families.yaml; read by selector/memory/weights.py)."""

    mlp_matrices: Literal[2, 3] = 3
    """Matrices of a dense MLP: 3 (gated: gate, up, down) or 2 (fc1 / fc2, relu^2 up / down)."""
    expert_matrices: Literal[2, 3] = 3
    """Matrices of one routed or shared expert."""
    ffn: Literal["every_layer", "char_pattern", "block_configs"] = "every_layer"
    """Which layers have a feed-forward block: every layer (the MoE fields decide dense or
    MoE), one character per layer of ``ffn_field`` mapped by ``ffn_chars``, or DeciLM's
    ``block_configs[i].ffn`` (``no_op``, ``ffn_mult``)."""
    ffn_field: str | None = None
    """The per-layer field of ``char_pattern``: a string of one character per layer, or a
    list of one string per layer (Muse Spark's ``mlp_layer_types``)."""
    ffn_chars: dict[str, FFNKind] = Field(default_factory=dict)
    intermediate_fields: list[str] = Field(default_factory=list)
    """Config fields giving the dense MLP width, first present wins (before the usual
    ``intermediate_size``)."""
    intermediate_divisor: int = 1
    """The width field is this multiple of the MLP width (QWen's ``ffn_hidden_size``)."""
    vocab_fields: list[str] = Field(default_factory=list)
    """Config fields giving the embedding rows, first present wins (before ``vocab_size``)."""
    tie_word_embeddings: bool = False
    """The config class's default when config.json omits ``tie_word_embeddings``."""
    ties_always: bool = False
    """The model class ties the lm_head to the embedding whatever the config says."""
    ffn_sizing: FFNSizing | None = None
    """The MLP width is derived from the width field (``intermediate_fields``) so."""
    expert_hidden_field: str | None = None
    """Experts work in a latent of this width, with a down and an up projection to the
    hidden size beside them (Nemotron-3 Super's ``moe_latent_size``)."""
    shared_expert_field: str | None = None
    """The config field giving the shared expert's width."""
    shared_expert_count_field: str | None = None
    """The config field counting the shared experts, whose widths add into one shared MLP
    (Bailing's ``num_shared_experts``; 0: none); None: one."""
    position_embedding_offset: int | None = None
    """Learned absolute position embeddings of ``max_position_embeddings`` plus this many
    rows (GPT-2 / GPTBigCode ``wpe``: 0; OPT's ``embed_positions``: 2), replicated on
    every rank; None: the family has none."""
    vocab_default: int | None = None
    """The config class's ``vocab_size`` when config.json omits it."""
    moe_keeps_dense: bool = False
    """An MoE layer keeps its dense MLP (``intermediate_size``) beside the experts."""
    router_extra_experts_field: str | None = None
    """A config field of experts the router also scores beyond the routed ones (LongCat-
    Flash's ``zero_expert_num`` identity experts: router rows, no expert weights)."""
    router_float32: bool = False
    """The router's weight is float32 whatever the model's dtype (LongcatRouter)."""
    dense_mlps: int = Field(default=1, ge=1)
    """Dense MLPs of that width in a decoder layer that has one (LongCat-Flash's
    ``mlps.0`` and ``mlps.1``: 2)."""
    q_gate_field: str | None = None
    """A boolean config field: the q projection also yields an output gate (twice the
    query width)."""
    q_gate_default: bool = False
    """``q_gate_field``'s value when the config omits it (the model class's default);
    without a ``q_gate_field``, whether the q projection always yields the gate."""
    compressed_attention_field: str | None = None
    """A config field whose presence makes every layer DeepSeek-V4 attention (a shared
    q / kv down projection, ``wq_b``, a grouped ``wo_a`` / ``wo_b`` output, a KV compressor
    where ``compress_ratios[i] > 1`` and an indexer where it is 4), not MLA."""
    sink_value_field: str | None = None
    """A boolean config field: a layer's static sink tokens (``LayerFacts.sink_tokens``)
    have a learned value parameter beside their key (openPangu's ``param_sink_with_value``;
    else the values are a zero buffer, no parameter). The key parameter, ``sink_tokens x
    KV heads x head size`` per rank, is counted whenever the layer has sink tokens."""
    ngram_embedding: NgramEmbeddingRules | None = None
    """Hashed n-gram embedding tables beside the token embedding (LongCat-Flash-Lite)."""
    unknown_when: dict[str, str] = Field(default_factory=dict)
    """{config field: the part}: when the config sets the field, vLLM builds a part the
    estimate cannot count, and the weights are unknown."""
    replicated_mlp: bool = False
    """The dense MLP is not split over ranks (ReplicatedLinear)."""
    first_dense_field: str | None = None
    """A config field: the first N decoder layers have a dense MLP, the others the MoE (in
    place of ``first_k_dense_replace``: Inkling's ``dense_mlp_idx``)."""
    replicated_embedding: bool = False
    """The token embedding is a full table on every rank (not a VocabParallelEmbedding:
    Inkling's ``InklingReplicatedEmbedding``)."""
    q_extra_per_head_field: str | None = None
    """A config field: the fused q projection also yields this many columns per query head
    (Inkling's relative-position branch, ``d_rel``), split over ranks with the heads."""
    vision_towers: dict[str, VisionRules] = Field(default_factory=dict)
    """{top-level model_type: its vision tower}; another type's tower is counted by the
    generic formula (weights.py ``_vision_params``)."""


class VersionWhen(_Strict):
    """The version a config without the version field gets: ``version`` when every
    ``{field: value}`` of ``when`` holds (none: always)."""

    when: dict[str, Any] = Field(default_factory=dict)
    version: str


class VersionRule(_Strict):
    """The language model's architecture chosen by the config's version field, as a
    wrapper's class dispatch does (MiniCPM-V's ``_SUPPORT_VERSION``): the field's text split
    at the dots into integers (``parts``: only the first so many; None: all of them, and
    only two are supported), looked up in ``values``; ``absent`` gives the version of a
    config without the field (the first that holds); a version missing from ``values`` is
    refused with ``refusal`` (``{supported}``: the supported versions, ``{got}``: the
    parsed version as a Python tuple), one whose parts are not all integers with
    ``invalid``; ``broken``: {version: the error vLLM's dispatch raises for it instead of
    building it}."""

    field: str = "version"
    parts: int | None = None
    values: dict[str, str]
    absent: list[VersionWhen] = Field(default_factory=list)
    refusal: str
    invalid: str
    """vLLM's refusal of a version whose parts are not all integers (``{got}``: the field's
    value, ``{part}``: the first part that is not, as Python's ``repr``); every part is
    checked, before ``parts`` drops any."""
    broken: dict[str, str] = Field(default_factory=dict)


class LanguageModelRule(_Strict):
    """How a wrapper (a multimodal or pooling model) builds its language model:
    ``init_vllm_registered_model(hf_config=<section>, architectures=<architecture>)``."""

    source: str
    sections: list[str] = Field(default_factory=list)
    """Config sections (a dotted path each; the first present wins) holding the language
    model's config; none (or none present): the wrapper's own config."""
    architecture: str | None = None
    """The architecture vLLM builds whatever the section says; None: the section's
    ``architectures``, else transformers' causal-LM architecture of its ``model_type``."""
    model_type: str | None = None
    """The section's model type when the config omits it (the config class's default)."""
    by_model_type: dict[str, str] = Field(default_factory=dict)
    """{the config's top-level model_type: the architecture vLLM builds} (before
    ``architecture``)."""
    by_version: VersionRule | None = None
    """The architecture by the config's version field (before ``by_model_type``)."""
    family: str | None = None
    """The family whose rules read the language model, for a model class no registry
    architecture names (ernie45_vl_moe.py's ``Ernie4_5_VLMoeForCausalLM``), before any
    architecture."""


class Family(_Strict):
    name: str = ""
    source: str
    modules: list[str] = Field(default_factory=list)
    architectures: list[str] = Field(default_factory=list)
    mixers: MixerRules = MixerRules(rule="uniform")
    attention: AttentionRules = AttentionRules()
    ssm: SSMRules | None = None
    kv_cache_dtype_default: KVCacheDtypeDefaultRules | None = None
    """The KV-cache dtype the model class sets when the user leaves it auto (its
    ``verify_and_update_config``)."""
    weights: WeightRules = WeightRules()
    aliases: dict[str, list[str]] = Field(default_factory=dict)
    reads: dict[str, str] = Field(default_factory=dict)
    """{canonical field: the config field the family's model class reads in its place},
    before any alias: not vLLM's getters (``aliases``) but the model's own layers (an
    encoder-decoder's decoder reads ``decoder_layers``, ``decoder_attention_heads``)."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    defaults_class: str | None = None
    """The model type whose config class ``defaults`` are (vLLM's own class, unrecorded),
    where the family also reads configs of another recorded model type (whose class
    defaults then win: :meth:`ConfigReader._get`)."""
    mm_prefix_lm: bool = False
    encoder_only: bool = False
    cacheless: bool = False
    """The model class builds no layer vLLM's KV-cache manager sees: no
    ``AttentionLayerBase`` module at all (Terratorch, ``IsAttentionFree`` without a state
    mixer); the facts have no layers and the plan no KV cache."""
    alibi: bool = False
    alibi_sqrt: bool = False
    """The family's ALiBi layers pass ``use_alibi_sqrt=True`` (Step1)."""
    build_checks: list[BuildCheck] = Field(default_factory=list)
    """The model class's own refusals of what its layers were built with (asserts after
    its Attention is constructed: Flint's FlashInfer requirement)."""
    encoder_decoder: bool = False
    """The config class vLLM reads the family's config with is an encoder-decoder by default
    (its ``is_encoder_decoder``, or its text config's: transformers' CohereAsrConfig, the
    MBartConfig of Nemotron-Parse's ``decoder``): vLLM's ``is_encoder_decoder`` holds for a
    config that omits the key."""
    prefix_caching: bool = True
    """``ModelConfig.is_prefix_caching_supported`` for the family's architectures: false
    for a pooling model whose default sequence pooling is CLS (its ``attn_type`` is then
    ``encoder_only``), MEAN or STEP (vllm/config/model.py:2173-2183, :2239-2274 in
    0.33.0): prefix caching is off by default, so a Mamba cache mode of ``none``."""
    language_model: LanguageModelRule | None = None
    """The architecture builds a language model of another architecture inside itself:
    its layers are that architecture's family's, read from the named sub-config."""
    config_refusals: list[ConfigRefusal] = Field(default_factory=list)
    """Configs vLLM refuses while building the model, in the order vLLM checks them (the
    first that holds is the refusal): Parse 3.5's required decoder flags, an embedding
    width the heads do not divide."""
    unmodelled_when: dict[str, str] = Field(default_factory=dict)
    """{config field: what vLLM's model class builds once the config sets it (not null, not
    empty) that attn-select does not model yet}: such a config is refused by the reader in
    those words rather than read as the family's other layers (Qwen4Exp's QSA and PLE
    layers). vLLM builds it: this is attn-select's limit, never vLLM's refusal."""


class _File(_Strict):
    kv_heads_fields: list[str]
    implied_model_types: dict[str, str] = Field(default_factory=dict)
    """{top-level key: the model type transformers gives a config without ``model_type``
    that has that key}."""
    families: dict[str, Family]


def _families_path() -> Path:
    return preset_dir() / "families.yaml"


@cache
def _causal_lm_architectures() -> dict[str, str]:
    table = read_preset_yaml("causal_lm_architectures.yaml")["causal_lm_architectures"]
    return {str(k): str(v) for k, v in table.items()}


@cache
def _unmapped() -> tuple[dict[str, str], str]:
    data = read_preset_yaml("unmapped.yaml")
    return {str(k): str(v) for k, v in data["unmapped"].items()}, str(data["speculative_draft"])


def unmapped_reason(architecture: str, table: str | None = None) -> str | None:
    """Why no family maps ``architecture`` (``unmapped.yaml``; every speculative draft
    of the ``speculative_decoding_models`` table shares one reason); None when none is
    listed."""
    reasons, draft = _unmapped()
    if architecture in reasons:
        return reasons[architecture]
    return draft if table == "speculative_decoding_models" else None


def causal_lm_architecture(model_type: str) -> str | None:
    """The architecture vLLM gives a sub-config of ``model_type`` that names none
    (transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``; ``causal_lm_architectures.yaml``)."""
    return _causal_lm_architectures().get(model_type)


@cache
def _file() -> _File:
    path = _families_path()
    try:
        return _File.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:  # pragma: no cover - shipped data
        raise RuntimeError(f"{path}: {exc}") from exc


def implied_model_type(raw: Mapping[str, Any]) -> str | None:
    """The model type transformers reads a config without ``model_type`` as
    (``implied_model_types`` of ``families.yaml``); None when no key implies one."""
    return next((model_type for key, model_type in _file().implied_model_types.items()
                 if key in raw), None)


def kv_heads_fields() -> tuple[str, ...]:
    """The config fields that give the total KV heads, first present wins (vLLM's
    ``CONFIG_FIELD_ALIASES["total_num_kv_heads"]``; ``families.yaml``)."""
    return tuple(_file().kv_heads_fields)


@cache
def families() -> dict[str, Family]:
    """Every family of ``families.yaml`` by name (a packaging error if broken)."""
    data = _file()
    out = {name: family.model_copy(update={"name": name}) for name, family in data.families.items()}
    generic = out[GENERIC]
    merged: dict[str, Family] = {}
    for name, family in out.items():
        aliases = {**generic.aliases, **family.aliases} if name != GENERIC else family.aliases
        merged[name] = family.model_copy(update={"aliases": aliases})
    return merged


def _registry_files() -> list[Path]:
    root = preset_dir().parent / "engines"
    return sorted(root.glob("*/model_registry.json"))


@cache
def _module_of() -> dict[str, str]:
    """architecture -> vLLM module, over every engine's extracted registry
    (the newest engine wins when they disagree)."""
    out: dict[str, str] = {}
    for path in _registry_files():
        data = json.loads(path.read_text(encoding="utf-8"))
        for table in data["tables"].values():
            for arch, (module, _cls) in table.items():
                out[arch] = module
    return out


def mapped_modules() -> frozenset[str]:
    """The vLLM modules some family maps."""
    return frozenset(m for family in families().values() for m in family.modules)


def family_for(architecture: str) -> Family | None:
    """The family of ``architecture``, or None when no family maps it."""
    table = families()
    for family in table.values():
        if architecture in family.architectures:
            return family
    module = _module_of().get(architecture)
    if module is None:
        return None
    for family in table.values():
        if module in family.modules:
            return family
    return None
