"""The JSON config flags of a ``vllm serve`` command line (``--attention-config``,
``--compilation-config`` / ``-O``, ``--speculative-config``, with their dotted keys)
-> :class:`Settings`, with notes on the keys attn-select does not model."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

from selector import kv  # the model-driven backend names: loaded on first use
from selector.catalog import Catalog, CatalogError, EngineData, close_matches
from selector.errors import InputError
from selector.inputs.serve.command import ServeNote
from selector.inputs.serve.flags import ServeFlags
from selector.inputs.serve.settings import Settings
from selector.inputs.serve.tokenize import RawCommand
from selector.inputs.serve.values import bad_value, deep_merge, json_object, parse_bool, parse_int
from selector.memory import startup_profile
from selector.schema.types import CUDAGRAPH_MODES

__all__ = ["attention_config", "backend_name", "compilation_config", "speculative_config"]


def backend_name(flag: str, value: str, catalog: Catalog, engine: str | EngineData | None) -> str | None:
    """A backend name as a flag gives it (``auto`` or empty: none), checked against the
    engine's backends (those a model's own layers choose among them)."""
    text = value.strip()
    if not text or text.lower() == "auto":
        return None
    data = catalog.engine_of(engine)
    backends = set(data.backends) | kv.model_driven_names(data.engine, catalog)
    name = text.upper()
    if name not in backends:
        raise bad_value(flag, data.unknown_backend(text),
                   hint=close_matches(name, sorted(backends)))
    return name


_MODELLED_ATTENTION_KEYS = ("backend", "flash_attn_version", "use_trtllm_attention",
                            "use_non_causal", "backend_per_kind")
"""The AttentionConfig keys read into the settings below (each checked as it is read)."""


def attention_config(raw: RawCommand, settings: Settings, notes: list[ServeNote],
                      catalog: Catalog, engine: str | EngineData | None, table: ServeFlags) -> None:
    passed_over = table.attention_config_passed_over
    config: dict[str, Any] = {}
    if "--attention-config" in raw.values:
        config = json_object("--attention-config", raw.values["--attention-config"])
    config = deep_merge(config, raw.dotted.get("--attention-config", {}))
    literals = table.config_literals.get("AttentionConfig", {})
    for key, value in config.items():
        flag = f"--attention-config.{key}"
        allowed = literals.get(key)
        if allowed and isinstance(value, str) and key not in _MODELLED_ATTENTION_KEYS \
                and value not in allowed:
            notes.append(ServeNote(
                "error", "SU046", flag, catalog.code("SU046").message.format(
                    flag="--attention-config/-ac", config_class="AttentionConfig", key=key,
                    expected=_literal_expected(allowed), input_value=repr(value),
                    input_type=type(value).__name__),
                hint=close_matches(value, list(allowed))))
            continue
        if key == "backend":
            if value is not None and "--attention-backend" in raw.values:
                raise bad_value("--attention-backend",
                           "attention_backend and attention_config.backend are mutually exclusive",
                           hint="give the backend once: --attention-backend NAME")
            name = None if value is None else backend_name(flag, str(value), catalog, engine)
            spec = catalog.engine_of(engine).backends.get(name) if name else None
            # AttentionConfig.__post_init__ rewrites an alias to no backend (automatic
            # selection; 0.33.0 config/attention.py:172-181): the backend file's
            # pin_selects_auto
            settings.attention_backend = None if spec is not None and spec.pin_selects_auto else name
        elif key == "flash_attn_version":
            if value is None:
                continue
            if value not in (2, 3, 4) or isinstance(value, bool):
                raise bad_value(flag, f"unknown FlashAttention version {value!r}", hint="valid: 2, 3, 4")
            settings.flash_attn_version = int(value)
        elif key == "use_trtllm_attention":
            settings.use_trtllm_attention = None if value is None else parse_bool(flag, value)
        elif key == "use_non_causal":
            settings.use_non_causal = parse_bool(flag, value)
        elif key == "backend_per_kind":
            if not isinstance(value, dict):
                raise bad_value(flag, "expected a JSON object of kind -> backend",
                           hint='e.g. \'{"sliding_window": "TRITON_ATTN"}\'')
            for kind, name in value.items():
                chosen = backend_name(f"{flag}.{kind}", str(name), catalog, engine)
                if chosen is not None:
                    settings.backend_per_kind[str(kind)] = chosen
        elif "AttentionConfig" in table.config_fields \
                and key not in table.config_fields["AttentionConfig"]:
            notes.append(_unexpected_key(catalog, "SU005", key, value,
                                         table.config_fields["AttentionConfig"],
                                         flag="--attention-config/-ac",
                                         config_class="AttentionConfig"))
        elif key in passed_over.fields or key.startswith(passed_over.prefixes):
            notes.append(ServeNote("info", "AS104", flag,
                                   f"{flag} is not modelled by attn-select; passed over"))
        elif "AttentionConfig" in table.config_fields:
            label = catalog.engine_of(engine).label
            notes.append(ServeNote("warning", "AS103", flag,
                                   f"{flag}: {label}'s AttentionConfig reads {key!r} "
                                   f"({'its value checked; ' if allowed else ''}what it changes "
                                   "is not modelled by attn-select)"))
        else:
            label = catalog.engine_of(engine).label
            notes.append(ServeNote("warning", "AS103", flag,
                                   f"{flag}: {label}'s AttentionConfig has no field {key!r} "
                                   "that attn-select knows of"))


def _compilation_fields(catalog: Catalog, engine: str | EngineData | None) -> frozenset[str]:
    """CompilationConfig's fields in this engine (its startup.yaml), empty if unknown."""
    try:
        return frozenset(startup_profile(catalog, engine).checks.compilation_config_fields)
    except (CatalogError, InputError):
        return frozenset()


