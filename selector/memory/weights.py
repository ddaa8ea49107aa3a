"""Weight bytes per GPU from a Hugging Face ``config.json``: the parameter count from the
architecture's shapes (attention or MLA projections, dense MLPs, routed and shared MoE
experts, Mamba / Gated DeltaNet mixers, embeddings, an untied lm_head, a vision tower),
the checkpoint's ``quantization_config`` and tensor / expert parallelism.

An estimate: norms, biases other than the experts' and small buffers are left out
(well under 0.1 % of the weights of the shipped presets).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from pydantic import BaseModel, ConfigDict

from selector.errors import InputError
from selector.memory.profile import QuantScheme, StartupProfile
from selector.memory.quant import QuantPlan, part_shares, quant_plan
from selector.models import ModelFacts, parse_config
from selector.models.config_defaults import class_defaults
from selector.models.facts import (
    GDNDims,
    LayerFacts,
    LinearAttnDims,
    Mamba2Dims,
    ShortConvDims,
    SSMDims,
)
from selector.models.families import (
    GENERIC,
    Family,
    FFNSizing,
    NgramEmbeddingRules,
    WeightRules,
    families,
)
from selector.models.hf_config import language_model_config, omitted_defaults, resolve_family

__all__ = [
    "WeightEstimate",
    "WeightPart",
    "config_int",
    "estimate_weights",
    "quant_scheme_of",
    "text_config",
]

_EXPERT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")


class WeightPart(BaseModel):
    """One kind of weight on one GPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    params: int
    """Parameters this GPU holds."""
    bits: float
    """Storage bits per parameter (quantized value plus its share of the scales)."""

    @property
    def bytes(self) -> int:
        return int(self.params * self.bits / 8)


class WeightEstimate(BaseModel):
    """The weights one GPU holds (an estimate; vLLM logs "Model loading took X GiB")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parts: tuple[WeightPart, ...]
    total_params: int
    """Parameters of the whole model (all GPUs, before sharding, unpadded)."""
    quantization: str | None
    """The scheme name (``fp8``, ``int4-awq``, ``mxfp4``...) or None (unquantized)."""
    moe_backend: str | None = None
    """The MXFP4 MoE backend whose padding was applied, if any."""
    tensor_parallel_size: int = 1
    unknown: tuple[str, ...] = ()
    """Parts vLLM builds that the estimate cannot count: the weights are then unknown
    (``bytes_per_gpu`` is a lower bound) and the fit check is not made."""

    @property
    def bytes_per_gpu(self) -> int:
        return sum(part.bytes for part in self.parts)


def text_config(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's section of a (possibly multimodal) config."""
    text = raw.get("text_config")
    if isinstance(text, Mapping):
        return {**{k: v for k, v in raw.items() if k != "text_config"}, **text}
    return raw


def config_int(cfg: Mapping[str, Any], *keys: str, default: int = 0) -> int:
    """The first of ``keys`` that holds a count or size (a non-negative int); a negative
    one is no count and the next key, then ``default``, answers."""
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return default


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple if multiple > 1 else value


def _moe_layers(cfg: Mapping[str, Any], num_layers: int,
                first_dense_field: str | None = None) -> list[bool]:
    """Which decoder layers have routed experts (``moe_layer_freq`` may be a per-layer
    list of 0/1, MiMo-V2's spelling)."""
    if not config_int(cfg, *_EXPERT_KEYS):
        return [False] * num_layers
    listed_freq = cfg.get("moe_layer_freq")
    if isinstance(listed_freq, list) and len(listed_freq) == num_layers:
        return [bool(flag) for flag in listed_freq]
    first_dense = config_int(cfg, *(f for f in (first_dense_field,) if f),
                             "first_k_dense_replace")
    freq = max(1, config_int(cfg, "moe_layer_freq", "decoder_sparse_step",
                       "interleave_moe_layer_step", default=1))
    period = config_int(cfg, "expert_layer_period")
    offset = config_int(cfg, "expert_layer_offset")
    listed = cfg.get("mlp_only_layers")
    dense_only = {i for i in listed if isinstance(i, int)} if isinstance(listed, list) else set()
    out = []
    for index in range(num_layers):
        if period:
            out.append(index % period == offset)
        elif index < first_dense or index in dense_only:
            out.append(False)
        else:
            out.append((index - first_dense + 1) % freq == 0 if freq > 1 else True)
    return out


