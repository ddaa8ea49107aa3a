"""Frozen per-layer and per-model attention facts derived from a config.json."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from selector.errors import InputError
from selector.schema.backend import PrefillCheckpointRule

__all__ = [
    "ATTENTION_KINDS",
    "SSM_KINDS",
    "BuildCheck",
    "GDNDims",
    "IndexerTail",
    "KVCacheDtypeDefault",
    "LayerFacts",
    "LayerKind",
    "LinearAttnDims",
    "MLADims",
    "Mamba1Dims",
    "Mamba2Dims",
    "ModelDType",
    "ModelFacts",
    "SSMDims",
    "ShortConvDims",
    "SparseIndexer",
    "engine_at_least",
]

LayerKind = Literal["attention", "mla", "mamba", "gdn", "cross_attention", "encoder_only", "none"]
"""What a decoder layer's token mixer is. ``gdn`` covers Qwen3-Next's
``linear_attention`` (Gated DeltaNet) layers; ``mamba`` covers Mamba-1 and
Mamba-2 mixers (``ssm`` tells which); ``none`` is a layer that holds no KV cache
or state (an MLP/MoE-only block, a no-op or linear-replaced attention)."""

ATTENTION_KINDS: frozenset[str] = frozenset({"attention", "mla", "cross_attention", "encoder_only"})
SSM_KINDS: frozenset[str] = frozenset({"mamba", "gdn"})

ModelDType = Literal["float16", "bfloat16", "float32"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BuildCheck(_Frozen):
    """A refusal of the model class once its attention layer is built (an assert after its
    ``Attention`` is constructed: Flint's FlashInfer requirement): ``when`` reads the layer's
    facts as the profile's ``layer_build`` checks do (``backend``: the selected backend's
    name, ``dtype``, ``kv_cache_dtype``); ``message`` is what vLLM raises, word for word
    (``Type: text``)."""

    when: str
    message: str
    fix: str = ""
    source: str


class MLADims(_Frozen):
    """Multi-head latent attention dimensions (DeepSeek-V2/V3 family)."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    @property
    def head_size(self) -> int:
        """The cached latent width: ``kv_lora_rank + qk_rope_head_dim``."""
        return self.kv_lora_rank + self.qk_rope_head_dim


