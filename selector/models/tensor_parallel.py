"""Per-rank head counts under tensor parallelism, as vLLM shards them."""

from __future__ import annotations

from selector.errors import InputError
from selector.models.facts import (
    GDNDims,
    LayerFacts,
    LinearAttnDims,
    Mamba1Dims,
    Mamba2Dims,
    ModelFacts,
    ShortConvDims,
)

__all__ = ["shard_layer", "shard_model"]


def _fail(model: ModelFacts, field: str, message: str) -> InputError:
    return InputError(message, file=model.source, field=field)


def _check_ssm(model: ModelFacts, layer: LayerFacts, tp: int) -> None:
    ssm = layer.ssm
    if isinstance(ssm, Mamba1Dims) and ssm.intermediate_size % tp:
        raise _fail(
            model,
            "mamba_expand",
            f"Mamba intermediate size {ssm.intermediate_size} is not divisible by "
            f"tensor parallel size {tp}",
        )
    if isinstance(ssm, Mamba2Dims) and ssm.num_heads % tp:
        raise _fail(
            model,
            "mamba_num_heads",
            f"{ssm.num_heads} Mamba-2 heads are not divisible by tensor parallel size {tp}",
        )
    if isinstance(ssm, ShortConvDims) and ssm.conv_dim % tp:
        raise _fail(
            model,
            "conv_dim",
            f"short-conv dim {ssm.conv_dim} is not divisible by tensor parallel size {tp}",
        )
    if isinstance(ssm, LinearAttnDims) and ssm.num_heads % tp:
        # vllm/model_executor/layers/mamba/linear/base.py:49 (LinearAttention asserts it)
        raise _fail(
            model,
            "num_attention_heads",
            f"{ssm.num_heads} linear-attention heads are not divisible by tensor parallel "
            f"size {tp}",
        )
    if isinstance(ssm, LinearAttnDims) and tp > ssm.group_norm_size:
        # vllm/model_executor/layers/mamba/linear/bailing_linear_attn.py:446-453, in its words
        raise _fail(model, "group_norm_size", "tp_size must be <= group_norm_size for local rms norm")
    if isinstance(ssm, LinearAttnDims) and ssm.group_norm_size % tp:
        raise _fail(model, "group_norm_size", "group_norm_size must be divisible by tp_size")
    if isinstance(ssm, GDNDims):
        if ssm.num_v_heads % tp:
            raise _fail(
                model,
                "linear_num_value_heads",
                f"{ssm.num_v_heads} linear-attention value heads are not divisible by "
                f"tensor parallel size {tp}",
            )
        if ssm.conv_dim % tp:
            raise _fail(
                model,
                "linear_num_key_heads",
                f"GDN conv dim {ssm.conv_dim} is not divisible by tensor parallel size {tp}",
            )


def shard_layer(model: ModelFacts, layer: LayerFacts, tp: int) -> LayerFacts:
    """One layer's facts on a rank: q heads ``total // tp``; KV heads
    ``max(1, total_kv // tp)`` (replicated when ``tp`` exceeds them)."""
    if layer.kind == "none":
        return layer
    if layer.is_ssm:
        _check_ssm(model, layer, tp)
        return layer
    if layer.has_parallel_state:
        _check_ssm(model, layer, tp)
    conv = layer.conv_cache
    if conv is not None:
        # InklingConvState, built before the layer's attention, asserts whole KV heads per
        # rank (vllm/models/inkling/nvidia/sconv_swa_attn.py:142-145 in 0.33.0)
        if tp > conv.total_kv_heads:
            raise _fail(model, "num_key_value_heads",
                        f"sconv SWA cache supports tp_size <= num_kv_heads "
                        f"({conv.total_kv_heads}), got {tp}")
        conv = conv.model_copy(update={"num_kv_heads": conv.total_kv_heads // tp})
        layer = layer.model_copy(update={"conv_cache": conv})
    total_q, total_kv = layer.total_q_heads, layer.total_kv_heads
    if total_q % tp:
        raise _fail(
            model,
            "num_attention_heads",
            f"Total number of attention heads ({total_q}) must be divisible by "
            f"tensor parallel size ({tp}).",
        )
    if layer.kind == "mla":
        return layer.model_copy(update={"num_q_heads": total_q // tp, "num_kv_heads": 1})
    if total_kv >= tp and total_kv % tp:
        raise _fail(
            model,
            "num_key_value_heads",
            f"{total_kv} KV heads are not divisible by tensor parallel size {tp}",
        )
    if total_kv < tp and tp % total_kv:
        raise _fail(
            model,
            "num_key_value_heads",
            f"tensor parallel size {tp} is not a multiple of the {total_kv} KV heads "
            "they would be replicated over",
        )
    return layer.model_copy(
        update={"num_q_heads": total_q // tp, "num_kv_heads": max(1, total_kv // tp)}
    )


def shard_model(model: ModelFacts, tp: int) -> ModelFacts:
    """The model as one of ``tp`` tensor-parallel ranks sees it."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise _fail(model, "tensor_parallel_size", f"must be a positive integer, got {tp!r}")
    layers = tuple(shard_layer(model, layer, tp) for layer in model.layers)
    return model.model_copy(update={"layers": layers, "tp_size": tp})
