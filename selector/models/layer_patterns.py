"""Which token mixer each layer uses: the family's mixer rule (data in
``schemas/models/families.yaml``) read against the config, an explicit
``layer_types`` list first, and vLLM's model-wide sliding-window rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from selector.models.config_reader import ConfigReader
from selector.models.families import MixerName, MixerRules

__all__ = [
    "LAYER_TYPE_TOKENS",
    "MixerType",
    "mixed_window_refusal",
    "model_wide_window",
    "resolve_mixers",
]

MixerType = MixerName

LAYER_TYPE_TOKENS: dict[str, MixerType] = {
    "full_attention": "full_attention",
    "attention": "full_attention",
    "global": "full_attention",
    "sliding_attention": "sliding_attention",
    "local": "sliding_attention",
    "chunked_attention": "chunked_attention",
    "linear_attention": "linear_attention",
    "mamba": "mamba",
    "conv": "short_conv",
    "cross_attention": "cross_attention",
}
"""``layer_types`` entries as the Hugging Face config classes write them."""


def _sliding_if(predicate: list[bool]) -> list[MixerType]:
    return ["sliding_attention" if p else "full_attention" for p in predicate]


def _explicit(text: ConfigReader, num_layers: int,
              extra: dict[str, MixerType] | None = None) -> list[MixerType] | None:
    tokens = text.str_list("layer_types")
    known = {**LAYER_TYPE_TOKENS, **(extra or {})}
    if tokens is None:
        return None
    if len(tokens) < num_layers:
        raise text.error(
            "layer_types",
            f"has {len(tokens)} entries but num_hidden_layers is {num_layers}",
        )
    mixers: list[MixerType] = []
    for i, token in enumerate(tokens[:num_layers]):
        if token not in known:
            raise text.error(
                f"layer_types[{i}]",
                f"unknown layer type {token!r}",
                hint="known: " + ", ".join(sorted(known)),
            )
        mixers.append(known[token])
    return mixers


def _alternating(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    period = text.int_(rules.period_field, rules.period) if rules.period_field else rules.period
    return _sliding_if([(i + 1) % period != 0 for i in range(n)])


def _qwen_window(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    """transformers' Qwen2Config: ``sliding_window`` only with
    ``use_sliding_window``, and layer i slides when ``i >= max_window_layers``
    (its ``layer_types``); vLLM's Qwen2Model refuses a mix of the two (see
    :func:`mixed_window_refusal`)."""
    windowed = text.bool_("use_sliding_window") and text.has("sliding_window")
    first = text.int_("max_window_layers", 28, minimum=0)
    return _sliding_if([windowed and i >= first for i in range(n)])


def mixed_window_refusal(text: ConfigReader, rules: MixerRules, n: int) -> str | None:
    """The family's start-up refusal for a config whose layer_types would mix
    sliding and full attention (Qwen2: ``max_window_layers`` inside the stack)."""
    if rules.refuse_mixed is None or rules.rule != "qwen_window":
        return None
    if not (text.bool_("use_sliding_window") and text.has("sliding_window")):
        return None
    first = text.int_("max_window_layers", 28, minimum=0)
    if 0 < first < n:
        return rules.refuse_mixed.format(max_window_layers=first, num_hidden_layers=n)
    return None


def _interval(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    interval = text.int_(rules.field, rules.interval, minimum=1) if rules.field else rules.interval
    tail = n // interval * interval if rules.interval_tail else n
    return ["full_attention" if (i + 1) % interval == 0 or i >= tail else rules.other
            for i in range(n)]


def _period_offset(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    period = text.int_(rules.period_field, rules.period) if rules.period_field else rules.period
    offset_key = rules.offset_field
    offset = text.int_(offset_key, rules.offset, minimum=0) if offset_key else rules.offset
    if offset >= period:
        raise text.error(
            offset_key or "offset", f"must be smaller than the period ({period}), got {offset}"
        )
    return ["full_attention" if i % period == offset else rules.other for i in range(n)]


def _period_middle(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    """Full attention where ``i % period == period // 2``, ``other`` elsewhere; a stack of
    at most ``period // 2`` layers has full attention in its last layer only (PLaMo-2's
    ``is_mamba``)."""
    period = text.int_(rules.period_field, rules.period) if rules.period_field else rules.period
    if period < 2:
        raise text.error(rules.period_field or "period", f"must be at least 2, got {period}")
    if n <= period // 2:
        return [rules.other] * (n - 1) + ["full_attention"] if n else []
    return ["full_attention" if i % period == period // 2 else rules.other for i in range(n)]


def _mapped(
    text: ConfigReader, key: str, entries: list[Any], table: dict[str, MixerType], n: int
) -> list[MixerType]:
    if len(entries) < n:
        raise text.error(key, f"has {len(entries)} entries but num_hidden_layers is {n}")
    out: list[MixerType] = []
    for i, entry in enumerate(entries[:n]):
        token = str(entry)
        if token not in table:
            raise text.error(
                f"{key}[{i}]", f"unknown layer kind {token!r}", hint="known: " + ", ".join(table)
            )
        out.append(table[token])
    return out


def _char_pattern(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    key = rules.field or "hybrid_override_pattern"
    pattern = text.str_(key)
    if pattern is None:
        raise text.error(key, "missing required field", hint="one character per layer")
    return _mapped(text, key, list(pattern), rules.chars, n)


def _list_pattern(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    key = rules.field or "hybrid_layer_pattern"
    entries = text.raw(key)
    if not isinstance(entries, list):
        raise text.error(key, "missing required field", hint="one entry per layer")
    return _mapped(text, key, entries, rules.values, n)


def _llama4(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    interval = text.int_("no_rope_layer_interval", 4)
    no_rope = text.int_list("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
    if len(no_rope) != n:
        raise text.error("no_rope_layers", f"has {len(no_rope)} entries but num_hidden_layers is {n}")
    chunked = text.has("attention_chunk_size")
    # no_rope_layers[i] == 1: the layer uses RoPE and local (chunked) attention;
    # 0: a NoPE global layer.
    return ["chunked_attention" if flag and chunked else "full_attention" for flag in no_rope]


def _block_configs(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    key = rules.field or "block_configs"
    blocks = text.raw(key)
    if not isinstance(blocks, list) or len(blocks) < n:
        raise text.error(key, f"expected a list of {n} block configs")
    out: list[MixerType] = []
    for i, block in enumerate(blocks[:n]):
        attention = block.get("attention") if isinstance(block, dict) else None
        if not isinstance(attention, dict):
            raise text.error(f"{key}[{i}].attention", "expected an object")
        # vLLM's nemotron_nas.py builds attention unless attention.no_op
        out.append("none" if attention.get("no_op") else "full_attention")
    return out


def _index_list(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    """Full attention at the indices the config lists (``field``), ``other`` elsewhere;
    every layer full attention when the list is absent (transformers' Lfm2Config)."""
    key = rules.field or "full_attn_idxs"
    indices = text.int_list(key)
    if indices is None:
        return ["full_attention"] * n
    chosen = {i - rules.index_base for i in indices}
    return [rules.listed if i in chosen else rules.other for i in range(n)]


def _state_only(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    """Every layer is the family's state mixer (``other``): an attention-free model."""
    return [rules.other] * n


def _uniform(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    if model_wide_window(text) is not None:
        return ["sliding_attention"] * n
    return ["full_attention"] * n


def _repeat(text: ConfigReader, rules: MixerRules, n: int) -> list[MixerType]:
    """Each config layer as the rule's ``unit`` of layers (``len(unit) * n`` layers)."""
    if not rules.unit:
        raise text.error("architectures", "the repeat rule needs a unit")
    return [mixer for _ in range(n) for mixer in rules.unit]


_RULES: dict[str, Callable[[ConfigReader, MixerRules, int], list[MixerType]]] = {
    "uniform": _uniform,
    "alternating": _alternating,
    "qwen_window": _qwen_window,
    "interval": _interval,
    "period_offset": _period_offset,
    "period_middle": _period_middle,
    "char_pattern": _char_pattern,
    "list_pattern": _list_pattern,
    "llama4": _llama4,
    "block_configs": _block_configs,
    "index_list": _index_list,
    "state_only": _state_only,
    "repeat": _repeat,
}
assert set(_RULES) <= set(get_args(MixerRules.model_fields["rule"].annotation))


def model_wide_window(text: ConfigReader) -> int | None:
    """The config's ``sliding_window`` as vLLM reads it (0 and a disabled
    ``use_sliding_window`` mean none)."""
    if text.has("use_sliding_window") and not text.bool_("use_sliding_window"):
        return None
    window = text.opt_int("sliding_window", minimum=0)
    return window or None


def _resolve(text: ConfigReader, rules: MixerRules, num_layers: int) -> list[MixerType]:
    if rules.layer_types == "use" and rules.rule not in ("char_pattern", "block_configs", "repeat"):
        explicit = _explicit(text, num_layers, rules.layer_type_values)
        if explicit is not None:
            return explicit
    if rules.fallback is not None and rules.field is not None and text.raw(rules.field) is None:
        return _resolve(text, rules.fallback, num_layers)
    rule = _RULES.get(rules.rule)
    if rule is None:
        raise text.error("architectures", f"the layer rule {rules.rule!r} is not implemented")
    return rule(text, rules, num_layers)


def resolve_mixers(text: ConfigReader, rules: MixerRules, num_layers: int) -> list[MixerType]:
    """Each layer's mixer: an explicit ``layer_types`` list (unless the family
    ignores it), else the family's rule; then the family's ``replace``."""
    mixers = _resolve(text, rules, num_layers)
    return [rules.replace.get(m, m) for m in mixers]