def compilation_config(raw: RawCommand, settings: Settings, notes: list[ServeNote],
                        catalog: Catalog, engine: str | EngineData | None, table: ServeFlags) -> None:
    config: dict[str, Any] = {}
    level: int | None = None
    if "--compilation-config" in raw.values:
        text = raw.values["--compilation-config"].strip()
        if re.fullmatch(r"\d", text):
            config = {"mode": int(text)}
            notes.append(ServeNote("info", "AS107", "--compilation-config",
                                   f"--compilation-config {text} is the legacy compilation level"))
        else:
            config = json_object("--compilation-config", text)
    config = deep_merge(config, raw.dotted.get("--compilation-config", {}))
    if "--optimization-level" in raw.values:
        levels = table.optimization_levels
        level = parse_int("--optimization-level", raw.values["--optimization-level"],
                          low=min(levels), high=max(levels))
        settings.cudagraph_mode = levels[level]
    for key in ("mode", "level"):
        if key in config:
            mode = config[key]
            if mode in (0, "NONE", "none", "0") and "cudagraph_mode" not in config:
                notes.append(ServeNote(
                    "info", "AS107", f"--compilation-config.{key}",
                    "compilation mode NONE: vLLM defaults to no CUDA graphs (cudagraph_mode NONE)"))
                settings.cudagraph_mode = "NONE"
            if mode in (0, "NONE", "none", "0"):
                settings.kv_options["vllm_compile"] = False
    if "cudagraph_mode" in config:
        flag = "--compilation-config.cudagraph_mode"
        value = str(config["cudagraph_mode"]).strip().upper()
        if value not in CUDAGRAPH_MODES:
            raise bad_value(flag, f"unknown CUDA-graph mode {config['cudagraph_mode']!r}",
                       hint="valid: " + ", ".join(CUDAGRAPH_MODES))
        settings.cudagraph_mode = value
    fields = _compilation_fields(catalog, engine)
    for key in config:
        if fields and key not in fields:
            value = config[key]
            code = catalog.code("SU005")
            close = difflib.get_close_matches(key, sorted(fields), n=1, cutoff=0.6)
            notes.append(ServeNote(
                "error", "SU005", f"--compilation-config.{key}",
                code.message.format(flag="--compilation-config/-cc",
                                    config_class="CompilationConfig", key=key,
                                    input_value=repr(value), input_type=type(value).__name__),
                hint=(f"did you mean {close[0]!r}?" if close
                      else "see CompilationConfig's fields in vLLM's docs")))
    other = sorted(k for k in config if k not in ("cudagraph_mode", "mode", "level")
                   and (not fields or k in fields))
    if other:
        notes.append(ServeNote("info", "AS104", "--compilation-config",
                               "compilation settings that do not change backend selection "
                               "passed over: " + ", ".join(other)))