def _round_multiple(value: int, multiple: int) -> int:
    """DeciLM's ``_find_multiple`` (vllm/model_executor/models/nemotron_nas.py:66-70)."""
    return value if value % multiple == 0 else value + multiple - value % multiple


def _ffn_layers(cfg: Mapping[str, Any], rules: WeightRules, num_layers: int,
                dense_inter: int, hidden: int) -> list[tuple[str, int]]:
    """Each layer's feed-forward block: (``dense`` | ``moe`` | ``none`` | ``linear``, the
    dense width)."""
    moe = _moe_layers(cfg, num_layers, rules.first_dense_field)
    if rules.ffn == "char_pattern" and rules.ffn_field:
        pattern = cfg.get(rules.ffn_field)
        if isinstance(pattern, (str, list)) and len(pattern) == num_layers:
            return [(rules.ffn_chars.get(str(entry), "none"), dense_inter) for entry in pattern]
    if rules.ffn == "block_configs":
        blocks = cfg.get("block_configs")
        if isinstance(blocks, list) and len(blocks) == num_layers:
            out: list[tuple[str, int]] = []
            for block in blocks:
                ffn = block.get("ffn", {}) if isinstance(block, Mapping) else {}
                if ffn.get("no_op"):
                    out.append(("none", 0))
                elif ffn.get("replace_with_linear"):
                    out.append(("linear", 0))
                else:
                    # vllm/model_executor/models/nemotron_nas.py:60-63
                    mult = float(ffn.get("ffn_mult") or 0)
                    width = _round_multiple(int(2 * mult * hidden / 3), 256) if mult else dense_inter
                    out.append(("dense", width))
            return out
    return [("moe" if is_moe else "dense", dense_inter) for is_moe in moe]


