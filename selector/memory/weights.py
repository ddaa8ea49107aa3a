"""Weight bytes per GPU from a Hugging Face ``config.json``: the parameter count from the
architecture's shapes (attention or MLA projections, dense MLPs, routed and shared MoE
experts, Mamba / Gated DeltaNet mixers, embeddings, an untied lm_head, a vision tower),
the checkpoint's ``quantization_config`` and tensor / expert parallelism.

An estimate: norms, biases other than the experts' and small buffers are left out
(well under 0.1 % of the weights of the shipped presets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from selector.memory.profile import QuantScheme, StartupProfile
from selector.memory.quant import QuantPlan, part_shares, quant_plan

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


def _moe_layers(cfg: Mapping[str, Any], num_layers: int) -> list[bool]:
    """Which decoder layers have routed experts."""
    if not config_int(cfg, *_EXPERT_KEYS):
        return [False] * num_layers
    first_dense = config_int(cfg, "first_k_dense_replace")
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


def _attention_params(cfg: Mapping[str, Any], tp: int) -> tuple[int, int]:
    """(sharded-and-divided, replicated) parameters of one attention layer on one GPU."""
    hidden = config_int(cfg, "hidden_size")
    heads = config_int(cfg, "num_attention_heads", default=1)
    if cfg.get("kv_lora_rank"):
        nope = config_int(cfg, "qk_nope_head_dim")
        rope = config_int(cfg, "qk_rope_head_dim")
        v_dim = config_int(cfg, "v_head_dim")
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


def _ssm_params(cfg: Mapping[str, Any], kind: str) -> int:
    """Parameters of one Mamba-1 or Gated DeltaNet mixer (whole layer, before TP)."""
    hidden = config_int(cfg, "hidden_size")
    if kind == "gdn":
        nk = config_int(cfg, "linear_num_key_heads")
        nv = config_int(cfg, "linear_num_value_heads")
        dk = config_int(cfg, "linear_key_head_dim")
        dv = config_int(cfg, "linear_value_head_dim")
        kernel = config_int(cfg, "linear_conv_kernel_dim", default=4)
        conv_dim = 2 * nk * dk + nv * dv
        return hidden * (2 * nk * dk + 2 * nv * dv) + hidden * 2 * nv + conv_dim * kernel \
            + nv * dv * hidden
    expand = config_int(cfg, "mamba_expand", default=2)
    inner = expand * hidden
    state = config_int(cfg, "mamba_d_state", default=16)
    conv = config_int(cfg, "mamba_d_conv", default=4)
    dt_rank = config_int(cfg, "mamba_dt_rank", default=-(-hidden // 16))
    return hidden * 2 * inner + inner * conv + inner * (dt_rank + 2 * state) \
        + dt_rank * inner + inner * state + inner * hidden


def _vision_params(raw: Mapping[str, Any]) -> int:
    vision = raw.get("vision_config")
    if not isinstance(vision, Mapping):
        return 0
    hidden = config_int(vision, "hidden_size")
    inter = config_int(vision, "intermediate_size", default=4 * hidden)
    layers = config_int(vision, "num_hidden_layers", "depth")
    return layers * (4 * hidden * hidden + 2 * hidden * inter)


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


def estimate_weights(raw: Mapping[str, Any], *, layer_kinds: tuple[str, ...], tp: int,
                     dtype_bytes: int, cc: int, profile: StartupProfile,
                     moe_backend: str | None = None,
                     quantization: str | None = None,
                     stage: tuple[int, int] | None = None) -> WeightEstimate:
    """The weights one of ``tp`` GPUs holds. ``layer_kinds``: each decoder layer's token
    mixer (``attention``, ``mla``, ``mamba``, ``gdn``...) from the model facts;
    ``quantization``: the ``--quantization`` value, if any; ``stage``: the decoder layers
    [start, end) of one pipeline-parallel stage (selector/memory/pp.py), which holds the
    embedding when it starts at layer 0 (or ends at the last layer with tied embeddings)
    and the lm_head when it ends at the last layer (vLLM's model classes: checked by
    tests/golden/test_pp_stages.py)."""
    cfg = text_config(raw)
    hidden = config_int(cfg, "hidden_size")
    vocab = config_int(cfg, "vocab_size", default=32000)
    num_layers = len(layer_kinds)
    dense_inter = config_int(cfg, "intermediate_size_mlp", "intermediate_size", default=4 * hidden)
    num_experts = config_int(cfg, *_EXPERT_KEYS)
    expert_inter = config_int(cfg, "moe_intermediate_size", default=config_int(cfg, "intermediate_size"))
    shared_inter = config_int(cfg, "shared_expert_intermediate_size")
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
    e_hidden, e_inter = hidden, expert_inter
    if scheme is not None and scheme.name == "mxfp4" and num_experts:
        row = profile.mxfp4_backend(cc, moe_backend)
        chosen_backend = row.backend
        e_inter = _round_up(expert_inter, row.intermediate_multiple)
        e_hidden = _round_up(hidden, row.hidden_multiple)

    attn_sharded = attn_replicated = dense = experts = expert_bias = shared = router = ssm = 0
    total_attn = total_mlp = 0
    moe = _moe_layers(cfg, num_layers)
    first, last = (stage or (0, num_layers))
    for index, kind in enumerate(layer_kinds):
        here = 1 if first <= index < last else 0  # this GPU's stage holds the layer
        if kind in ("mamba", "gdn"):
            params = _ssm_params(cfg, kind)
            ssm += here * params // tp
            total_attn += params
        elif kind == "none":
            pass  # an MLP/MoE-only block or a no-op attention: no mixer weights
        else:
            sharded, replicated = _attention_params(cfg, tp)
            attn_sharded += here * sharded
            attn_replicated += here * replicated
            whole, rep = _attention_params(cfg, 1)
            total_attn += whole + rep
        if moe[index]:
            experts += here * num_experts * 3 * e_hidden * e_inter // tp
            if cfg.get("model_type") in shapes.expert_bias_types:
                expert_bias += here * num_experts * (2 * e_inter + e_hidden) // tp
            shared += here * 3 * hidden * shared_inter // tp
            router += here * hidden * num_experts
            total_mlp += num_experts * 3 * hidden * expert_inter + 3 * hidden * shared_inter \
                + hidden * num_experts
        else:
            dense += here * 3 * hidden * dense_inter // tp
            total_mlp += 3 * hidden * dense_inter
    padded_vocab = _round_up(vocab, 64) // tp
    tied = bool(cfg.get("tie_word_embeddings", False))
    everywhere = cfg.get("model_type") in shapes.pp_vocab_every_stage_types
    holds_embedding = everywhere or first == 0 or (tied and last == num_layers)
    holds_lm_head = (everywhere or last == num_layers) and not tied
    vision = _vision_params(raw)
    parts = [
        WeightPart(name="embedding", params=padded_vocab * hidden if holds_embedding else 0, bits=base_bits),
        WeightPart(name="lm_head", params=padded_vocab * hidden if holds_lm_head else 0, bits=base_bits),
        WeightPart(name="attention", params=attn_sharded + attn_replicated, bits=linear_bits),
        WeightPart(name="ssm mixers", params=ssm, bits=linear_bits),
        WeightPart(name="dense MLP", params=dense, bits=linear_bits),
        WeightPart(name="routed experts", params=experts, bits=expert_bits),
        WeightPart(name="expert biases", params=expert_bias, bits=base_bits),
        WeightPart(name="shared experts", params=shared, bits=linear_bits),
        WeightPart(name="router", params=router, bits=base_bits),
        WeightPart(name="vision tower", params=vision // tp if first == 0 else 0, bits=base_bits),
    ]
    total = vocab * hidden * (1 if tied else 2) + total_attn + total_mlp + vision
    parts = _quantize_parts(parts, plan, profile, model_type=str(cfg.get("model_type", "")),
                            num_layers=num_layers)
    return WeightEstimate(parts=tuple(p for p in parts if p.params), total_params=total,
                          quantization=scheme.name if scheme else None, moe_backend=chosen_backend,
                          tensor_parallel_size=tp)
