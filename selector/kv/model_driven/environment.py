"""What the rule's expressions read: the config's fields (``config_env``) and each decoder
layer's environment (``layer_envs``: its index, type, compression ratio and the rule's
``layer_values``); the layers' types and the report's names of their kinds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from selector.kv.model_driven.expressions import evaluate
from selector.kv.model_driven.rules import DrivenModel
from selector.models.facts import ModelFacts

__all__ = [
    "compress_ratios",
    "config_env",
    "layer_envs",
    "layer_kinds",
    "layer_types",
]


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    nested = config.get("text_config")
    return nested if isinstance(nested, Mapping) else config


def compress_ratios(rule: DrivenModel, model: ModelFacts) -> list[int]:
    """Each decoder layer's compression ratio (the config's ``compress_ratios_field``)."""
    text = _text_config(model.config or {})
    field = rule.compress_ratios_field
    return [int(r) for r in (text.get(field) if field else None) or [0] * model.num_layers]


def _lookup(config: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """(whether the path's section is there, the value at the dotted path or None)."""
    node: Any = config
    parts = path.split(".")
    for depth, part in enumerate(parts):
        if not isinstance(node, Mapping) or part not in node:
            return depth == len(parts) - 1 and isinstance(node, Mapping), None
        node = node[part]
    return True, node


def _numbers(text: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
             ) -> dict[str, Any]:
    """The config's scalar fields and its lists of integers (as tuples, for ``in``), over
    ``defaults`` for the fields it omits (or gives null or empty)."""
    text = {**(defaults or {}), **{k: v for k, v in text.items() if v not in (None, [])}}
    out: dict[str, Any] = {k: v for k, v in text.items() if isinstance(v, int | float | str)}
    out.update({k: tuple(v) for k, v in text.items()
                if isinstance(v, list | tuple) and all(isinstance(i, int) for i in v)})
    return out


def config_env(rule: DrivenModel, config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's scalar fields and lists of integers (over the rule's
    ``config_defaults``) and the rule's ``fields`` (their defaults where the section is
    there but the key is not), as the expressions read them."""
    text = _text_config(config)
    env = _numbers(text, {k: v for k, v in rule.config_defaults.items() if k not in rule.fields})
    for name, path in rule.fields.items():
        section, value = _lookup(text, path)
        if value is None and section:
            value = rule.config_defaults.get(name)
        if isinstance(value, Mapping):  # a section: its presence (its keys have paths of their own)
            value = True
        env[name] = tuple(value) if isinstance(value, list | tuple) else value
    return env


def _listed_types(rule: DrivenModel, config: Mapping[str, Any]) -> list[Any]:
    text = _text_config(config)
    return next((list(text[f]) for f in rule.layer_types_fields if text.get(f)), [])


def layer_types(rule: DrivenModel, config: Mapping[str, Any], num_layers: int) -> list[str]:
    """Each decoder layer's type: its entry of the first of ``layer_types_fields`` the
    config has, else ``layer_type_default`` (an entry past a list's end: the default)."""
    listed = _listed_types(rule, config)
    return [str(listed[i]) if i < len(listed)
            else str(evaluate(rule.layer_type_default, {"layer_index": i}))
            for i in range(num_layers)]


def layer_envs(rule: DrivenModel, config: Mapping[str, Any], extra: Mapping[str, Any]
               ) -> list[dict[str, Any]]:
    """Each decoder layer's environment: the config's fields, ``layer_index``,
    ``layer_type`` (``layer_listed``: the type is a list's entry), ``compress_ratio``,
    ``extra``, then the rule's ``layer_values`` in order."""
    text = _text_config(config)
    num_layers = int(text.get("num_hidden_layers") or 0)
    field = rule.compress_ratios_field
    ratios = list((text.get(field) if field else None) or [])  # absent: every layer ratio 0
    types = layer_types(rule, config, num_layers)
    listed = len(_listed_types(rule, config))
    base = config_env(rule, config)
    out: list[dict[str, Any]] = []
    for index in range(num_layers):
        env: dict[str, Any] = {**base, "layer_index": index, "layer_type": types[index],
                               "layer_listed": index < listed,
                               "compress_ratio": int(ratios[index]) if index < len(ratios) else 0,
                               **extra}
        for value_name, value in rule.layer_values.items():
            env[value_name] = evaluate(value, env)
        out.append(env)
    return out


def layer_kinds(rule: DrivenModel, model: ModelFacts, backends: Sequence[str | None]
                ) -> list[str]:
    """How the report names each decoder layer's kind: the rule's ``kind_prefix`` with the
    layer's compression ratio (``compress_ratios_field``), else its type and its backend
    (``layer_backends``)."""
    if rule.compress_ratios_field:
        return [f"{rule.kind_prefix} (compress {r})" for r in compress_ratios(rule, model)]
    types = layer_types(rule, model.config or {}, model.num_layers)
    return [f"{rule.kind_prefix} ({t}, {b})" if b else f"{rule.kind_prefix} ({t})"
            for t, b in zip(types, backends, strict=True)]
