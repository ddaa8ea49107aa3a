"""The start-up data of one engine version (``schemas/engines/<engine>/startup.yaml``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal, get_args

import yaml
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from selector.catalog import Catalog, CatalogError, EngineData
from selector.memory.dcp import DcpCheck
from selector.util.cache import cached_file

__all__ = [
    "AttentionPart",
    "AutoFit",
    "CheckSpec",
    "CompressedTensorsMatch",
    "CudagraphCapture",
    "DcpChecks",
    "Estimates",
    "ExtraHidden",
    "LinearAttentionPart",
    "MaxLenCheck",
    "MemorySpec",
    "MlaProfileWorkspace",
    "ModelRunnerRule",
    "MoeProfileTensors",
    "MoeWorkspace",
    "Mxfp4Backend",
    "QkNormCopies",
    "QuantScheme",
    "QuantizedModules",
    "StartupChecks",
    "StartupProfile",
    "VocabCheck",
    "WeightShapes",
    "startup_profile",
]


class _Strict(BaseModel):
    # validators built on first use: the profile is usually read back from the cache
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class MoeWorkspace(_Strict):
    """vLLM's fused-MoE workspace: one persistent buffer of the workspace manager that
    holds ``tokens x topk x (max(N/2, K) + max(N, K))`` activations (the unquantized
    Triton experts; N = 2 x the expert width per GPU, K = hidden) from the first MoE layer
    on, so it adds to every later layer's peak."""

    source: str


class MlaProfileWorkspace(_Strict):
    """The MLA layer's profile-run stand-in for the up-projected prefill context: a
    transient ``workspace tokens x heads x (qk_nope + v)`` tensor, the workspace tokens
    ``min(max(8 x max_model_len, 4 x max_num_seqs x block_size), cap)``, then at least
    ``max_num_seqs x block_size``."""

    max_model_len_multiple: int
    seqs_blocks_multiple: int
    cap_tokens: int
    source: str


class QkNormCopies(_Strict):
    """Model types whose attention normalises q and k per head out of place (the vllm_c
    ``rms_norm`` writes a new tensor), so a normed q and k are alive beside ``qkv``."""

    model_types: tuple[str, ...]
    source: str


class AttentionPart(_Strict):
    """The tensors a decoder layer's attention sublayer holds when its output projection
    writes, in the profile run (no attention metadata, so the kernel does not run but
    its output buffer is allocated): ``hidden_tensors`` hidden-width ones (the normed
    layer input, the residual, the output projection's output), the ``qkv`` projection
    output and ``output_tensors`` q-width attention output(s). With an MoE model the
    persistent fused-MoE workspace is alive from the second layer on."""

    hidden_tensors: float
    output_tensors: float
    qk_norm_copies: QkNormCopies | None = None
    source: str


class CudagraphCapture(_Strict):
    """The memory the CUDA-graph capture takes after the KV cache is sized (vLLM's
    "Graph capturing finished ..., took N GiB"), per captured graph (a PIECEWISE graph
    per capture size, a FULL one per decode size), fitted to recorded start-ups."""

    base_gib: float
    per_graph_gib: float
    source: str


class ModelRunnerRule(_Strict):
    """What the GPU model runner in use changes in the memory budget
    (``v2_cudagraph_estimate``: V2's ``profile_cudagraph_memory`` estimates the capture;
    False: it returns 0, so nothing is subtracted for CUDA graphs before the KV cache is
    sized). Which runner vLLM starts is ``model-runner.yaml``'s (selector/memory/runner.py)."""

    v2_cudagraph_estimate: bool
    source: str


class LinearAttentionPart(_Strict):
    """The tensors a Gated DeltaNet layer holds in the profile run when its output
    projection writes (the kernels return early without attention metadata): hidden-width
    ones (the normed input, the residual, the layer's output buffer, out_proj's output)
    and, per GPU, tensors of the key width (``linear_num_key_heads x linear_key_head_dim``)
    and of the value width (``linear_num_value_heads x linear_value_head_dim``)."""

    model_types: tuple[str, ...]
    hidden_tensors: float
    key_width_tensors: float
    value_width_tensors: float
    source: str


class ExtraHidden(_Strict):
    """Hidden-width tensors some model classes hold at the MLP's peak beyond the common
    decoder layer's (``activation_hidden_factor``)."""

    model_types: tuple[str, ...]
    hidden_tensors: float
    source: str


