"""The defaults the config class vLLM reads a config.json through gives an omitted field.

vLLM builds its ``hf_config`` with ``AutoConfig`` (vLLM's own class of the model type,
else transformers'), so a field a config.json leaves out takes the class's default: a
published LLaVA config's ``text_config`` names only a few fields and leaves the Llama
sizes to ``LlamaConfig``. ``schemas/models/config_defaults.yaml`` holds those defaults
per model type (recorded by ``tools/config_defaults_oracle.py`` from the oracle
interpreter's classes, with each field's declaring file and line); fields the class
derives from others (``head_dim``, Llama's ``num_key_value_heads``) have no single
default and are not in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from selector.models.presets import read_preset_yaml

__all__ = ["ClassDefaults", "UsedDefault", "class_defaults", "recorded_model_types"]


@dataclass(frozen=True)
class UsedDefault:
    """A field the config omits whose value came from its config class's default."""

    field: str
    """The dotted field as the file would name it (``text_config.num_hidden_layers``)."""
    value: Any
    config_class: str
    source: str
    """The declaring file and line (``transformers/models/llama/configuration_llama.py:66``)."""

    def describe(self) -> str:
        return f"{self.field} = {self.value!r} ({self.config_class} default, {self.source})"


@dataclass(frozen=True)
class ClassDefaults:
    """One model type's config class and the defaults it gives omitted fields."""

    model_type: str
    config_class: str
    file: str
    defaults: Mapping[str, Any]
    lines: Mapping[str, int]
    attribute_map: Mapping[str, str]
    """{name vLLM asks for: the class's field} (GPT-2's ``num_hidden_layers`` -> ``n_layer``)."""

    def default(self, key: str) -> tuple[str, Any] | None:
        """The class's field for ``key`` (itself, or its ``attribute_map`` target) and its
        default; None when the class has no default for it."""
        for name in (key, self.attribute_map.get(key)):
            if name is not None and name in self.defaults:
                return name, self.defaults[name]
        return None

    def used(self, field: str, name: str) -> UsedDefault:
        return UsedDefault(field=field, value=self.defaults[name], config_class=self.config_class,
                           source=f"{self.file}:{self.lines[name]}")


@cache
def _table() -> dict[str, ClassDefaults]:
    data = read_preset_yaml("config_defaults.yaml")
    return {
        model_type: ClassDefaults(
            model_type=model_type, config_class=str(row["class"]),
            file=str(row["file"]), defaults=dict(row["defaults"]),
            lines={str(k): int(v) for k, v in row["lines"].items()},
            attribute_map={str(k): str(v) for k, v in row["attribute_map"].items()})
        for model_type, row in data["model_types"].items()
    }


def class_defaults(model_type: str | None) -> ClassDefaults | None:
    """The config class defaults of ``model_type``; None for a model type not recorded."""
    if model_type is None:
        return None
    return _table().get(model_type)


def recorded_model_types() -> Mapping[str, ClassDefaults]:
    """Every recorded model type's class defaults."""
    return dict(_table())