def _unexpected_key(catalog: Catalog, code: str, key: str, value: Any, fields: Sequence[str],
                    *, config_class: str, flag: str = "") -> ServeNote:
    """vLLM's refusal of a key its config class lacks (pydantic's ``extra="forbid"``)."""
    close = difflib.get_close_matches(key, sorted(fields), n=1, cutoff=0.6)
    where = "--speculative-config" if config_class == "SpeculativeConfig" else \
        flag.split("/", 1)[0]
    return ServeNote(
        "error", code, f"{where}.{key}",
        catalog.code(code).message.format(flag=flag, config_class=config_class, key=key,
                                          input_value=repr(value),
                                          input_type=type(value).__name__),
        hint=f"did you mean {close[0]!r}?" if close else f"see {config_class}'s fields in vLLM's docs")


def _literal_expected(values: Sequence[str]) -> str:
    """pydantic's list of a Literal's values: ``'a', 'b' or 'c'``."""
    quoted = [repr(value) for value in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _check_speculative(config: dict[str, Any], notes: list[ServeNote], catalog: Catalog,
                       table: ServeFlags) -> None:
    """What ``SpeculativeConfig(**config)`` says of the keys and the method
    (EngineArgs.create_speculative_config, vllm/engine/arg_utils.py; vLLM refuses at
    start-up), where the release's fields and methods are recorded."""
    fields = table.config_fields.get("SpeculativeConfig")
    if not fields or not table.speculative_methods:
        notes.append(ServeNote("warning", "AS151", "--speculative-config",
                               "--speculative-config: its keys and method are not checked (this "
                               "release's SpeculativeConfig fields are not recorded)",
                               hint="pass --engine with a release that records them "
                                    "(the newest profile does)"))
        return
    method = config.get("method")
    if method is not None and method not in table.speculative_methods:
        close = difflib.get_close_matches(str(method), list(table.speculative_methods), n=1,
                                          cutoff=0.6)
        notes.append(ServeNote(
            "error", "SE007", "--speculative-config.method",
            catalog.code("SE007").message.format(
                expected=_literal_expected(table.speculative_methods),
                input_value=repr(method), input_type=type(method).__name__),
            hint=f"did you mean {close[0]!r}?" if close else
            "valid: " + ", ".join(table.speculative_methods)))
    for key, value in config.items():
        if key not in fields:
            notes.append(_unexpected_key(catalog, "SE008", key, value, fields,
                                         config_class="SpeculativeConfig"))


_DRAFT_KEYS = ("method", "model", "attention_backend", "parallel_drafting", "kv_cache_dtype",
               "draft_tensor_parallel_size", "quantization")
"""The SpeculativeConfig keys the draft's start-up reads (selector/memory/speculative.py)."""


def speculative_config(raw: RawCommand, settings: Settings, notes: list[ServeNote],
                       catalog: Catalog, table: ServeFlags) -> None:
    if "--speculative-config" not in raw.values and "--speculative-config" not in raw.dotted:
        return
    config = json_object("--speculative-config", raw.values["--speculative-config"]) \
        if "--speculative-config" in raw.values else {}
    config = deep_merge(config, raw.dotted.get("--speculative-config", {}))
    _check_speculative(config, notes, catalog, table)
    for key in _DRAFT_KEYS:
        if config.get(key) is not None:
            value = config[key]
            if key == "parallel_drafting":
                value = parse_bool(f"--speculative-config.{key}", value)
            elif key == "draft_tensor_parallel_size":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise bad_value(f"--speculative-config.{key}",
                                    f"expected a positive integer, got {value!r}")
            elif not isinstance(value, str):
                raise bad_value(f"--speculative-config.{key}", f"expected a string, got {value!r}")
            settings.speculative[key] = value
    tokens = config.get("num_speculative_tokens")
    flag = "--speculative-config.num_speculative_tokens"
    if tokens is None:
        if config.get("method") in ("ngram", "eagle", "eagle3", "mtp", "medusa", "draft_model") \
                or config.get("model"):
            notes.append(ServeNote("warning", "AS104", flag,
                                   "num_speculative_tokens is not given; vLLM takes it from the "
                                   "draft model's config: attn-select assumes 1",
                                   hint="give num_speculative_tokens explicitly"))
            settings.num_speculative_tokens = 1
        return
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= 64:
        raise bad_value(flag, f"expected an integer 0..64, got {tokens!r}")
    settings.num_speculative_tokens = tokens
