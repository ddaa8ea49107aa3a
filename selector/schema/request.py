"""The deployment file a user writes (YAML, TOML or JSON).

A file is validated in pydantic's strict mode (``Deployment.model_validate(data,
strict=True)`` in :mod:`selector.inputs.config`): a value is taken as written, never converted
(``true`` is not the number 1, ``"128"`` is not the number 128; a whole number is a valid
float). The one documented string form of a number is a size suffix (``32k``, ``10G``),
read as the command line reads it (:mod:`selector.schema.sizes`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from selector.schema.sizes import ByteCount, MaxModelLen, TokenCount
from selector.schema.types import (
    AttnType,
    CudaGraphMode,
    DType,
    KVCacheDType,
    KVLayout,
    StrictModel,
)

__all__ = [
    "AttentionConfig",
    "Deployment",
    "DeviceRef",
    "KVConnector",
    "LayerSpec",
    "MLADims",
    "Parallel",
    "Speculative",
]


class DeviceRef(StrictModel):
    """A device given by compute capability (and optionally a name and memory)."""

    capability: str = Field(pattern=r"^\d{1,2}\.\d$")
    """The capability vLLM's platform reports, e.g. ``"9.0"`` (CUDA compute capability)."""
    platform: str | None = None
    """The platform (``schemas/platforms.yaml``; default: the first, ``cuda``)."""
    name: str | None = None
    memory_gib: float | None = Field(default=None, gt=0)

    @field_validator("capability", mode="before")
    @classmethod
    def _capability_is_text(cls, value: object) -> object:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"capability is a string like '9.0': write capability: \"{value}\" "
                             "(a number would read 12.10 as 12.1)")
        return value


class MLADims(StrictModel):
    """Multi-head latent attention dimensions (DeepSeek-style models)."""

    kv_lora_rank: int = Field(gt=0)
    qk_rope_head_dim: int = Field(ge=0)
    qk_nope_head_dim: int = Field(ge=0)
    v_head_dim: int = Field(gt=0)
    index_topk: int | None = Field(default=None, gt=0)
    """Sparse MLA: the indexer's top-k (set for DeepSeek-V3.2-style sparse attention)."""


class LayerSpec(StrictModel):
    """The attention facts of one layer (or of every layer of a uniform model)."""

    head_size: int | None = Field(default=None, gt=0, le=4096)
    """Head size; for MLA it defaults to kv_lora_rank + qk_rope_head_dim."""
    head_size_v: int | None = Field(default=None, gt=0, le=4096)
    num_heads: int = Field(default=32, gt=0, le=4096)
    """Query heads of the whole model (divided by tensor parallelism per rank)."""
    num_kv_heads: int | None = Field(default=None, gt=0, le=4096)
    """KV heads of the whole model (default: num_heads)."""
    attn_type: AttnType = "decoder"
    sliding_window: int | None = Field(default=None, gt=0)
    has_sink: bool = False
    logits_soft_cap: float | None = Field(default=None, gt=0)
    alibi: bool = False
    mm_prefix: bool = False
    """The model is a PrefixLM multimodal model (bidirectional image ranges)."""
    per_head_quant_scales: bool = False
    rswa_window: int | None = Field(default=None, gt=0)
    is_diffusion: bool = False
    mla: MLADims | None = None


class AttentionConfig(StrictModel):
    """``--attention-config`` / ``-ac.*``."""

    backend_per_kind: dict[str, str] = {}
    """``-ac.backend_per_kind``: an explicit backend per KV-cache group kind
    (``full_attention``, ``sliding_window``, ``mla_attention``, ...)."""
    flash_attn_version: Literal[2, 3, 4] | None = None
    use_trtllm_attention: bool | None = None
    use_non_causal: bool = False
    mla_prefill_backend: str | None = None
    """``-ac.mla_prefill_backend``: pin the MLA prefill backend (``FLASH_ATTN``,
    ``FLASHINFER``, ``TRTLLM_RAGGED``, ``TOKENSPEED_MLA``...); null = automatic."""


