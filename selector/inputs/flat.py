"""Flat selector configs (one JSON object per line, vLLM's selector field names,
the same input format as the oracle harness) -> request facts.

The fields and their types are a typed dict validated by pydantic (``extra="forbid"``,
strict); the checks of values (a readable compute capability, a known dtype ...) and
the order in which faults are reported stay here."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import Required, TypedDict

from selector.errors import InputError
from selector.platforms import DEFAULT_PLATFORM, platform_module
from selector.request import (
    FLAT_FACTS,
    FLAT_FLAGS,
    FlatModel,
    RequestColumns,
    RequestFacts,
    flat_request,
    flat_request_columns,
)
from selector.schema.engine import EngineProfile

__all__ = ["FLAT_FIELDS", "FlatBatch", "facts_from_flat", "facts_from_flat_batch", "parse_capability"]

_DTYPE_ALIASES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
    "half": "float16", "float32": "float32", "fp32": "float32", "float": "float32",
}


_CAPABILITIES: dict[str, int] = {}
"""Capabilities already read from text (a sweep repeats a dozen strings)."""


def parse_capability(value: object) -> int:
    """``"9.0"``, ``"sm_90"``, ``90``, ``[9, 0]`` -> 90 (a flat config's device is of the
    default platform; its module reads the capability)."""
    if type(value) is str:
        known = _CAPABILITIES.get(value)
        if known is not None:
            return known
    try:
        capability = platform_module(DEFAULT_PLATFORM).parse_capability(value)
    except ValueError:
        pass
    else:
        if type(value) is str and len(_CAPABILITIES) < 1024:
            _CAPABILITIES[value] = capability
        return capability
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


_DEFAULTS: dict[tuple[str, str], tuple[dict[str, Any], frozenset[str]]] = {}


def _defaults(profile: EngineProfile) -> tuple[dict[str, Any], frozenset[str]]:
    """(default facts, vocabulary) of a profile, computed once per release and platform
    (the platform's environment facts are the profile's too)."""
    key = (profile.engine, profile.platform)
    cached = _DEFAULTS.get(key)
    if cached is None:
        specs = {**profile.inputs, **profile.environment}
        cached = ({name: spec.default for name, spec in specs.items()}, frozenset(specs))
        _DEFAULTS[key] = cached
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


_SLOW = object()
"""A value the batch reader leaves to :func:`facts_from_flat` (its config is read alone)."""

_SAMPLES: tuple[object, ...] = (0, "x", True, None, 0.5, [], {})
"""One value of each JSON type."""


@functools.cache
def _accepted_types(field: str) -> frozenset[type]:
    """The JSON value types the validator accepts for ``field`` (strict: each type is
    accepted whole or not at all), asked of it with a config that is valid otherwise."""
    accepted = set()
    for sample in _SAMPLES:
        try:
            _VALIDATOR.validate_python({"device_capability": "9.0", "head_size": 64, field: sample})
        except ValidationError:
            continue
        accepted.add(type(sample))
    return frozenset(accepted)


def _converted(values: Sequence[Any], field: str, types: tuple[type, ...],
               convert: Callable[[Any], Any]) -> list[Any]:
    """Per value, ``convert(value)`` (once per distinct value), or :data:`_SLOW` for a value
    whose type is not among ``types`` and the validator's, or that ``convert`` refuses."""
    accepted = _accepted_types(field).intersection(types)  # (types of which no two compare equal)
    table: dict[Any, Any] = {}

    def one(value: Any) -> Any:
        if type(value) not in accepted:
            return _SLOW
        found = table.get(value, table)
        if found is table:
            try:
                found = table[value] = convert(value)
            except (InputError, ValueError):
                found = table[value] = _SLOW
        return found

    if set(map(type, values)) <= accepted:
        for value in set(values):
            one(value)
        return list(map(table.__getitem__, values))
    return list(map(one, values))


_COLUMN_FIELDS: dict[str, Any] = {
    "device_capability": _SLOW, "head_size": _SLOW, "dtype": None, "kv_cache_dtype": "auto",
    "block_size": None, **dict.fromkeys(_BOOLEANS), "attn_type": None, "num_heads": None,
    "attention_backend": None}
"""The fields the batch reader reads column-wise, and the value of each when absent (as
:func:`facts_from_flat` reads them; :data:`_SLOW`: a required field)."""


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class FlatBatch:
    """Flat configs read together: :attr:`columns` the request facts of the configs read
    column-wise, :attr:`forced` their explicitly requested backends; per config
    (:attr:`rows`), its index in :attr:`columns`, or None: to be read alone
    (:func:`facts_from_flat`)."""

    columns: RequestColumns
    forced: list[str | None]
    rows: list[int | None]