def _layer_attention(layer: LayerFacts, hidden: int, tp: int, q_gate: bool = False,
                     sink_values: bool = False, q_extra: int = 0) -> int:
    """Parameters of one (non-MLA) attention layer on one rank: the fused QKV projection
    (QKVParallelLinear: KV heads split, or replicated when fewer than ``tp``) and the
    output projection (RowParallelLinear), from the KV plan's layer facts; with static sink
    tokens, their key (and, ``sink_values``, value) parameters of the rank's KV heads
    (openpangu.py:645-690: ``param_sink_key`` / ``param_sink_value``); ``q_extra``
    columns per query head beside q (the family's ``q_extra_per_head_field``)."""
    q = layer.total_q_heads
    kv_per_rank = max(1, layer.total_kv_heads // tp)
    head, head_v = layer.head_size, layer.head_size_v or layer.head_size
    q_width = q * (head * (2 if q_gate else 1) + q_extra) // tp
    sinks = layer.sink_tokens * kv_per_rank * (head + (head_v if sink_values else 0))
    return hidden * (q_width + kv_per_rank * (head + head_v)) + q * head_v * hidden // tp + sinks


def _ngram_params(cfg: Mapping[str, Any], rules: NgramEmbeddingRules | None, vocab: int,
                  hidden: int, tp: int) -> tuple[int, int]:
    """(the rank's share of the n-gram tables, the replicated projections) of the family's
    ``ngram_embedding``; (0, 0) when the config does not set its ratio."""
    if rules is None or not cfg.get(rules.ratio_field):
        return 0, 0
    tables = config_int(cfg, rules.splits_field) * (config_int(cfg, rules.neighbors_field) - 1)
    if tables < 1:
        return 0, 0
    base = config_int(cfg, rules.ratio_field) * vocab
    rows = sum(base + 2 * i + 1 for i in range(tables))
    width = hidden // tables
    return _round_up(rows, 64) // tp * width, tables * width * hidden


def _attention_params(cfg: Mapping[str, Any], tp: int) -> tuple[int, int]:
    """(sharded-and-divided, replicated) parameters of one MLA attention layer on one GPU
    (or one plain attention layer from the config, where no layer facts are given)."""
    hidden = config_int(cfg, "hidden_size")
    heads = config_int(cfg, "num_attention_heads", default=1)
    if cfg.get("kv_lora_rank"):
        nope = config_int(cfg, "qk_nope_head_dim")
        rope = config_int(cfg, "qk_rope_head_dim")
        v_dim = config_int(cfg, "v_head_dim", default=nope)
        kv_lora = config_int(cfg, "kv_lora_rank")
        q_lora = config_int(cfg, "q_lora_rank")
        replicated = hidden * (kv_lora + rope)
        sharded = kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden
        if q_lora:
            replicated += hidden * q_lora
            sharded += q_lora * heads * (nope + rope)
        else:
            sharded += hidden * heads * (nope + rope)
        if cfg.get("index_topk"):
            index_heads = config_int(cfg, "index_n_heads", default=64)
            index_dim = config_int(cfg, "index_head_dim", default=128)
            replicated += (q_lora or hidden) * index_heads * index_dim \
                + hidden * index_dim + hidden * index_heads
        return sharded // tp, replicated
    head_dim = config_int(cfg, "head_dim", default=hidden // max(heads, 1))
    kv_heads = config_int(cfg, "num_key_value_heads", default=heads)
    kv_per_rank = max(1, kv_heads // tp)
    q_and_o = 2 * hidden * heads * head_dim // tp
    return q_and_o + 2 * hidden * kv_per_rank * head_dim, 0


def _compressed_attention(cfg: Mapping[str, Any], index: int, tp: int) -> tuple[int, int]:
    """(split over ranks and divided, replicated) parameters of one DeepSeek-V4 attention
    layer (vllm/models/deepseek_v4/attention.py:290-400, compressor.py:159-283): the fused
    ``wq_a`` / ``wkv`` down projection, ``wq_b``, the grouped output ``wo_a`` / ``wo_b``; a
    compressor (``fused_wkv_wgate`` of 2 * coff * head_dim, coff = 2 at ratio 4) where the
    layer's compress ratio is above 1, and an indexer (its own compressor of the index head
    size, ``wq_b``, ``weights_proj``) where it is 4."""
    hidden = config_int(cfg, "hidden_size")
    heads = config_int(cfg, "num_attention_heads")
    head = config_int(cfg, "head_dim")
    q_lora = config_int(cfg, "q_lora_rank")
    groups = config_int(cfg, "o_groups", default=1)
    o_lora = config_int(cfg, "o_lora_rank")
    replicated = hidden * (q_lora + head)
    sharded = q_lora * heads * head // tp + groups * o_lora // tp * (heads * head // groups) \
        + hidden * (groups * o_lora // tp)
    ratios = cfg.get("compress_ratios")
    ratio = ratios[index] if isinstance(ratios, list) and index < len(ratios) else 0
    if isinstance(ratio, int) and ratio > 1:
        coff = 2 if ratio == 4 else 1
        replicated += 2 * coff * head * hidden
        if ratio == 4:
            index_heads = config_int(cfg, "index_n_heads", default=64)
            index_dim = config_int(cfg, "index_head_dim", default=128)
            replicated += 2 * 2 * index_dim * hidden + index_heads * index_dim * q_lora \
                + index_heads * hidden
    return sharded, replicated


def _llama_ffn_width(cfg: Mapping[str, Any], sizing: FFNSizing, width: int) -> int:
    width = int(2 * width / 3)
    multiplier = cfg.get(sizing.multiplier_field)
    if isinstance(multiplier, int | float) and not isinstance(multiplier, bool):
        width = int(multiplier * width)
    multiple = config_int(cfg, sizing.multiple_of_field, default=1) or 1
    return multiple * -(-width // multiple)


def _ssm_params(cfg: Mapping[str, Any], ssm: SSMDims | None, tp: int) -> int:
    """Parameters of one Mamba-1, Mamba-2, Gated DeltaNet, short-convolution or linear
    (lightning) attention mixer on one rank."""
    hidden = config_int(cfg, "hidden_size")
    if isinstance(ssm, LinearAttnDims):
        # vllm/model_executor/layers/mamba/linear/bailing_linear_attn.py:416-465
        # BailingMoELinearAttention: query_key_value (QKV of heads x head_dim each, MHA),
        # g_proj (column) and dense (row) of heads x head_dim; norms left out as everywhere
        inner = ssm.num_heads * ssm.head_dim
        return (hidden * 3 * inner + hidden * inner + inner * hidden) // tp
    if isinstance(ssm, ShortConvDims):
        # vllm/model_executor/layers/mamba/short_conv.py:57-82 ShortConv: conv (a
        # ColumnParallelLinear of L_cache -> dim), in_proj (dim -> 3 x dim, merged column),
        # out_proj (dim -> dim, row); biases left out as everywhere here
        dim = ssm.conv_dim
        return (dim * ssm.conv_kernel + 3 * dim * dim + dim * dim) // tp
    if isinstance(ssm, Mamba2Dims):
        # vllm/model_executor/layers/mamba/mamba_mixer2.py MambaMixer2: in_proj (z, x, B,
        # C, dt), conv1d over x, B, C, A / D / dt_bias per head, the gated norm, out_proj;
        # groups are repeated up to tp when they do not divide it
        inner, heads, state = ssm.intermediate_size, ssm.num_heads, ssm.state_size
        groups = ssm.n_groups if ssm.n_groups % tp == 0 else tp * -(-ssm.n_groups // tp)
        conv_dim = inner // tp + groups // tp * 2 * state
        return hidden * (inner // tp + conv_dim + heads // tp) + conv_dim * (ssm.conv_kernel + 1) \
            + 3 * heads // tp + inner // tp + inner // tp * hidden
    if isinstance(ssm, GDNDims) or cfg.get("linear_num_key_heads"):
        nk = config_int(cfg, "linear_num_key_heads")
        nv = config_int(cfg, "linear_num_value_heads")
        dk = config_int(cfg, "linear_key_head_dim")
        dv = config_int(cfg, "linear_value_head_dim")
        kernel = config_int(cfg, "linear_conv_kernel_dim", default=4)
        conv_dim = 2 * nk * dk + nv * dv
        return (hidden * (2 * nk * dk + 2 * nv * dv) + hidden * 2 * nv + conv_dim * kernel
                + nv * dv * hidden) // tp
    expand = config_int(cfg, "mamba_expand", default=2)
    inner = expand * hidden
    state = config_int(cfg, "mamba_d_state", default=16)
    conv = config_int(cfg, "mamba_d_conv", default=4)
    dt_rank = config_int(cfg, "mamba_dt_rank", default=-(-hidden // 16))
    return (hidden * 2 * inner + inner * conv + inner * (dt_rank + 2 * state)
            + dt_rank * inner + inner * state + inner * hidden) // tp


def _vision_params(raw: Mapping[str, Any], rules: WeightRules, text_hidden: int,
                   tp: int) -> tuple[int, int]:
    """(parameters on one rank, parameters of the whole tower) of the vision tower."""
    vision = raw.get("vision_config")
    if not isinstance(vision, Mapping):
        return 0, 0
    tower = rules.vision_towers.get(str(raw.get("model_type", "")))
    if tower is None:
        hidden = config_int(vision, "hidden_size")
        inter = config_int(vision, "intermediate_size", default=4 * hidden)
        layers = config_int(vision, "num_hidden_layers", "depth")
        whole = layers * (4 * hidden * hidden + 2 * hidden * inter)
        return whole // tp, whole
    width = config_int(vision, tower.width_field)
    ratio = vision.get(tower.mlp_ratio_field) if tower.mlp_ratio_field else None
    inter = config_int(vision, *(f for f in (tower.intermediate_field,) if f),
                       default=int(width * ratio) if isinstance(ratio, int | float) else 4 * width)
    layers = config_int(vision, *tower.layers_fields)
    mlp = layers * tower.mlp_matrices * width * inter
    blocks = layers * 4 * width * width + (0 if tower.replicated_mlp else mlp)
    on_every_rank = mlp if tower.replicated_mlp else 0
    patch = config_int(vision, "in_channels", "in_chans", default=3) \
        * config_int(vision, "temporal_patch_size", default=1) \
        * config_int(vision, "patch_size", default=14) ** 2 * width
    merger = 0
    if tower.merger:
        merged = width * config_int(vision, "spatial_merge_size", default=2) ** 2
        out = config_int(vision, "out_hidden_size", default=text_hidden)
        copies = vision.get(tower.merger_copies_field) if tower.merger_copies_field else None
        merger = (1 + (len(copies) if isinstance(copies, list) else 0)) \
            * (merged * merged + merged * out)
    positions = (config_int(vision, tower.position_field) * width * tower.position_tables
                 if tower.position_field else 0)
    if tower.position_grid:
        side = config_int(vision, "image_size") // max(1, config_int(vision, "patch_size", default=14))
        positions += side * side * width
    projection = width * text_hidden if tower.projection else 0
    if tower.projection and tower.projector_widths:
        widths = [config_int(raw, field) for field in tower.projector_widths] + [text_hidden]
        projection = sum(a * b for a, b in pairwise(widths))
    split = blocks + merger
    whole = split + on_every_rank + patch + positions + projection
    if tower.replicated:
        return whole, whole
    return split // tp + on_every_rank + patch + positions + projection, whole


def quant_scheme_of(raw: Mapping[str, Any], profile: StartupProfile,
                    quantization: str | None = None) -> tuple[QuantScheme | None, str | None]:
    """The checkpoint's quantization scheme (or the ``--quantization`` one), or (None,
    method) for one not modelled (selector/memory/quant.py)."""
    plan, method = quant_plan(raw, profile, quantization)
    return (plan.scheme if plan else None), method


def _quantize_parts(parts: list[WeightPart], plan: QuantPlan | None, profile: StartupProfile, *,
                    model_type: str, num_layers: int) -> list[WeightPart]:
    """Each part in the storage vLLM's quant method gives it; a part the ignore list
    leaves partly unquantized splits into its quantized share and ``NAME (not quantized)``."""
    if plan is None:
        return parts
    out: list[WeightPart] = []
    for part in parts:
        share = part_shares(plan, profile, part.name, model_type=model_type,
                            num_layers=num_layers)
        quantized = round(part.params * share)
        if quantized:
            out.append(part.model_copy(update={"params": quantized,
                                               "bits": plan.bits_per_weight}))
        if part.params - quantized:
            name = part.name if not quantized else f"{part.name} (not quantized)"
            out.append(part.model_copy(update={"name": name,
                                               "params": part.params - quantized}))
    return out


def _family_config(section: Mapping[str, Any], family: Family,
                   omitted: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The language model's config with the family's defaults, its config class's
    defaults for the fields it omits (``omitted``: vLLM reads the config through that
    class, schemas/models/config_defaults.yaml) and canonical names for its aliases
    (GPTBigCode's ``n_embd`` ...)."""
    generic = families()[GENERIC].aliases
    given = {*section, *(name for canonical, others in [*family.aliases.items(), *generic.items()]
                         if canonical in section or any(o in section for o in others)
                         for name in (canonical, *others))}
    cfg = {**{k: v for k, v in (omitted or {}).items() if k not in given}, **family.defaults,
           **section}
    # the fields the family's model class reads in place of the canonical ones (an
    # encoder-decoder's decoder: config.decoder.d_model, transf_decoder.config_dict...)
    cfg.update({canonical: value for canonical, source in family.reads.items()
                if (value := _at(section, source)) is not None})
    for canonical, others in [*family.aliases.items(), *generic.items()]:
        if canonical not in cfg:
            found = next((cfg[name] for name in others if name in cfg), None)
            if found is not None:
                cfg[canonical] = found
    # the config class's attribute_map: vLLM's getattr(config, "intermediate_size") is
    # LongcatFlashConfig's ffn_hidden_size (schemas/models/config_defaults.yaml)
    recorded = class_defaults(str(cfg.get("model_type") or "")) if cfg.get("model_type") else None
    for asked, field in (recorded.attribute_map.items() if recorded else ()):
        if asked not in cfg and cfg.get(field) is not None:
            cfg[asked] = cfg[field]
    return cfg


def _at(section: Mapping[str, Any], path: str) -> Any:
    """The value at ``path``: a key, or a dotted path into nested objects."""
    if path in section:
        return section[path]
    value: Any = section
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _facts(raw: Mapping[str, Any], model: ModelFacts | None) -> ModelFacts | None:
    if model is not None:
        return model
    try:
        return parse_config(raw, file="config.json")
    except InputError:
        return None


def estimate_weights(raw: Mapping[str, Any], *, layer_kinds: tuple[str, ...], tp: int,
                     dtype_bytes: int, cc: int, profile: StartupProfile,
                     moe_backend: str | None = None,
                     quantization: str | None = None,
                     stage: tuple[int, int] | None = None,
                     model: ModelFacts | None = None) -> WeightEstimate:
    """The weights one of ``tp`` GPUs holds. ``layer_kinds``: each decoder layer's token
    mixer (``attention``, ``mla``, ``mamba``, ``gdn``...) from the model facts; ``model``:
    those facts (read from ``raw`` when not given), whose per-layer heads, head sizes and
    state mixers the count uses, and whose family's ``weights`` rules
    (schemas/models/families.yaml) place the feed-forward blocks; ``quantization``: the
    ``--quantization`` value, if any; ``stage``: the decoder layers [start, end) of one
    pipeline-parallel stage (selector/memory/pp.py), which holds the embedding when it
    starts at layer 0 (or ends at the last layer with tied embeddings) and the lm_head when
    it ends at the last layer (vLLM's model classes: checked by
    tests/golden/test_pp_stages.py)."""
    facts = _facts(raw, model)
    family = resolve_family(facts.architecture)[0] if facts is not None else None
    section = text_config(raw)
    wrapper = family.weights.unknown_when if family is not None else {}
    if family is not None and family.language_model is not None:
        # a wrapper: the rules and the section of the language model it builds
        section, family = language_model_config(raw)
    rules = family.weights if family is not None else WeightRules()
    try:
        omitted = omitted_defaults(raw)
    except InputError:  # a malformed config: the parse names the problem
        omitted = {}
    cfg = _family_config(section, family, omitted) if family is not None else {**omitted, **section}
    hidden = config_int(cfg, "hidden_size")
    vocab = config_int(cfg, *rules.vocab_fields, "vocab_size", default=rules.vocab_default or 32000)
    layers = facts.layers if facts is not None and len(facts.layers) == len(layer_kinds) else None
    num_layers = len(layer_kinds)
    dense_inter = config_int(cfg, *rules.intermediate_fields, "intermediate_size_mlp",
                             "intermediate_size", default=4 * hidden)
    if isinstance(cfg.get("intermediate_size"), list) and not rules.intermediate_fields:
        widths = [w for w in cfg["intermediate_size"] if isinstance(w, int)]
        dense_inter = widths[0] if widths else 4 * hidden
    dense_inter //= rules.intermediate_divisor
    if rules.ffn_sizing is not None and cfg.get(rules.ffn_sizing.flag_field):
        dense_inter = _llama_ffn_width(cfg, rules.ffn_sizing, dense_inter)
    num_experts = config_int(cfg, *_EXPERT_KEYS)
    expert_inter = config_int(cfg, "moe_intermediate_size", default=config_int(cfg, "intermediate_size"))
    shared_inter = config_int(cfg, *(f for f in (rules.shared_expert_field,) if f),
                              "shared_expert_intermediate_size")
    if rules.shared_expert_count_field:
        shared_inter *= config_int(cfg, rules.shared_expert_count_field, default=1)
    if not shared_inter and config_int(cfg, "n_shared_experts"):
        shared_inter = config_int(cfg, "n_shared_experts") * expert_inter
    shapes = profile.memory.weights
    if not shared_inter and cfg.get("model_type") in shapes.shared_expert_intermediate_types:
        shared_inter = config_int(cfg, "intermediate_size")
    plan, _ = quant_plan(raw, profile, quantization)
    scheme = plan.scheme if plan else None
    base_bits = 8.0 * dtype_bytes
    linear_bits = expert_bits = base_bits  # quantize_parts sets each part's storage

    chosen_backend = None
    latent = config_int(cfg, rules.expert_hidden_field) if rules.expert_hidden_field else 0
    e_hidden, e_inter = latent or hidden, expert_inter
    if scheme is not None and scheme.name == "mxfp4" and num_experts:
        row = profile.mxfp4_backend(cc, moe_backend)
        chosen_backend = row.backend
        e_inter = _round_up(expert_inter, row.intermediate_multiple)
        e_hidden = _round_up(hidden, row.hidden_multiple)

    scored = num_experts + (config_int(cfg, rules.router_extra_experts_field)
                            if rules.router_extra_experts_field else 0)  # router rows
    attn_sharded = attn_replicated = dense = experts = expert_bias = shared = router = ssm = 0
    total_attn = total_mlp = 0
    ffn = _ffn_layers(cfg, rules, num_layers, dense_inter, hidden)
    e_matrices, mlp_matrices = rules.expert_matrices, rules.mlp_matrices
    first, last = (stage or (0, num_layers))
    for index, kind in enumerate(layer_kinds):
        here = 1 if first <= index < last else 0  # this GPU's stage holds the layer
        layer = layers[index] if layers is not None else None
        modules = layer.attentions if layer is not None else 1  # attention modules
        state = layer.ssm if layer is not None else None
        if kind in ("mamba", "gdn") or (layer is not None and layer.has_parallel_state):
            ssm += here * _ssm_params(cfg, state, tp)
            total_attn += _ssm_params(cfg, state, 1)
        if kind in ("mamba", "gdn"):
            pass
        elif kind == "none" and (layer is None or layer.kv_sharing_target is None):
            pass  # an MLP/MoE-only block or a no-op attention: no mixer weights
        elif rules.compressed_attention_field and cfg.get(rules.compressed_attention_field):
            sharded, replicated = _compressed_attention(cfg, index, tp)
            attn_sharded += here * sharded
            attn_replicated += here * replicated
            whole, rep = _compressed_attention(cfg, index, 1)
            total_attn += whole + rep
        elif kind == "mla" or cfg.get("kv_lora_rank") or layer is None or not layer.total_q_heads:
            sharded, replicated = _attention_params(cfg, tp)
            attn_sharded += here * modules * sharded
            attn_replicated += here * modules * replicated
            whole, rep = _attention_params(cfg, 1)
            total_attn += modules * (whole + rep)
        else:
            q_gate = bool(cfg.get(rules.q_gate_field, rules.q_gate_default)
                          if rules.q_gate_field else rules.q_gate_default)
            sink_values = bool(rules.sink_value_field and cfg.get(rules.sink_value_field))
            q_extra = config_int(cfg, rules.q_extra_per_head_field) \
                if rules.q_extra_per_head_field else 0
            attn_sharded += here * modules * _layer_attention(layer, hidden, tp, q_gate,
                                                              sink_values, q_extra)
            total_attn += modules * _layer_attention(layer, hidden, 1, q_gate, sink_values,
                                                     q_extra)
        block, width = ffn[index]
        if block == "moe":
            experts += here * num_experts * e_matrices * e_hidden * e_inter // tp
            if cfg.get("model_type") in shapes.expert_bias_types:
                expert_bias += here * num_experts * (2 * e_inter + e_hidden) // tp
            shared += here * e_matrices * hidden * shared_inter // tp
            router += here * (hidden * scored + (2 * hidden * latent if latent else 0))
            total_mlp += num_experts * e_matrices * (latent or hidden) * expert_inter \
                + e_matrices * hidden * shared_inter + hidden * scored + 2 * hidden * latent
        if block == "dense" or (block == "moe" and rules.moe_keeps_dense):
            dense += here * rules.dense_mlps * mlp_matrices * hidden * width \
                // (1 if rules.replicated_mlp else tp)
            total_mlp += rules.dense_mlps * mlp_matrices * hidden * width
        elif block == "linear":
            dense += here * hidden * hidden // tp
            total_mlp += hidden * hidden
    padded_vocab = _round_up(vocab, 64) // tp
    tied = rules.ties_always or bool(cfg.get("tie_word_embeddings", rules.tie_word_embeddings))
    everywhere = cfg.get("model_type") in shapes.pp_vocab_every_stage_types
    holds_embedding = everywhere or first == 0 or (tied and last == num_layers)
    holds_lm_head = (everywhere or last == num_layers) and not tied
    positions = 0
    if rules.position_embedding_offset is not None:
        positions = (config_int(cfg, "max_position_embeddings")
                     + rules.position_embedding_offset) * hidden
    vision, total_vision = _vision_params(raw, rules, hidden, tp)
    # the n-gram tables sit on the first pipeline stage only (longcat_flash_ngram.py:176-178)
    ngram_tables, ngram_projections = _ngram_params(cfg, rules.ngram_embedding, vocab, hidden, tp)
    ngram = ngram_tables + ngram_projections if first == 0 else 0
    parts = [
        WeightPart(name="embedding",
                   params=((padded_vocab * (tp if rules.replicated_embedding else 1) * hidden
                            + positions) if holds_embedding else 0) + ngram,
                   bits=base_bits),
        WeightPart(name="lm_head", params=padded_vocab * hidden if holds_lm_head else 0,
                   bits=base_bits),
        WeightPart(name="attention", params=attn_sharded + attn_replicated, bits=linear_bits),
        WeightPart(name="ssm mixers", params=ssm, bits=linear_bits),
        WeightPart(name="dense MLP", params=dense, bits=linear_bits),
        WeightPart(name="routed experts", params=experts, bits=expert_bits),
        WeightPart(name="expert biases", params=expert_bias, bits=base_bits),
        WeightPart(name="shared experts", params=shared, bits=linear_bits),
        WeightPart(name="router", params=router, bits=32.0 if rules.router_float32 else base_bits),
        WeightPart(name="vision tower", params=vision if first == 0 else 0, bits=base_bits),
    ]
    whole_tables, _ = _ngram_params(cfg, rules.ngram_embedding, vocab, hidden, 1)
    total = vocab * hidden * (1 if tied else 2) + positions + total_attn + total_mlp + total_vision \
        + whole_tables + ngram_projections
    parts = _quantize_parts(parts, plan, profile, model_type=str(cfg.get("model_type", "")),
                            num_layers=num_layers)
    # the wrapper's parts beside its language model's (a vision tower, a resampler)
    unknown_when = {**wrapper, **rules.unknown_when}
    unknown = tuple(part for field, part in unknown_when.items()
                    if cfg.get(field) or raw.get(field))
    if not (hidden and num_layers) and not unknown:  # (a part named already says why)
        unknown += ("the language model's shapes",)
    return WeightEstimate(parts=tuple(p for p in parts if p.params), total_params=total,
                          quantization=scheme.name if scheme else None, moe_backend=chosen_backend,
                          tensor_parallel_size=tp, unknown=unknown)