class Estimates(_Strict):
    """Figures vLLM measures on the GPU; fitted to public start-up logs."""

    non_torch_gib: float
    non_torch_tp_gib: float
    activation_hidden_factor: float
    activation_intermediate_factor: float
    sampler_logit_copies: float
    cudagraph_base_gib: float
    cudagraph_per_layer_gib: float
    moe_workspace: MoeWorkspace | None = None
    """Counted where a release's own start-ups are recorded (else the MoE layer is taken
    as a dense MLP of ``topk x moe_intermediate_size``)."""
    mla_profile_workspace: MlaProfileWorkspace | None = None
    attention_part: AttentionPart | None = None
    linear_attention_part: LinearAttentionPart | None = None
    cudagraph_capture: CudagraphCapture | None = None
    """Counted where a release's own start-ups with CUDA graphs are recorded."""
    """Counted where a release's own start-ups are recorded (else the MLP's peak stands
    for the layer's)."""
    activation_extra_hidden: tuple[ExtraHidden, ...] = ()


class CompressedTensorsMatch(_Strict):
    """The compressed-tensors weights a scheme row stands for (``config_groups.*.weights``)."""

    type: Literal["int", "float"]
    num_bits: int = 0
    """0: any (read from the config)."""


class QuantScheme(_Strict):
    """How a checkpoint's ``quantization_config`` (or a ``--quantization`` value) stores
    its weights: the tensors vLLM's quant method creates (selector/memory/quant.py)."""

    name: str
    methods: tuple[str, ...]
    algos: tuple[str, ...] = ()
    value_bits: int
    group_size: int
    scale_bits: int
    """Bits of the scale each group of ``group_size`` input values carries."""
    layers: Literal["linear", "experts"]
    source: str
    zero_points: bool = False
    """Each group also carries a packed zero point of ``value_bits`` (AWQ, GPTQ ``qzeros``)."""
    bits_key: str | None = None
    """The config key that overrides ``value_bits`` (``bits``, compressed-tensors ``num_bits``)."""
    group_size_key: str | None = None
    """The config key that overrides ``group_size``."""
    block_key: str | None = None
    """The config key of a 2-D block size (one scale of ``block_scale_bits`` per block)."""
    block_scale_bits: int = 32
    ignore_keys: tuple[str, ...] = ()
    """The config keys listing the modules vLLM leaves unquantized."""
    ignore_match: Literal["exact", "substring", "suffix", "regex", "fnmatch"] = "exact"
    """How vLLM matches a module name against that list."""
    compressed_tensors: CompressedTensorsMatch | None = None
    online: bool = False
    """A ``--quantization`` value vLLM applies to an unquantized checkpoint after loading."""
    online_block: tuple[int, int] | None = None

    @property
    def bits_per_weight(self) -> float:
        return self.value_bits + (self.scale_bits / self.group_size if self.group_size else 0.0)


class QuantizedModules(_Strict):
    """Which modules of each weight part vLLM builds with the quant method, by name."""

    layer_prefixes: tuple[str, ...]
    """A decoder layer's module prefix, ``{i}`` its index (text and multimodal layouts)."""
    parts: dict[str, tuple[str, ...]]
    """Weight part -> its modules in one decoder layer (HF shard names for fused layers);
    a part not listed keeps the checkpoint dtype."""
    router_quantized_types: tuple[str, ...] = ()
    """Model types whose router (``mlp.gate``) vLLM builds with the quant method."""
    source: str


class MoeProfileTensors(_Strict):
    """The tensors an MoE layer of this backend holds at its peak in the profile run:
    ``hidden_tensors`` hidden-width ones and, per routed token (tokens x topk),
    ``routed_intermediate`` tensors of the padded expert width and ``routed_hidden`` of
    the hidden width."""

    hidden_tensors: float
    routed_intermediate: float
    routed_hidden: float
    source: str


class Mxfp4Backend(_Strict):
    """The MXFP4 MoE backend on a range of compute capabilities and its padding."""

    min_cc: int
    max_cc: int
    backend: str
    flag: str
    """The ``--moe-backend`` value that selects it."""
    intermediate_multiple: int
    hidden_multiple: int
    profile_tensors: MoeProfileTensors | None = None
    """Counted where a release's own start-ups with this backend are recorded."""