class Parallel(StrictModel):
    tensor_parallel_size: int = Field(default=1, ge=1, le=1024)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=1024)
    """``--pipeline-parallel-size``: the decoder layers split over stages
    (``VLLM_PP_LAYER_PARTITION`` or vLLM's even split); the memory check is per stage."""
    decode_context_parallel_size: int = Field(default=1, ge=1, le=1024)
    prefill_context_parallel_size: int = Field(default=1, ge=1, le=1024)
    cp_kv_cache_interleave_size: int = Field(default=1, ge=1)


class Speculative(StrictModel):
    """``--speculative-config``: the draft and its attention backend."""

    num_speculative_tokens: int = Field(default=0, ge=0, le=64)
    adaptive_verification: bool = False
    method: str | None = None
    """``eagle``, ``eagle3``, ``mtp``, ``draft_model``, ``ngram``... (vLLM's
    ``SpeculativeConfig.method``; a ``model`` without it is a draft model)."""
    model: str | None = None
    """The draft: a config.json (or its folder; relative to this file) or a Hugging Face id
    whose config.json is recorded in ``schemas/models/drafts/``. MTP needs none: its
    layers come from the target's config."""
    attention_backend: str | None = None
    """The draft's layers' backend (``--speculative-config.attention_backend``); unset:
    Model Runner V2 keeps the target's ``attention_backend``, V1 selects afresh."""
    parallel_drafting: bool = False
    kv_cache_dtype: str | None = None
    """The draft's KV-cache dtype (``--speculative-config.kv_cache_dtype``; unset: the
    target's ``kv_cache_dtype``)."""
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1)
    """The draft's tensor-parallel size (unset: the target's; vLLM accepts 1 or the
    target's)."""
    quantization: str | None = None
    """The draft's quantization method (unset: the target's ``--quantization``)."""


class KVConnector(StrictModel):
    name: str
    preferred_layout: KVLayout | None = None