def facts_from_flat_batch(configs: Sequence[object], profile: EngineProfile,
                          backend: Callable[[str], str] = _same) -> FlatBatch:
    """:func:`facts_from_flat` of the configs of the usual shape (objects of the flat fields
    alone, of the types the validator accepts, passing every check, stating no vocabulary
    fact of their own), column-wise: each check once per distinct value of its field
    (``backend``: the name of the backend a config pins, raising :class:`InputError` or
    ``ValueError`` for one to read alone).  Any other config is left to be read alone by
    :func:`facts_from_flat` (so its fault is reported exactly as one at a time)."""
    defaults, vocabulary = _defaults(profile)
    count = len(configs)
    fields = FLAT_FIELDS
    rows: list[dict[str, Any]] = list(configs)  # type: ignore[arg-type]  # (non-dicts replaced below)
    alone: set[int] = set()
    if (vocabulary & fields) - FLAT_FACTS:  # the column-wise builder gives no such fact
        alone.update(range(count))
    if not (set(map(type, configs)) <= {dict} and all(map(fields.issuperset, rows))):
        for index, config in enumerate(configs):
            if type(config) is not dict or not fields.issuperset(config):
                alone.add(index)
                rows[index] = {}
    # the fields row by row (each config read while it is at hand), then column-wise
    read_fields = (*_COLUMN_FIELDS, "model", "num_kv_heads")
    absent = (*_COLUMN_FIELDS.values(), None, None)
    table: list[Sequence[Any]] = [() for _ in read_fields]
    if rows:
        table = list(zip(*[tuple(map(c.get, read_fields, absent)) for c in rows], strict=True))
    values = dict(zip(read_fields, table, strict=True))

    def column(field: str, types: tuple[type, ...], convert: Callable[[Any], Any]) -> list[Any]:
        converted = _converted(values[field], field, types, convert)
        if _SLOW in converted:
            alone.update(i for i, v in enumerate(converted) if v is _SLOW)
        return converted

    none = type(None)
    cc = column("device_capability", (str,), parse_capability)
    head_size = column("head_size", (int,), lambda v: _head_size({"head_size": v}))
    dtype = column("dtype", (str,), lambda v: _dtype({"dtype": v}))
    kv_cache_dtype = column("kv_cache_dtype", (str, none), _same)
    block_size = column("block_size", (int, none), lambda v: _block_size({"block_size": v}))
    flags = {key: column(key, (bool, none), bool) for key in _BOOLEANS}
    attn_type = column("attn_type", (str, none), lambda v: _attn_type({"attn_type": v}))
    num_heads = column("num_heads", (int, none), _same)
    pinned = column("attention_backend", (str, none),
                    lambda b: backend(b.upper()) if b and b.lower() != "auto" else None)
    models: dict[int, FlatModel] = {}
    model_column, kv_column = values["model"], values["num_kv_heads"]
    if model_column.count(None) != count or kv_column.count(None) != count:
        for index, config in enumerate(rows):
            if index in alone or (model_column[index] is None and kv_column[index] is None):
                continue
            try:
                model = _model(config)
            except InputError:
                alone.add(index)
                continue
            if model is not None:
                models[index] = model
    read: list[int | None] = list(range(count))
    for index in alone:
        read[index] = None
    if alone:
        keep = [i for i in range(count) if i not in alone]
        position = {old: new for new, old in enumerate(keep)}
        read = [None if i is None else position[i] for i in read]
        models = {position[i]: m for i, m in models.items()}
        pick = itemgetter(*keep) if len(keep) > 1 else None

        def kept(values: list[Any]) -> list[Any]:
            return list(pick(values)) if pick is not None else [values[i] for i in keep]

        cc, head_size, dtype, kv_cache_dtype, block_size, attn_type, num_heads, pinned = map(
            kept, (cc, head_size, dtype, kv_cache_dtype, block_size, attn_type, num_heads, pinned))
        flags = {key: kept(values) for key, values in flags.items()}
        count = len(keep)
    columns = flat_request_columns(
        defaults, count=count, cc=cc, head_size=head_size, dtype=dtype,
        kv_cache_dtype=kv_cache_dtype, block_size=block_size, flags=flags, attn_type=attn_type,
        num_heads=num_heads, models=models)
    return FlatBatch(columns, pinned, read)