class WeightShapes(_Strict):
    """Model types whose MoE weights vLLM shapes beyond the config's sizes."""

    shared_expert_intermediate_types: tuple[str, ...]
    """A shared expert of ``intermediate_size`` per MoE layer when the config names none."""
    expert_bias_types: tuple[str, ...]
    """The experts carry biases (``w13_bias``, ``w2_bias``)."""
    pp_vocab_every_stage_types: tuple[str, ...] = ()
    """With pipeline parallelism every stage builds the embedding and the lm_head (the
    others: the first stage the embedding, the last the lm_head, or the embedding again
    when tied)."""


class AutoFit(_Strict):
    """``--max-model-len auto`` / -1 in one range of releases: vLLM's log lines and the
    code of its refusal when not one token fits."""

    since: str
    """The first release of these words (the newest row not above the engine wins)."""
    code: str
    full: str
    reduced: str
    source: str


class NoKVCache(_Strict):
    """What vLLM sizes for a model with no KV-cache spec: no memory profile, no KV memory,
    a pool of ``num_blocks`` (the null block)."""

    num_blocks: int
    source: str


class MemorySpec(_Strict):
    source: str
    cudagraph_estimate_applied: bool
    log: dict[str, str]
    reserve_null_block: bool
    """The fit check plans against available memory less one pool block (the null block)."""
    no_kv_cache: NoKVCache | None = None
    """A model without a KV-cache spec (None: not recorded for the release)."""
    no_memory_code: str
    oom_code: str
    too_long_code: str
    estimated_max_len: str
    auto_fit: tuple[AutoFit, ...] = ()
    pp_partition_codes: dict[str, str] = Field(default_factory=dict)
    """``VLLM_PP_LAYER_PARTITION`` refusals (selector/memory/pp.py: invalid, count, sum)
    -> their codes."""
    estimates: Estimates
    model_runner: ModelRunnerRule | None = None
    """None: the release's runner choice is not recorded (the V1 runner's profile is assumed)."""
    weights: WeightShapes
    quantization: tuple[QuantScheme, ...]
    quantized_modules: QuantizedModules | None = None
    """None: every linear part is quantized, no ignore list is applied."""
    mxfp4_backends: tuple[Mxfp4Backend, ...]


class CheckSpec(_Strict):
    code: str
    source: str
    min_cc: int | None = None


class VocabCheck(CheckSpec):
    padding: int


class KvHeadsCheck(CheckSpec):
    """The KV heads by the TP size, asserted while the model is built: ``code`` when
    there are at least as many KV heads as ranks (they must divide by the TP size),
    ``replicate_code`` when fewer (the TP size must divide by them)."""

    replicate_code: str


class MaxLenCheck(CheckSpec):
    keys: tuple[str, ...]
    prescaled_rope_types: tuple[str, ...]
    """Rope types whose ``factor`` is already in the derived length (not applied again)."""
    original_length_rope_types: tuple[str, ...] = ()
    """Rope types whose derived length is the rope's ``original_max_position_embeddings``
    (the config's ``max_position_embeddings`` when it has none) before the factor."""
    default_original_length_rope_types: tuple[str, ...] = ()
    """Rope types whose model vLLM runs, without ``--max-model-len``, at the config's
    top-level ``original_max_position_embeddings`` (the derived length when it has none)."""
    allow_env: str
    default_length: int | None = None
    """The length vLLM assumes when the config has none of ``keys`` and no
    ``--max-model-len`` is given (its ``default_max_len``)."""
    unscaled_model_types: tuple[str, ...]
    """Model types (a substring of ``model_type``) whose derived length rope scaling
    leaves alone."""


class DcpChecks(_Strict):
    """vLLM's limits on a decode-context-parallel split (:mod:`selector.memory.dcp`): the
    code (its registered message is the release's own text) and source of each."""

    tp_divisible: CheckSpec
    """Without prefill context parallelism (PCP)."""
    tp_divisible_with_pcp: CheckSpec | None
    """With PCP; null: the release does not check the TP size by the DCP size then."""
    pcp_dcp_span: CheckSpec | None
    """With PCP, DCP spans 1, the PCP or the TP x PCP axis; null: not checked."""
    gqa_tp_above_kv_heads: CheckSpec
    gqa_dcp_within_max: CheckSpec
    gqa_q_per_kv_divisible: CheckSpec

    def spec(self, check: DcpCheck) -> CheckSpec | None:
        """The release's code for ``check`` (None: the release does not make it)."""
        spec: CheckSpec | None = getattr(self, check)
        return spec