class Deployment(StrictModel):
    """One deployment to check: device, layer facts and vLLM settings."""

    engine: str | None = None
    """Engine profile, e.g. ``vllm==0.33.0``; ``--engine`` wins over it. Null:
    ``$ATTN_SELECT_ENGINE``, else the installed vLLM's profile, else the newest."""
    model: str | None = None
    """A shipped model preset (``llama-3.1-8b``, ``gpt-oss-20b``, ...) or the path of a
    Hugging Face ``config.json`` (or its folder), relative to this file.  With a model,
    every layer is checked with its own facts and the KV cache is negotiated; without
    one, ``layer`` describes a single (uniform) attention layer."""
    max_model_len: MaxModelLen | Literal["auto"] | None = None
    """``--max-model-len``: tokens, ``32768`` or ``32k`` / ``32K`` as on the command line;
    ``auto`` (or -1): the largest length whose KV cache fits the memory left (vLLM's
    auto-fit); null: the length the model's config derives."""
    cpu_offload_gb: float = Field(default=0, ge=0)
    """``--cpu-offload-gb``: GiB of decoder-layer weights per GPU vLLM keeps in CPU memory."""
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    """``--gpu-memory-utilization``; null: the engine's default (0.92 in vLLM 0.33.0)."""
    kv_cache_memory_bytes: ByteCount | None = None
    """``--kv-cache-memory-bytes``: the KV cache size, skipping vLLM's memory profiling."""
    max_num_batched_tokens: TokenCount | None = None
    """``--max-num-batched-tokens`` (null: vLLM's default for the GPU); sizes the profile run."""
    max_num_seqs: int | None = Field(default=None, gt=0)
    """``--max-num-seqs`` (null: vLLM's default for the GPU); sizes the sampler's profile run."""
    moe_backend: str | None = None
    """``--moe-backend`` (null: auto); for MXFP4 experts it decides their padding."""
    quantization: str | None = None
    """``--quantization``: on an unquantized checkpoint, vLLM's online quantization
    (``fp8`` = ``fp8_per_tensor``, ``fp8_per_block``, ``fp8_per_channel``); the checkpoint's
    own ``quantization_config`` decides otherwise."""
    reserved_memory_gib: float = Field(default=0.0, ge=0)
    """Memory that is not KV cache (weights, activations, CUDA graphs) per GPU, for the
    capacity estimate."""
    enable_prefix_caching: bool | None = None
    """``--enable-prefix-caching`` / ``--no-enable-prefix-caching``; null: vLLM's default
    (on, except for hybrid models in releases whose profile says otherwise:
    ``hybrid_alignment.hybrid_prefix_caching``)."""
    device: str | DeviceRef
    """A catalog device name (``H100``, ``B200``, ``RTX 5090``...) or ``{capability: "9.0"}``."""
    dtype: DType = "bfloat16"
    kv_cache_dtype: KVCacheDType = "auto"
    block_size: int | None = Field(default=None, gt=0, le=65536)
    """``--block-size`` if pinned; null lets vLLM choose."""
    attention_backend: str | None = None
    """``--attention-backend``; null or ``auto`` = automatic selection."""
    cudagraph_mode: CudaGraphMode | None = None
    """``compilation_config.cudagraph_mode``; null: the engine's default (``defaults.yaml``)."""
    attention_config: AttentionConfig = Field(default_factory=AttentionConfig)
    layer: LayerSpec = Field(default_factory=LayerSpec)
    parallel: Parallel = Field(default_factory=Parallel)
    speculative: Speculative = Field(default_factory=Speculative)
    batch_invariant: bool = False
    """``VLLM_BATCH_INVARIANT=1``."""
    kv_connector: KVConnector | None = None
    mm_encoder_attn_backend: str | None = None
    """``--mm-encoder-attn-backend``: the vision encoder's attention backend (null: vLLM
    picks with ``get_vit_attn_backend``)."""
    limit_mm_per_prompt: dict[str, int | dict[str, int] | None] = {}
    """``--limit-mm-per-prompt``: items per prompt by modality (``{video: 0}``), or options
    (``{video: {count: 1, num_frames: 8}}``); it changes the encoder's tokens per item."""
    mm_processor_kwargs: dict[str, object] = {}
    """``--mm-processor-kwargs`` (e.g. Gemma-4's ``{max_soft_tokens: 560}``)."""
    disable_chunked_mm_input: bool = False
    """``--disable-chunked-mm-input``: a multimodal item must fit in one batch (vLLM sets
    it on CUDA for a multimodal prefix-LM)."""
    environment: dict[str, bool] = {}
    """Run-time facts vLLM probes (without the ``env_`` prefix), e.g. ``{fa3_built: false}``."""
    ignore: list[str] = []
    """Warning codes acknowledged for this deployment, as ``check --ignore CODE`` does (e.g.
    ``[AS005]``): they stay in the report as notes and no longer fail ``--strict``."""

    @field_validator("device", mode="before")
    @classmethod
    def _one_device(cls, value: object) -> object:
        if isinstance(value, list):
            raise ValueError("a deployment names one device: write one (device: H100) and "
                             "use --device for a fleet (check FILE --device H100 --device B200)")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"a device is a catalog name (device: H100) or a capability "
                             f'string (device: {{capability: "{value}"}}), not the number {value}')
        return value

    @field_validator("max_model_len", mode="before")
    @classmethod
    def _max_model_len(cls, value: object) -> object:
        """vLLM's ``human_readable_int_or_auto``: -1 and ``auto`` mean auto-fit
        (vllm/utils/argparse_utils.py:77-95 in 0.33.0); any other length is positive."""
        if value == -1 or (isinstance(value, str) and value.strip().lower() in ("auto", "-1")):
            return "auto"
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            raise ValueError("max_model_len must be a positive token count, -1 or auto")
        return value

    @field_validator("attention_backend")
    @classmethod
    def _auto_is_none(cls, value: str | None) -> str | None:
        if value is not None and value.strip().lower() == "auto":
            return None
        return value