class IndexerTail(_Frozen):
    """A pooled indexer's in-progress pool, kept as a ``CircularBufferSpec`` of one block
    per request (GLM-5.3's ``Glm5NextTailCache``): ``num_kv_heads`` slots of ``head_size``
    ``dtype`` values, a ring of ``pool * next_power_of_2(cdiv(pool + num_speculative_tokens,
    pool))`` slots (vllm/models/glm5next/common/attention.py:159-180 in 0.33.0)."""

    pool: int = Field(ge=1)
    num_kv_heads: int = Field(ge=1)
    head_size: int = Field(ge=1)
    dtype: str
    backend: str
    """The backend its module returns (``model-driven.yaml`` ``layer_backends``)."""
    name: str
    """The module's name under the indexer (``tail_cache``)."""
    dcp_sharded: bool = True

    def ring(self, num_speculative_tokens: int) -> int:
        """The ring's slots: its block size."""
        groups = -(-(self.pool + num_speculative_tokens) // self.pool)
        return self.pool * (1 << (groups - 1).bit_length())


def engine_at_least(engine: str, since: str | None) -> bool:
    """Whether the engine profile (``vllm==X.Y.Z``) is release ``since`` or newer (None:
    every release)."""
    if since is None:
        return True
    from packaging.version import Version

    return Version(engine.split("==", 1)[-1]) >= Version(since)


class KVCacheDtypeDefault(_Frozen):
    """The KV-cache dtype the model's ``verify_and_update_config`` sets when
    ``--kv-cache-dtype`` is auto, on the device capability families listed (vLLM's
    ``is_device_capability_family``: the capability // 10)."""

    capability_families: tuple[int, ...]
    dtype: str
    message: str = ""
    """What vLLM logs when it does so."""
    since: str | None = None
    """The first vLLM release whose model does so (None: every release)."""

    def applies(self, kv_cache_dtype: str | None, cc: int, engine: str) -> bool:
        return (kv_cache_dtype in (None, "auto") and (cc // 10) * 10 in self.capability_families
                and engine_at_least(engine, self.since))


class SparseIndexer(_Frozen):
    """A lightning indexer's K cache beside a sparse layer (DeepSeek-V3.2's top-k sparse
    MLA; MiniMax-M3's block-sparse attention: the family's ``attention.own_sparse``)."""

    index_topk: int
    index_head_dim: int = 128
    index_n_heads: int = 64
    row: Literal["fp8_scaled", "bfloat16"] = "fp8_scaled"
    """How a token's index key is stored: fp8 values plus one fp32 scale per 128
    (``DeepseekV32IndexerCache``), or bfloat16 values (``MiniMaxM3IndexerCache``)."""
    backend: str | None = None
    """The backend the indexer cache names, a ``layer_backends`` entry of the release's
    ``model-driven.yaml``; None: the engine's wired ``sparse_indexer``."""
    own_cache: bool = True
    """The layer's own indexer keeps the index-key cache; False: the layer is sparse over
    the top-k an earlier layer's indexer selected and builds no indexer (HY-V4's
    ``indexer_types`` entry ``shared``: the family's ``attention.sparse_layers``)."""
    tokens_per_state: int = Field(default=1, ge=1)
    """Tokens one index-key state holds (the spec's ``tokens_per_state``: GLM-5.3's
    kpool-compressed cache keeps one per ``index_kpool`` tokens; the family's
    ``attention.indexer_pool``)."""
    tail: IndexerTail | None = None
    """The circular buffer beside a pooled index-key cache (GLM-5.3's tail ring)."""


class ConvCache(_Frozen):
    """A short-convolution state kept as a sliding-window KV cache (Inkling's
    ``InklingConvState``, ``vllm/models/inkling/nvidia/sconv_swa_attn.py:121-193``)."""

    width: int = Field(ge=1)
    """The convolution width: the cache's block size and sliding window."""
    num_kv_heads: int = Field(ge=1)
    total_kv_heads: int = Field(ge=1)
    head_size: int = Field(ge=1)
    """The packed per-head width of the streams it holds."""
    backend: str
    name: str


class Mamba1Dims(_Frozen):
    """Mamba-1 mixer dimensions (whole model, before tensor parallelism)."""

    ssm_type: Literal["mamba1"] = "mamba1"
    intermediate_size: int
    state_size: int
    conv_kernel: int
    state_dtype: str | None = None
    """The SSM state dtype the model's config fixes (vLLM's ``verify_and_update_config``
    sets ``mamba_ssm_cache_dtype`` from it when the user leaves it ``auto``)."""
    mixer_class: str | None = None
    """vLLM's mixer class (``ssm.mixer_class`` of the family), which the engine's
    prefill-checkpoint rules name; None: not stated (no rule applies)."""


class Mamba2Dims(_Frozen):
    """Mamba-2 mixer dimensions (whole model, before tensor parallelism)."""

    ssm_type: Literal["mamba2"] = "mamba2"
    num_heads: int
    head_dim: int
    n_groups: int
    state_size: int
    conv_kernel: int
    d_ssm: int | None = None
    """The mixer's intermediate size when the model sets it apart from
    ``num_heads * head_dim`` (Falcon-H1: ``mamba_d_ssm`` or ``mamba_expand * hidden_size``)."""
    state_dtype: str | None = None
    """The SSM state dtype the model's config fixes (vLLM's ``verify_and_update_config``
    sets ``mamba_ssm_cache_dtype`` from it when the user leaves it ``auto``)."""
    mixer_class: str | None = None
    """vLLM's mixer class (``ssm.mixer_class`` of the family), which the engine's
    prefill-checkpoint rules name; None: not stated (no rule applies)."""

    @property
    def intermediate_size(self) -> int:
        return self.d_ssm if self.d_ssm is not None else self.num_heads * self.head_dim


class GDNDims(_Frozen):
    """Gated DeltaNet mixer dimensions (whole model, before tensor parallelism)."""

    ssm_type: Literal["gdn"] = "gdn"
    num_k_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_kernel: int
    state_dtype: str | None = None
    """The SSM state dtype the model's config fixes (vLLM's ``verify_and_update_config``
    sets ``mamba_ssm_cache_dtype`` from it when the user leaves it ``auto``)."""
    mixer_class: str | None = None
    """vLLM's mixer class (``ssm.mixer_class`` of the family), which the engine's
    prefill-checkpoint rules name; None: not stated (no rule applies)."""
    spec_checkpoint: tuple[PrefillCheckpointRule, ...] = ()
    """The family's ``ssm.spec_checkpoint``: the prefill kernel rules by which the layer
    stamps its own spec with a checkpoint alignment (GLM-5.3's FlashKDA)."""
    spec_checkpoint_since: str | None = None
    """The first vLLM release whose layer stamps it."""

    @property
    def conv_dim(self) -> int:
        return self.head_k_dim * self.num_k_heads * 2 + self.head_v_dim * self.num_v_heads


class ShortConvDims(_Frozen):
    """A short-convolution mixer (LFM2's ``ShortConv``): a conv state only."""

    ssm_type: Literal["short_conv"] = "short_conv"
    conv_dim: int
    conv_kernel: int
    """``conv_L_cache``: the state keeps ``conv_kernel - 1`` positions."""
    state_dtype: str | None = None
    """Unused: the conv state follows ``--mamba-cache-dtype`` (``short_conv_state_dtype``)."""
    mixer_class: str | None = None
    """vLLM's mixer class (``ssm.mixer_class`` of the family), which the engine's
    prefill-checkpoint rules name; None: not stated (no rule applies)."""


class LinearAttnDims(_Frozen):
    """A linear (lightning) attention mixer (vLLM's ``LinearAttention``: Bailing-MoE-V2.5's
    ``BailingMoELinearAttention``): one ``(heads, head_dim, head_dim)`` state per layer
    (``MambaStateShapeCalculator.linear_attention_state_shape``)."""

    ssm_type: Literal["linear"] = "linear"
    num_heads: int
    head_dim: int
    group_norm_size: int = 1
    """The gate norm's groups, which the tensor-parallel size may not exceed nor fail to
    divide (``BailingMoELinearAttention``'s asserts)."""
    state_dtype: str | None = None
    """Unused: the state follows ``--mamba-cache-dtype`` (``linear_attention_state_dtype``)."""
    mixer_class: str | None = None
    """vLLM's mixer class (``ssm.mixer_class`` of the family), which the engine's
    prefill-checkpoint rules name; None: not stated (no rule applies)."""


SSMDims = Annotated[Mamba1Dims | Mamba2Dims | GDNDims | ShortConvDims | LinearAttnDims,
                    Field(discriminator="ssm_type")]


class LayerFacts(_Frozen):
    """One decoder layer's token-mixer facts, per tensor-parallel rank."""

    index: int
    kind: LayerKind
    num_q_heads: int = 0
    """Query heads on one rank."""
    num_kv_heads: int = 0
    """KV heads on one rank (1 for MLA)."""
    total_q_heads: int = 0
    total_kv_heads: int = 0
    head_size: int = 0
    """K head size (MLA: ``kv_lora_rank + qk_rope_head_dim``)."""
    head_size_v: int = 0
    """V head size (MLA: 0, a single latent)."""
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    has_sink: bool = False
    logits_soft_cap: float | None = None
    alibi: bool = False
    alibi_sqrt: bool = False
    """``Attention(use_alibi_sqrt=True)`` (Step1): only a backend whose
    ``supports_alibi_sqrt()`` is true builds the layer (the profile's ``layer_build``)."""
    chunk_lookback: int = -1
    """``Attention(chunk_lookback=...)``: -1, or the chunks a chunked sliding layer looks back
    over (Rnj1's ``chunked_attention`` layers: 1; only TRITON_ATTN builds them)."""
    use_rope: bool = True
    mla: MLADims | None = None
    indexer: SparseIndexer | None = None
    own_backend: str | None = None
    """The model-driven backend (``model-driven.yaml``) the layer's own code builds, never
    the platform's priority list (MiniMax-M3's sparse layers: ``MINIMAX_M3_SPARSE``)."""
    ssm: SSMDims | None = None
    sink_backend: str | None = None
    """The backend the layer's module binds to apply its learnable sink where the selector's
    choice cannot (the family's ``attention.sink_backend``; HY-V4: ``FLASHMLA_SPARSE``'s
    sink-capable subclass): the layer is selected without a sink, then takes this backend
    where the choice does not support sinks and this backend's checks pass; else it keeps
    the choice, its sink disabled. None: no such binding."""
    model_backend: str | None = None
    """The backend the model's attention module passes itself (the family's
    ``attention.backend``): the layer is never selected, whatever ``--attention-backend``
    says; None: vLLM's selector picks it."""
    conv_cache: ConvCache | None = None
    """A short-convolution state the decoder layer registers as a sliding-window cache
    beside its attention (the family's ``attention.conv_cache``: Inkling)."""
    own_block_size: int | None = Field(default=None, ge=1)
    """The block size the layer's module fixes in its spec whatever the engine's (a conv
    cache's: the convolution width); None: the engine's block size."""
    sink_tokens: int = Field(default=0, ge=0)
    """Static sink tokens of a ``StaticSinkAttention`` (``sink_len``; the family's
    ``attention.static_sinks``): 0 for a layer without them."""
    rswa_window: int | None = Field(default=None, gt=0)
    """An ``RSWAAttention``'s window (the family's ``attention.rswa_field``): the layer's
    cache is an ``RSWASpec``, a full-attention page; None: not an R-SWA layer."""
    kv_sharing_target: int | None = Field(default=None, ge=0)
    """The earlier layer whose KV cache this layer reuses (kind ``none``)."""
    attentions: int = Field(default=1, ge=1)
    """Attention modules of these facts the decoder layer builds, each with a KV cache of
    its own (LongCat-Flash's ``self_attn.0`` and ``self_attn.1``: 2; the family's
    ``attention.per_decoder_layer``)."""
    cross_attention: bool = False
    """The decoder layer also has a cross-attention beside its self-attention (an
    encoder-decoder's decoder layer, Whisper's ``encoder_attn``): one self-attention cache
    and one cross-attention cache for the same layer index."""
    draft: bool = False
    """A layer of the speculative draft (selector/memory/speculative.py), numbered after
    the target's: vLLM registers it in the same forward context, so its KV cache joins
    the KV-cache groups."""
    kv_cache_dtype: str | None = None
    """The layer's own KV-cache dtype where it is not the deployment's (the speculative
    draft's ``--speculative-config`` ``kv_cache_dtype``: vLLM builds the draft with its own
    cache config, vllm/v1/spec_decode/llm_base_proposer.py:1292-1299 in 0.33.0); None: the
    deployment's ``--kv-cache-dtype``."""

    @property
    def has_parallel_state(self) -> bool:
        """An attention layer with a state-space mixer beside it (Falcon-H1):
        one attention cache and one state for the same layer index."""
        return self.is_attention and self.ssm is not None

    @property
    def is_sparse(self) -> bool:
        """A sparse-MLA layer whose indexer keeps a K cache of its own beside the latent
        (not one that reads another layer's top-k: ``SparseIndexer.own_cache``)."""
        return self.indexer is not None and self.indexer.own_cache

    def cross_view(self) -> LayerFacts:
        """The layer's cross-attention as a layer of its own (``kind`` ``cross_attention``)."""
        return self.model_copy(update={"kind": "cross_attention", "cross_attention": False,
                                       "sliding_window": None, "attention_chunk_size": None})

    def conv_view(self) -> LayerFacts:
        """The layer's short-convolution state cache as a layer of its own: a sliding-window
        cache over ``width`` tokens in blocks of ``width``, V head size 0, the model's dtype
        (``auto``), on the backend its module returns."""
        conv = self.conv_cache
        assert conv is not None
        return self.model_copy(update={
            "kind": "attention", "conv_cache": None, "num_kv_heads": conv.num_kv_heads,
            "total_kv_heads": conv.total_kv_heads, "head_size": conv.head_size, "head_size_v": 0,
            "sliding_window": conv.width, "attention_chunk_size": None,
            "own_block_size": conv.width, "kv_cache_dtype": "auto",
            "model_backend": conv.backend, "attentions": 1, "has_sink": False})

    def state_view(self) -> LayerFacts:
        """The layer's state mixer as a layer of its own (``kind`` ``mamba`` or ``gdn``)."""
        assert self.ssm is not None
        return self.model_copy(update={"kind": "gdn" if self.ssm.ssm_type == "gdn" else "mamba"})

    @property
    def is_attention(self) -> bool:
        return self.kind in ATTENTION_KINDS

    @property
    def is_ssm(self) -> bool:
        return self.kind in SSM_KINDS

    @property
    def attn_type(self) -> str:
        """vLLM's ``AttentionType`` value for this layer."""
        if self.kind == "cross_attention":
            return "encoder_decoder"
        if self.kind == "encoder_only":
            return "encoder_only"
        return "decoder"

    @property
    def layer_kind(self) -> str:
        """The layer's kind as the layer table shows it: ``spec_kind``, with
        chunked local attention (Llama-4) told apart from full attention."""
        if self.attention_chunk_size and self.kind == "attention":
            return "chunked_attention"
        return self.spec_kind

    @property
    def spec_kind(self) -> str:
        """vLLM's ``get_attn_spec_kind`` (the key of ``backend_per_kind``)."""
        if self.kind == "encoder_only":
            return "encoder_only_attention"
        if self.kind == "cross_attention":
            return "cross_attention"
        if self.kind == "mla":
            return "sliding_window_mla" if self.sliding_window else "mla_attention"
        if self.is_ssm:
            return "mamba"
        return "sliding_window" if self.sliding_window else "full_attention"


class ModelFacts(_Frozen):
    """A model's attention-relevant facts, layer by layer."""

    name: str
    """Preset name or the config.json path it was read from."""
    source: str
    """The file the facts came from."""
    architecture: str
    architectures: tuple[str, ...] = ()
    """Every name of the config's ``architectures`` list (vLLM tries each)."""
    model_type: str
    dtype: ModelDType
    """``torch_dtype`` as written in the config (float32 when absent)."""
    num_layers: int
    hidden_size: int
    max_position_embeddings: int | None = None
    is_mm_prefix_lm: bool = False
    rswa_window: int | None = Field(default=None, gt=0)
    """``model_config.rswa_window``: the top-level config's ``rswa_window``, whatever the
    architecture (vllm/transformers_utils/model_arch_config_convertor.py:368-372 in 0.33.0),
    which the selector passes to every layer as ``use_rswa`` (vllm/v1/attention/selector.py:
    176-179): a backend without ``supports_rswa`` is refused ("R-SWA not supported")."""
    refusals: tuple[str, ...] = ()
    """vLLM's own start-up errors that the config alone decides, each as ``Type: message``
    (e.g. Qwen2's "AssertionError: Sliding window for some but all layers is not
    supported", FalconH1Config's "ValueError: mamba_n_heads must divide ...")."""
    build_checks: tuple[BuildCheck, ...] = ()
    """The family's ``build_checks``: the model class's refusals of the backend, dtype or
    KV-cache dtype its layers were built with (checked once the backends are selected)."""
    family: str | None = None
    """The ``schemas/models/families.yaml`` family that read the layers; None
    when no family maps the architecture (read with the generic rules)."""
    mamba_prefix_caching: bool = False
    """vLLM's model class implements ``SupportsMambaPrefixCaching`` (the family's
    ``ssm.mamba_prefix_caching``): with prefix caching, releases before 0.28.0 give it
    Mamba cache mode ``all``."""
    encoder_decoder_default: bool = False
    """The config class's ``is_encoder_decoder`` where the config omits it (the family's
    ``encoder_decoder``)."""
    prefix_caching_default: bool = True
    """vLLM's default for ``--enable-prefix-caching`` is on for the architecture
    (``ModelConfig.is_prefix_caching_supported``; the family's ``prefix_caching``, off
    for an attention-free model)."""
    mamba_chunk_size: int = 2048
    """``ModelConfig.get_mamba_chunk_size``: ``mamba_chunk_size``, else ``chunk_size``,
    else 2048 (what mode ``all`` aligns the block to)."""
    kv_cache_dtype_default: KVCacheDtypeDefault | None = None
    """The family's ``kv_cache_dtype_default``, when the config has what it requires."""
    tp_size: int = 1
    layers: tuple[LayerFacts, ...]
    config_defaults: tuple[str, ...] = ()
    """The fields the config omits that were read from its config class's defaults (vLLM
    reads the config through that class), each as ``field = value (Class default,
    file:line)``; ``schemas/models/config_defaults.yaml``."""
    _config: Mapping[str, Any] | None = PrivateAttr(default=None)

    @property
    def config(self) -> Mapping[str, Any] | None:
        """The config.json mapping the facts were read from, as parsed (with
        ``--hf-overrides`` applied); None for facts built another way. Every later stage
        reads this mapping, never the file again."""
        return getattr(self, "_config", None)

    @property
    def attn_type(self) -> str:
        """vLLM's ``model_config.attn_type`` (vllm/config/model.py, 0.33.0 :2174-2190):
        ``hybrid`` for a model with state (Mamba, GDN) layers, else ``encoder_decoder``
        when ``is_encoder_decoder(hf_config)`` (``is_encoder_decoder`` of the config or
        of its text config, vllm/transformers_utils/config.py:774-780), else
        ``decoder`` (a pooling model's, from its pooler, is not derived here)."""
        if any(layer.is_ssm for layer in self.layers):
            return "hybrid"
        return "encoder_decoder" if self.is_encoder_decoder else "decoder"

    @property
    def is_encoder_decoder(self) -> bool:
        """vLLM's ``model_config.is_encoder_decoder``: ``is_encoder_decoder`` of the config
        or of its text config (vllm/transformers_utils/config.py, 0.33.0 :774-780; the text
        config as transformers' ``get_text_config`` finds it: ``decoder``, ``generator`` or
        ``text_config``), else the config class's default (:attr:`encoder_decoder_default`)."""
        config = self.config or {}
        sections = [config, *(config[key] for key in ("decoder", "generator", "text_config")
                              if isinstance(config.get(key), Mapping))][:2]
        written = [section["is_encoder_decoder"] for section in sections
                   if section.get("is_encoder_decoder") is not None]
        return any(written) or (not written and self.encoder_decoder_default)

    def with_config(self, config: Mapping[str, Any]) -> ModelFacts:
        """These facts with the config mapping they were read from."""
        copy = self.model_copy()
        copy._config = config
        return copy

    @property
    def runtime_dtype(self) -> ModelDType:
        """vLLM's ``--dtype auto`` on a bf16-capable GPU: float32 is downcast."""
        return "bfloat16" if self.dtype == "float32" else self.dtype

    @property
    def use_mla(self) -> bool:
        return any(layer.kind == "mla" for layer in self.layers)

    @property
    def is_hybrid(self) -> bool:
        """Attention plus Mamba-style layers (vLLM's ``is_hybrid``)."""
        return any(layer.is_ssm or layer.has_parallel_state for layer in self.layers)

    @property
    def state_layers(self) -> tuple[LayerFacts, ...]:
        """Every state-space mixer as a layer: the SSM layers and the states that
        sit beside attention (Falcon-H1)."""
        return tuple(
            layer if layer.is_ssm else layer.state_view()
            for layer in self.layers
            if layer.is_ssm or layer.has_parallel_state
        )

    def layer(self, index: int) -> LayerFacts:
        """The layer at ``index`` (raises :class:`selector.errors.InputError`)."""
        if not 0 <= index < len(self.layers):
            raise InputError(
                f"layer {index} does not exist; the model has {len(self.layers)} "
                f"layers (0-{len(self.layers) - 1})",
                file=self.source,
                field="layer",
            )
        return self.layers[index]
