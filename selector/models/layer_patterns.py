"""Which token mixer each layer uses, following the Hugging Face config classes'
defaults for ``layer_types`` and vLLM's model-wide sliding-window rule."""

from __future__ import annotations

from typing import Literal

from selector.models.config_reader import ConfigReader

__all__ = ["MixerType", "resolve_mixers"]

MixerType = Literal[
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
    "mamba",
    "cross_attention",
]

_LAYER_TYPE_TOKENS: dict[str, MixerType] = {
    "full_attention": "full_attention",
    "attention": "full_attention",
    "global": "full_attention",
    "sliding_attention": "sliding_attention",
    "local": "sliding_attention",
    "chunked_attention": "chunked_attention",
    "linear_attention": "linear_attention",
    "mamba": "mamba",
    "cross_attention": "cross_attention",
}

_ALTERNATING_SLIDING = frozenset({"gemma2", "gpt_oss"})
_GEMMA3 = frozenset({"gemma3", "gemma3_text"})
_QWEN_WINDOWED = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})
_LLAMA4 = frozenset({"llama4", "llama4_text"})


def _sliding_if(num_layers: int, predicate: list[bool]) -> list[MixerType]:
    return ["sliding_attention" if p else "full_attention" for p in predicate[:num_layers]]


def _jamba(text: ConfigReader, num_layers: int) -> list[MixerType]:
    period = text.int_("attn_layer_period", 8)
    offset = text.int_("attn_layer_offset", 4, minimum=0)
    if offset >= period:
        raise text.error(
            "attn_layer_offset", f"must be smaller than attn_layer_period ({period}), got {offset}"
        )
    return ["full_attention" if i % period == offset else "mamba" for i in range(num_layers)]


def _explicit(text: ConfigReader, num_layers: int) -> list[MixerType] | None:
    tokens = text.str_list("layer_types")
    if tokens is None:
        return None
    if len(tokens) != num_layers:
        raise text.error(
            "layer_types",
            f"has {len(tokens)} entries but num_hidden_layers is {num_layers}",
        )
    mixers: list[MixerType] = []
    for i, token in enumerate(tokens):
        if token not in _LAYER_TYPE_TOKENS:
            raise text.error(
                f"layer_types[{i}]",
                f"unknown layer type {token!r}",
                hint="known: " + ", ".join(sorted(_LAYER_TYPE_TOKENS)),
            )
        mixers.append(_LAYER_TYPE_TOKENS[token])
    return mixers


def _llama4(text: ConfigReader, num_layers: int) -> list[MixerType]:
    interval = text.int_("no_rope_layer_interval", 4)
    no_rope = text.int_list("no_rope_layers") or [
        int((i + 1) % interval != 0) for i in range(num_layers)
    ]
    if len(no_rope) != num_layers:
        raise text.error(
            "no_rope_layers", f"has {len(no_rope)} entries but num_hidden_layers is {num_layers}"
        )
    chunked = text.has("attention_chunk_size")
    # no_rope_layers[i] == 1: the layer uses RoPE and local (chunked) attention;
    # 0: a NoPE global layer.
    return ["chunked_attention" if flag and chunked else "full_attention" for flag in no_rope]


def _default_pattern(
    text: ConfigReader, model_type: str, num_layers: int
) -> list[MixerType] | None:
    if model_type in _ALTERNATING_SLIDING:
        return _sliding_if(num_layers, [(i + 1) % 2 != 0 for i in range(num_layers)])
    if model_type in _GEMMA3:
        pattern = text.int_("sliding_window_pattern", 6)
        return _sliding_if(num_layers, [(i + 1) % pattern != 0 for i in range(num_layers)])
    if model_type in _QWEN_WINDOWED:
        windowed = text.bool_("use_sliding_window") and text.has("sliding_window")
        first = text.int_("max_window_layers", 28, minimum=0)
        return _sliding_if(num_layers, [windowed and i >= first for i in range(num_layers)])
    if model_type == "qwen3_next":
        interval = text.int_("full_attention_interval", 4)
        return [
            "linear_attention" if (i + 1) % interval else "full_attention"
            for i in range(num_layers)
        ]
    if model_type in _LLAMA4:
        return _llama4(text, num_layers)
    return None


def model_wide_window(text: ConfigReader) -> int | None:
    """The config's ``sliding_window`` as vLLM reads it (0 and a disabled
    ``use_sliding_window`` mean none)."""
    if text.has("use_sliding_window") and not text.bool_("use_sliding_window"):
        return None
    window = text.opt_int("sliding_window", minimum=0)
    return window or None


def resolve_mixers(text: ConfigReader, model_type: str, num_layers: int) -> list[MixerType]:
    """Each layer's mixer. ``layer_types`` wins; else the config class's default
    pattern; else vLLM's rule that a model-wide ``sliding_window`` applies to every
    attention layer."""
    if model_type == "jamba" or text.has("attn_layer_period"):
        return _jamba(text, num_layers)
    mixers = _explicit(text, num_layers) or _default_pattern(text, model_type, num_layers)
    if mixers is not None:
        return mixers
    if model_wide_window(text) is not None:
        return ["sliding_attention"] * num_layers
    return ["full_attention"] * num_layers
