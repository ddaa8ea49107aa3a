"""Flat selector configs (one JSON object per line, vLLM's selector field names,
the same input format as the oracle harness) -> request facts.

The fields and their types are a typed dict validated by pydantic (``extra="forbid"``,
strict); the checks of values (a readable compute capability, a known dtype ...) and
the order in which faults are reported stay here."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import Required, TypedDict

from selector.errors import InputError
from selector.request import FLAT_FACTS, FLAT_FLAGS, FlatModel, RequestFacts, flat_request
from selector.schema.engine import EngineProfile

__all__ = ["FLAT_FIELDS", "FlatBatch", "facts_from_flat", "facts_from_flat_batch", "parse_capability"]

_DTYPE_ALIASES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
    "half": "float16", "float32": "float32", "fp32": "float32", "float": "float32",
}


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


_CAPABILITIES: dict[str, int] = {}
"""Capabilities already read from text (a sweep repeats a dozen strings)."""


def parse_capability(value: object) -> int:
    """``"9.0"``, ``"sm_90"``, ``90``, ``[9, 0]`` -> 90."""
    if type(value) is str:
        known = _CAPABILITIES.get(value)
        if known is not None:
            return known
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
            capability = _capability_from_text(value)
            if type(value) is str and len(_CAPABILITIES) < 1024:
                _CAPABILITIES[value] = capability
            return capability
    except ValueError:
        pass
    raise InputError(
        f"cannot read compute capability {value!r}",
        field="device_capability",
        hint='write it as "9.0" (major.minor)',
    )


class _FlatModel(TypedDict, total=False):
    """The optional ``model`` object of a flat config (the oracle's model stand-in)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    num_attention_heads: Any
    num_kv_heads: Any
    hf_text_config: Any


class _FlatConfig(TypedDict, total=False):
    """A flat config's own fields, typed (strict: ``true`` is no integer, ``"1"`` no
    boolean); the profile's request vocabulary is passed through as it comes."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # type: ignore[misc]

    device_capability: Required[Any]
    head_size: Required[int | None]
    dtype: Any
    kv_cache_dtype: str | None
    block_size: int | None
    use_mla: bool | None
    has_sink: bool | None
    use_sparse: bool | None
    use_mm_prefix: bool | None
    use_per_head_quant_scales: bool | None
    has_sliding_window: bool | None
    use_non_causal: bool | None
    attn_type: Any
    num_heads: int | None
    num_kv_heads: Any
    model: Any
    attention_backend: str | None
    id: Any
    name: Any
    comment: Any


FLAT_FIELDS = frozenset(_FlatConfig.__annotations__) - {"__pydantic_config__"}
_VALIDATOR = TypeAdapter(_FlatConfig).validator
_MODEL_VALIDATOR = TypeAdapter(_FlatModel).validator
_BOOLEANS = FLAT_FLAGS
_ATTN_TYPES = ("decoder", "encoder", "encoder_only", "encoder_decoder")
_TYPE_MESSAGES = {**dict.fromkeys(_BOOLEANS, "expected true or false"),
                  "kv_cache_dtype": "expected a string", "attention_backend": "expected a backend name"}


def _head_size(config: Mapping[str, Any]) -> int:
    value: int | None = config["head_size"]
    if value is None:
        raise InputError("missing required field", field="head_size")
    return value


def _dtype(config: Mapping[str, Any]) -> str:
    dtype = config.get("dtype")
    canonical = _DTYPE_ALIASES.get(dtype.lower()) if isinstance(dtype, str) else None
    if canonical is None:
        raise InputError(f"unknown dtype {dtype!r}", field="dtype",
                         hint="bfloat16, float16 or float32")
    return canonical


def _block_size(config: Mapping[str, Any]) -> int | None:
    block_size: int | None = config.get("block_size")
    if block_size is not None and block_size <= 0:
        raise InputError(f"block_size must be positive, got {block_size}", field="block_size")
    return block_size


def _attn_type(config: Mapping[str, Any]) -> str:
    attn_type = config.get("attn_type") or "decoder"
    if attn_type not in _ATTN_TYPES:
        raise InputError(f"unknown attn_type {attn_type!r}", field="attn_type")
    return str(attn_type)


def _model(config: Mapping[str, Any]) -> FlatModel | None:
    """The ``model`` object (or ``num_kv_heads``), if any."""
    model = config.get("model")
    if model is None and config.get("num_kv_heads") is None:
        return None
    if model and not isinstance(model, Mapping):
        raise InputError(f"expected a JSON object, got {model!r}", field="model")
    model = dict(model or {})
    try:
        _MODEL_VALIDATOR.validate_python(model)
    except ValidationError as exc:
        unknown = sorted(str(e["loc"][0]) for e in exc.errors())
        raise InputError(f"unknown model field(s) {unknown}", field="model") from None
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
    return FlatModel(q_heads=q_heads, kv_heads=kv_heads, hf_text_config=hf)


_VALUE_CHECKS: tuple[tuple[str, Callable[[Mapping[str, Any]], object]], ...] = (
    ("device_capability", lambda config: parse_capability(config["device_capability"])),
    ("head_size", _head_size), ("dtype", _dtype), ("kv_cache_dtype", lambda config: None),
    ("block_size", _block_size), *((key, lambda config: None) for key in _BOOLEANS),
    ("attn_type", _attn_type), ("num_heads", lambda config: None), ("model", _model),
)
"""Every check of a flat config in the order its faults are reported."""


def _first_fault(config: Mapping[str, Any], errors: list[Any]) -> InputError:
    """The fault to report: unknown fields first, then in :data:`_VALUE_CHECKS` order
    (a field's type before its value)."""
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden")
    if unknown:
        return InputError(f"unknown field(s) {unknown}", field=unknown[0])
    wrong = {str(e["loc"][0]): e for e in errors}
    for key, check in (*_VALUE_CHECKS, ("attention_backend", lambda config: None)):
        error = wrong.get(key)
        if error is not None and error["type"] == "missing":
            return InputError("missing required field", field=key)
        if error is not None:
            what = _TYPE_MESSAGES.get(key, "expected an integer")
            return InputError(f"{what}, got {error['input']!r}", field=key)
        try:
            check(config)
        except InputError as exc:
            return exc
    raise AssertionError(f"no fault found for {errors}")  # pragma: no cover


_DEFAULTS: dict[str, tuple[dict[str, Any], frozenset[str]]] = {}


def _defaults(profile: EngineProfile) -> tuple[dict[str, Any], frozenset[str]]:
    """(default facts, vocabulary) of a profile, computed once."""
    cached = _DEFAULTS.get(profile.engine)
    if cached is None:
        specs = {**profile.inputs, **profile.environment}
        cached = ({name: spec.default for name, spec in specs.items()}, frozenset(specs))
        _DEFAULTS[profile.engine] = cached
    return cached


def facts_from_flat(config: Mapping[str, Any], profile: EngineProfile) -> tuple[RequestFacts, str | None]:
    """Map one flat config to (request facts, explicitly requested backend)."""
    if not isinstance(config, Mapping):
        raise InputError("each line must be a JSON object")
    defaults, vocabulary = _defaults(profile)
    own = config if config.keys() <= FLAT_FIELDS else {
        key: value for key, value in config.items() if key in FLAT_FIELDS or key not in vocabulary}
    try:
        _VALIDATOR.validate_python(own)
    except ValidationError as exc:
        raise _first_fault(config, exc.errors()) from None
    facts = flat_request(
        defaults, {name: config[name] for name in config.keys() & vocabulary},
        cc=parse_capability(config["device_capability"]), head_size=_head_size(config),
        dtype=_dtype(config), kv_cache_dtype=config.get("kv_cache_dtype", "auto"),
        block_size=_block_size(config), flags={key: bool(config.get(key)) for key in _BOOLEANS},
        attn_type=_attn_type(config), num_heads=config.get("num_heads"), model=_model(config))
    backend = config.get("attention_backend")
    return facts, (backend.upper() if backend and backend.lower() != "auto" else None)


FlatRead = tuple[RequestFacts, str | None]
"""One flat config read: (request facts, explicitly requested backend)."""


class FlatBatch(list[FlatRead | InputError]):
    """Per config of a batch, :func:`facts_from_flat`'s answer or the :class:`InputError` it
    raises; :attr:`shared`: facts that every config read states, with the same value."""

    def __init__(self, shared: dict[str, Any]) -> None:
        super().__init__()
        self.shared = shared


def facts_from_flat_batch(configs: Sequence[object], profile: EngineProfile) -> FlatBatch:
    """:func:`facts_from_flat` of every config, in order, with the input error in place of a
    config it refuses.  A config of the usual shape (an object of the flat fields alone that
    passes every check) is read by a fast path: the same pydantic validator, the same checks,
    the same builder, without the steps it does not need (the ``model`` object and a
    capability not read before aside); any other config, or one that fails a check, is read
    by :func:`facts_from_flat` itself (so its fault is reported exactly as one at a time)."""
    defaults, vocabulary = _defaults(profile)
    shared = {name: value for name, value in defaults.items() if name not in FLAT_FACTS}
    out = FlatBatch(shared)
    append = out.append
    validate = _VALIDATOR.validate_python
    capabilities = _CAPABILITIES
    dtypes = _DTYPE_ALIASES
    fields = FLAT_FIELDS
    booleans = _BOOLEANS
    attn_types = _ATTN_TYPES
    none: dict[str, Any] = {}
    # the fast path gives no vocabulary fact as it comes: right while every flat field of
    # the vocabulary is one that the builder derives
    fast = not (vocabulary & fields) - FLAT_FACTS
    for config in configs:
        if fast and type(config) is dict and config.keys() <= fields:
            get = config.get
            capability = config.get("device_capability")
            cc = capabilities.get(capability) if type(capability) is str else None
            dtype = get("dtype")
            canonical = dtypes.get(dtype.lower()) if type(dtype) is str else None
            attn_type = get("attn_type") or "decoder"
            model: FlatModel | None = None
            try:
                validate(config)
                head_size = config["head_size"]
                block_size = get("block_size")
                if (cc is None or head_size is None or canonical is None
                        or (block_size is not None and block_size <= 0)
                        or type(attn_type) is not str or attn_type not in attn_types):
                    raise ValueError  # not the usual shape: read one at a time
                if get("model") is not None or get("num_kv_heads") is not None:
                    model = _model(config)
            except (ValidationError, ValueError, InputError):
                pass
            else:
                facts = flat_request(
                    defaults, none, cc=cc, head_size=head_size, dtype=canonical,
                    kv_cache_dtype=get("kv_cache_dtype", "auto"), block_size=block_size,
                    flags={key: bool(get(key)) for key in booleans}, attn_type=attn_type,
                    num_heads=get("num_heads"), model=model)
                backend = get("attention_backend")
                append((facts, backend.upper() if backend and backend.lower() != "auto" else None))
                continue
        try:
            read = facts_from_flat(config, profile)  # type: ignore[arg-type]
        except InputError as error:
            append(error)
            continue
        for name in config.keys() & vocabulary:  # type: ignore[attr-defined]
            shared.pop(name, None)
        append(read)
    return out
