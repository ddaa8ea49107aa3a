"""Flat selector configs (one JSON object per line, vLLM's selector field names,
the same input format as the oracle harness) -> request facts."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from selector.errors import InputError
from selector.request import FLAT_FLAGS, FlatModel, RequestFacts, flat_request
from selector.schema.engine import EngineProfile

__all__ = ["FLAT_FIELDS", "facts_from_flat", "parse_capability"]

FLAT_FIELDS = frozenset({
    "device_capability", "head_size", "dtype", "kv_cache_dtype", "block_size", "use_mla",
    "has_sink", "use_sparse", "use_mm_prefix", "attn_type", "num_heads", "num_kv_heads",
    "use_per_head_quant_scales", "has_sliding_window", "use_non_causal", "model",
    "attention_backend", "id", "name", "comment",
})

_DTYPE_ALIASES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
    "half": "float16", "float32": "float32", "fp32": "float32", "float": "float32",
}
_MODEL_FIELDS = frozenset({"num_attention_heads", "num_kv_heads", "hf_text_config"})


@functools.cache
def _capability_from_text(text: str) -> int:
    match = re.fullmatch(r"(?:sm_?)?(\d+)(?:\.(\d+))?", text.strip().lower())
    if match is None:
        raise ValueError(text)
    major, minor = match.groups()
    if minor is None:
        value = int(major)
        return value if value >= 10 else value * 10
    return int(major) * 10 + int(minor)


def parse_capability(value: object) -> int:
    """``"9.0"``, ``"sm_90"``, ``90``, ``[9, 0]`` -> 90."""
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        if isinstance(value, int):
            return value if value >= 10 else value * 10
        if isinstance(value, (list, tuple)) and len(value) == 2:
            major, minor = value
            if isinstance(major, int) and isinstance(minor, int) and not isinstance(major, bool):
                return major * 10 + minor
            raise ValueError(value)
        if isinstance(value, str):
            return _capability_from_text(value)
    except ValueError:
        pass
    raise InputError(
        f"cannot read compute capability {value!r}",
        field="device_capability",
        hint='write it as "9.0" (major.minor)',
    )


def _bool(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InputError(f"expected true or false, got {value!r}", field=key)
    return value


def _int(config: Mapping[str, Any], key: str, *, required: bool = False) -> int | None:
    value = config.get(key)
    if value is None:
        if required:
            raise InputError("missing required field", field=key)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {value!r}", field=key)
    return value


_DEFAULTS: dict[str, tuple[dict[str, Any], frozenset[str], frozenset[str]]] = {}


def _defaults(profile: EngineProfile) -> tuple[dict[str, Any], frozenset[str], frozenset[str]]:
    """(default facts, vocabulary, allowed flat keys) of a profile, computed once."""
    cached = _DEFAULTS.get(profile.engine)
    if cached is None:
        specs = {**profile.inputs, **profile.environment}
        vocabulary = frozenset(specs)
        cached = ({name: spec.default for name, spec in specs.items()}, vocabulary,
                  FLAT_FIELDS | vocabulary)
        _DEFAULTS[profile.engine] = cached
    return cached


def facts_from_flat(config: Mapping[str, Any], profile: EngineProfile) -> tuple[RequestFacts, str | None]:
    """Map one flat config to (request facts, explicitly requested backend)."""
    if not isinstance(config, Mapping):
        raise InputError("each line must be a JSON object")
    defaults, vocabulary, allowed = _defaults(profile)
    unknown = sorted(config.keys() - allowed)
    if unknown:
        raise InputError(f"unknown field(s) {unknown}", field=unknown[0])
    if "device_capability" not in config:
        raise InputError("missing required field", field="device_capability")
    cc = parse_capability(config["device_capability"])
    head_size = _int(config, "head_size", required=True)
    dtype = config.get("dtype")
    if not isinstance(dtype, str) or dtype.lower() not in _DTYPE_ALIASES:
        raise InputError(f"unknown dtype {dtype!r}", field="dtype",
                         hint="bfloat16, float16 or float32")
    kv = config.get("kv_cache_dtype", "auto")
    if kv is not None and not isinstance(kv, str):
        raise InputError(f"expected a string, got {kv!r}", field="kv_cache_dtype")
    block_size = _int(config, "block_size")
    if block_size is not None and block_size <= 0:
        raise InputError(f"block_size must be positive, got {block_size}", field="block_size")
    flags = {key: _bool(config, key) for key in FLAT_FLAGS}
    attn_type = config.get("attn_type") or "decoder"
    if attn_type not in ("decoder", "encoder", "encoder_only", "encoder_decoder"):
        raise InputError(f"unknown attn_type {attn_type!r}", field="attn_type")
    num_heads = _int(config, "num_heads")
    flat_model = None
    model = config.get("model")
    if model is not None or config.get("num_kv_heads") is not None:
        model = dict(model or {})
        unknown_model = sorted(set(model) - _MODEL_FIELDS)
        if unknown_model:
            raise InputError(f"unknown model field(s) {unknown_model}", field="model")
        q_heads = model.get("num_attention_heads", config.get("num_heads"))
        kv_heads = model.get("num_kv_heads", config.get("num_kv_heads", q_heads))
        if not isinstance(q_heads, int) or not isinstance(kv_heads, int) or kv_heads <= 0:
            raise InputError("the model needs num_attention_heads (or num_heads) and num_kv_heads",
                             field="model")
        if q_heads % kv_heads:
            raise InputError("num_attention_heads must be a multiple of num_kv_heads",
                             field="model.num_kv_heads")
        hf = model.get("hf_text_config") or {}
        if not isinstance(hf, Mapping):
            raise InputError("must be an object", field="model.hf_text_config")
        flat_model = FlatModel(q_heads=q_heads, kv_heads=kv_heads, hf_text_config=hf)
    facts = flat_request(
        defaults, {name: config[name] for name in config.keys() & vocabulary},
        cc=cc, head_size=head_size,
        dtype=_DTYPE_ALIASES[dtype.lower()], kv_cache_dtype=kv, block_size=block_size,
        flags=flags, attn_type=attn_type, num_heads=num_heads, model=flat_model)
    backend = config.get("attention_backend")
    if backend is not None and not isinstance(backend, str):
        raise InputError(f"expected a backend name, got {backend!r}", field="attention_backend")
    return facts, (backend.upper() if backend and backend.lower() != "auto" else None)