class StartupChecks(_Strict):
    bfloat16: CheckSpec
    max_model_len: MaxLenCheck
    tensor_parallel_heads: CheckSpec
    tensor_parallel_vocab: VocabCheck
    tensor_parallel_kv_heads: KvHeadsCheck
    decode_context_parallel: DcpChecks
    removed_flag: CheckSpec
    unknown_json_key: CheckSpec
    compilation_config_fields: tuple[str, ...]


class StartupProfile(_Strict):
    engine: str
    memory: MemorySpec
    checks: StartupChecks

    def quant_scheme(self, method: str, algo: str | None) -> QuantScheme | None:
        for scheme in self.memory.quantization:
            if method in scheme.methods and (not scheme.algos or (algo or "") in scheme.algos):
                return scheme
        return None

    def auto_fit(self) -> AutoFit | None:
        """This release's auto-fit row (the newest ``since`` not above its version)."""
        version = Version(self.engine.split("==", 1)[-1])
        rows = [row for row in self.memory.auto_fit if Version(row.since) <= version]
        return max(rows, key=lambda row: Version(row.since), default=None)

    def mxfp4_backend(self, cc: int, requested: str | None = None) -> Mxfp4Backend:
        """The MXFP4 MoE backend vLLM picks on ``cc`` (or the one ``--moe-backend`` forces)."""
        for row in self.memory.mxfp4_backends:
            if requested and row.flag == requested:
                return row
        for row in self.memory.mxfp4_backends:
            if row.min_cc <= cc <= row.max_cc:
                return row
        return self.memory.mxfp4_backends[-1]


def _parse(data: bytes) -> StartupProfile:
    return StartupProfile.model_validate(yaml.safe_load(data.decode("utf-8")))


@lru_cache(maxsize=8)
def _load(path: Path) -> StartupProfile:
    try:  # validated once per file version (selector.util.cache)
        return cached_file("startup", path, _parse, code=("memory/profile.py",))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(f"{path}: {exc}") from None


_PROFILES: dict[tuple[int, str], tuple[Catalog, StartupProfile]] = {}
"""The start-up data of each engine, by catalog: loaded and cross-checked once."""


def startup_profile(catalog: Catalog, engine: str | EngineData | None = None) -> StartupProfile:
    """The start-up data of ``engine`` (default: the catalog's default engine), loaded and
    cross-checked once per catalog and engine."""
    name = engine.engine if isinstance(engine, EngineData) else catalog.choose(engine).name
    hit = _PROFILES.get((id(catalog), name))
    if hit is not None and hit[0] is catalog:
        return hit[1]
    profile = _startup_profile(catalog, name)
    _PROFILES[(id(catalog), name)] = (catalog, profile)
    return profile


def _startup_profile(catalog: Catalog, name: str) -> StartupProfile:
    path = catalog.engine_file(name, "startup.yaml")
    if path is None:
        raise CatalogError(f"{name}: no startup.yaml in its profile folder or a profile it extends")
    directory = path.parent
    profile = _load(path)
    for code in (profile.memory.no_memory_code, profile.memory.too_long_code,
                 profile.memory.oom_code,
                 *(row.code for row in profile.memory.auto_fit),
                 *profile.memory.pp_partition_codes.values(),
                 profile.checks.bfloat16.code, profile.checks.max_model_len.code,
                 profile.checks.tensor_parallel_heads.code, profile.checks.removed_flag.code,
                 profile.checks.tensor_parallel_vocab.code,
                 profile.checks.tensor_parallel_kv_heads.code,
                 profile.checks.tensor_parallel_kv_heads.replicate_code,
                 profile.checks.unknown_json_key.code,
                 *(spec.code for spec in (profile.checks.decode_context_parallel.spec(check)
                                          for check in get_args(DcpCheck)) if spec)):
        if code not in catalog.codes:
            raise CatalogError(f"{directory / 'startup.yaml'}: code {code} is not in "
                               "reason-codes.yaml")
    return profile
