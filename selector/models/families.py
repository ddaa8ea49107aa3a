"""Model families as data: ``schemas/models/families.yaml`` (how vLLM builds
each family's layers) and the architecture -> family index built from it and
from the engines' extracted model registries."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from selector.models.presets import preset_dir

__all__ = [
    "GENERIC",
    "AttentionRules",
    "Family",
    "MixerRules",
    "SSMRules",
    "families",
    "family_for",
    "kv_heads_fields",
    "mapped_modules",
]

GENERIC = "generic"
"""The family of a supported architecture without a mapping."""

MixerName = Literal[
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
    "mamba",
    "short_conv",
    "cross_attention",
    "none",
]
RuleName = Literal[
    "uniform",
    "alternating",
    "qwen_window",
    "interval",
    "period_offset",
    "char_pattern",
    "list_pattern",
    "llama4",
    "block_configs",
    "index_list",
]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MixerRules(_Strict):
    """Which token mixer each layer has (see the header of families.yaml)."""

    rule: RuleName
    field: str | None = None
    period_field: str | None = None
    period: int = 2
    offset_field: str | None = None
    offset: int = 0
    interval: int = 4
    other: MixerName = "full_attention"
    chars: dict[str, MixerName] = Field(default_factory=dict)
    values: dict[str, MixerName] = Field(default_factory=dict)
    layer_types: Literal["use", "ignore"] = "use"
    refuse_mixed: str | None = None
    """vLLM's start-up error when the config's layers mix sliding and full
    attention (``{max_window_layers}`` and ``{num_hidden_layers}`` are filled in)."""


class AttentionRules(_Strict):
    mla: str | None = None
    multi_query: str | None = None
    """A boolean config field: when true the layers have ``multi_query_heads``
    KV heads (1 when that is unset); when false, one per query head."""
    multi_query_heads: str | None = None
    head_size_fields: list[str] = Field(default_factory=list)
    """Config fields whose sum is the (K and V) head size."""
    kv_heads_field: str | None = None
    """The config field giving the KV heads (instead of the usual aliases)."""
    sinks: bool | dict[MixerName, str] = False
    head_size_v: str | None = None
    overrides: dict[MixerName, dict[str, str]] = Field(default_factory=dict)
    kv_sharing: str | None = None
    window_offset: int = 0
    """Added to the config's window on sliding layers (Cohere2 attends to
    ``sliding_window + 1`` tokens)."""
    nope_mixers: list[MixerName] = Field(default_factory=list)
    """Mixers whose layers apply no rotary embedding (Llama-4's global NoPE layers)."""


class SSMRefusal(_Strict):
    """A state-mixer layout the model's config class (or vLLM) refuses: ``when`` is a
    condition over the mixer's dimensions (the names of its facts, e.g. ``num_heads``,
    ``intermediate_size``), ``message`` the refusal's text."""

    when: str
    message: str


class SSMRules(_Strict):
    type: Literal["mamba1", "mamba2", "gdn", "short_conv"]
    fields: dict[str, list[Any]]
    """dimension -> [config field] or [config field, default]."""
    parallel: bool = False
    """Every attention layer also has this state mixer beside it (Falcon-H1)."""
    state_dtype: list[Any] | None = None
    """[config field] or [config field, default]: the SSM state dtype the model
    fixes when ``--mamba-ssm-cache-dtype`` is auto."""
    mixer_class: str | None = None
    """vLLM's mixer class (a ``MambaBase`` subclass), which the engine's
    prefill-checkpoint rules name (``prefill_checkpoint.mixers`` of the state backend)."""
    refusals: list[SSMRefusal] = Field(default_factory=list)
    """Mixer layouts that are refused (the first that holds is the refusal)."""
    mamba_prefix_caching: bool = False
    """The model class implements ``SupportsMambaPrefixCaching`` (Mamba cache mode
    ``all`` with prefix caching before 0.28.0)."""


class Family(_Strict):
    name: str = ""
    source: str
    modules: list[str] = Field(default_factory=list)
    architectures: list[str] = Field(default_factory=list)
    mixers: MixerRules = MixerRules(rule="uniform")
    attention: AttentionRules = AttentionRules()
    ssm: SSMRules | None = None
    aliases: dict[str, list[str]] = Field(default_factory=dict)
    defaults: dict[str, Any] = Field(default_factory=dict)
    mm_prefix_lm: bool = False
    encoder_only: bool = False
    alibi: bool = False


class _File(_Strict):
    kv_heads_fields: list[str]
    families: dict[str, Family]


def _families_path() -> Path:
    return preset_dir() / "families.yaml"


@cache
def _file() -> _File:
    path = _families_path()
    try:
        return _File.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:  # pragma: no cover - shipped data
        raise RuntimeError(f"{path}: {exc}") from exc


def kv_heads_fields() -> tuple[str, ...]:
    """The config fields that give the total KV heads, first present wins (vLLM's
    ``CONFIG_FIELD_ALIASES["total_num_kv_heads"]``; ``families.yaml``)."""
    return tuple(_file().kv_heads_fields)


@cache
def families() -> dict[str, Family]:
    """Every family of ``families.yaml`` by name (a packaging error if broken)."""
    data = _file()
    out = {name: family.model_copy(update={"name": name}) for name, family in data.families.items()}
    generic = out[GENERIC]
    merged: dict[str, Family] = {}
    for name, family in out.items():
        aliases = {**generic.aliases, **family.aliases} if name != GENERIC else family.aliases
        merged[name] = family.model_copy(update={"aliases": aliases})
    return merged


def _registry_files() -> list[Path]:
    root = preset_dir().parent / "engines"
    return sorted(root.glob("*/model_registry.json"))


@cache
def _module_of() -> dict[str, str]:
    """architecture -> vLLM module, over every engine's extracted registry
    (the newest engine wins when they disagree)."""
    out: dict[str, str] = {}
    for path in _registry_files():
        data = json.loads(path.read_text(encoding="utf-8"))
        for table in data["tables"].values():
            for arch, (module, _cls) in table.items():
                out[arch] = module
    return out


def mapped_modules() -> frozenset[str]:
    """The vLLM modules some family maps."""
    return frozenset(m for family in families().values() for m in family.modules)


def family_for(architecture: str) -> Family | None:
    """The family of ``architecture``, or None when no family maps it."""
    table = families()
    for family in table.values():
        if architecture in family.architectures:
            return family
    module = _module_of().get(architecture)
    if module is None:
        return None
    for family in table.values():
        if module in family.modules:
            return family
    return None
