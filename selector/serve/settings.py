"""The flags and variables of a ``vllm serve`` command line -> the settings that
change attention-backend selection (:class:`Settings`), with notes on the rest."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from selector.catalog import Catalog, close_matches
from selector.errors import InputError
from selector.schema.types import CUDAGRAPH_MODES, KV_CACHE_DTYPES
from selector.serve.command import ServeNote
from selector.serve.flags import ServeFlags
from selector.serve.tokenize import RawCommand
from selector.serve.values import (
    bad_value,
    deep_merge,
    json_object,
    parse_bool,
    parse_bytes,
    parse_int,
    parse_max_model_len,
)

__all__ = ["HANDLED", "Settings", "build_settings", "read_environment"]

HANDLED = frozenset({
    "--model", "--attention-backend", "--attention-config", "--block-size", "--kv-cache-dtype",
    "--dtype", "--tensor-parallel-size", "--decode-context-parallel-size",
    "--prefill-context-parallel-size", "--speculative-config", "--compilation-config",
    "--optimization-level", "--kv-transfer-config", "--enable-prefix-caching",
    "--no-enable-prefix-caching", "--max-model-len", "--gpu-memory-utilization",
    "--hf-overrides", "--enforce-eager", "--no-enforce-eager", "--disable-sliding-window",
    "--cp-kv-cache-interleave-size",
})
"""The flags whose values :func:`build_settings` reads."""


@dataclass
class Settings:
    attention_backend: str | None = None
    flash_attn_version: int | None = None
    use_trtllm_attention: bool | None = None
    use_non_causal: bool = False
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    tp: int = 1
    dcp: int = 1
    pcp: int = 1
    cp_interleave: int = 1
    num_speculative_tokens: int = 0
    cudagraph_mode: str = "FULL_AND_PIECEWISE"
    kv_connector: str | None = None
    enable_prefix_caching: bool | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_num_seqs: int | None = None
    moe_backend: str | None = None
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    hf_overrides: dict[str, Any] = field(default_factory=dict)
    disable_sliding_window: bool = False
    backend_per_kind: dict[str, str] = field(default_factory=dict)
    kv_options: dict[str, Any] = field(default_factory=dict)
    batch_invariant: bool = False
    environment: dict[str, bool] = field(default_factory=dict)


def _backend_name(flag: str, value: str, catalog: Catalog, engine: str | None) -> str | None:
    text = value.strip()
    if not text or text.lower() == "auto":
        return None
    backends = catalog.engine(engine).backends
    name = text.upper()
    if name not in backends:
        raise bad_value(flag, f"unknown attention backend {text!r}",
                   hint=close_matches(name, sorted(backends)))
    return name


def _attention_config(raw: RawCommand, settings: Settings, notes: list[ServeNote],
                      catalog: Catalog, engine: str | None, table: ServeFlags) -> None:
    passed_over = table.attention_config_passed_over
    config: dict[str, Any] = {}
    if "--attention-config" in raw.values:
        config = json_object("--attention-config", raw.values["--attention-config"])
    config = deep_merge(config, raw.dotted.get("--attention-config", {}))
    for key, value in config.items():
        flag = f"--attention-config.{key}"
        if key == "backend":
            if value is not None and "--attention-backend" in raw.values:
                raise bad_value("--attention-backend",
                           "attention_backend and attention_config.backend are mutually exclusive",
                           hint="give the backend once: --attention-backend NAME")
            settings.attention_backend = (
                None if value is None else _backend_name(flag, str(value), catalog, engine))
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
                chosen = _backend_name(f"{flag}.{kind}", str(name), catalog, engine)
                if chosen is not None:
                    settings.backend_per_kind[str(kind)] = chosen
        elif key in passed_over.fields or key.startswith(passed_over.prefixes):
            notes.append(ServeNote("info", "AS104", flag,
                                   f"{flag} is not modelled by attn-select; passed over"))
        else:
            label = catalog.engine(engine).label
            notes.append(ServeNote("warning", "AS103", flag,
                                   f"{flag}: {label}'s AttentionConfig has no field {key!r} "
                                   "that attn-select knows of"))


def _compilation_fields(catalog: Catalog, engine: str | None) -> frozenset[str]:
    """CompilationConfig's fields in this engine (its startup.yaml), empty if unknown."""
    from selector.catalog import CatalogError
    from selector.memory import startup_profile

    try:
        return frozenset(startup_profile(catalog, engine).checks.compilation_config_fields)
    except (CatalogError, InputError):
        return frozenset()


def _compilation_config(raw: RawCommand, settings: Settings, notes: list[ServeNote],
                        catalog: Catalog, engine: str | None, table: ServeFlags) -> None:
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


def _speculative_config(raw: RawCommand, settings: Settings, notes: list[ServeNote]) -> None:
    if "--speculative-config" not in raw.values:
        return
    config = json_object("--speculative-config", raw.values["--speculative-config"])
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


def read_environment(env: Mapping[str, str], settings: Settings, notes: list[ServeNote],
                     catalog: Catalog, engine: str | None, table: ServeFlags) -> None:
    """The variables of the command line (and the process's ``VLLM_*`` ones)."""
    for name, value in env.items():
        if name in table.removed_environment:
            removed = table.removed_environment[name]
            level, replacement = removed.level, removed.use
            shown = value
            if name == "VLLM_ATTENTION_BACKEND":
                shown = re.sub(r"_VLLM_V1$", "", value.strip().upper())
                backends = catalog.engine(engine).backends
                if shown not in backends:
                    hint = close_matches(shown, sorted(backends))
                    replacement = "--attention-backend NAME (" + hint + ")"
            if name == "VLLM_USE_TRTLLM_ATTENTION" and shown.strip() in ("0", "1"):
                shown = "true" if shown.strip() == "1" else "false"
            flag = replacement.format(value=shown) if replacement else ""
            label = catalog.engine(engine).label
            message = f"{name}={value} has no effect: {label} does not read it"
            if name == "VLLM_USE_V1":
                message = f"{name}={value} has no effect: V1 is {label}'s only engine"
            notes.append(ServeNote(level, "AS101", name, message,
                                   hint=f"use {flag}" if flag else ""))
        elif name == "VLLM_BATCH_INVARIANT":
            settings.batch_invariant = parse_bool(name, value)
            notes.append(ServeNote("info", "AS107", name,
                                   f"{name}={value}: batch-invariant mode "
                                   f"{'on' if settings.batch_invariant else 'off'}"))
        elif name == "VLLM_HAS_FLASHINFER_CUBIN":
            settings.environment["flashinfer_cubin"] = parse_bool(name, value)
        elif name == "VLLM_KV_CACHE_LAYOUT":
            settings.kv_options["kv_cache_layout"] = value.strip()
            notes.append(ServeNote("info", "AS107", name, f"{name}={value}: KV-cache layout forced"))
        elif name.startswith("VLLM_"):
            notes.append(ServeNote("info", "AS104", name,
                                   f"{name} does not change backend selection in attn-select's "
                                   "model; passed over"))


def build_settings(raw: RawCommand, catalog: Catalog, engine: str | None,
                   notes: list[ServeNote], table: ServeFlags) -> Settings:
    """The settings the flags amount to (bad values raise :class:`InputError`)."""
    s = Settings()
    values = raw.values
    if "--attention-backend" in values:
        s.attention_backend = _backend_name("--attention-backend", values["--attention-backend"],
                                            catalog, engine)
    _attention_config(raw, s, notes, catalog, engine, table)
    if "--block-size" in values:
        s.block_size = parse_int("--block-size", values["--block-size"], high=65536)
    if "--kv-cache-dtype" in values:
        kv = values["--kv-cache-dtype"].strip()
        if kv not in KV_CACHE_DTYPES:
            raise bad_value("--kv-cache-dtype", f"unknown KV-cache dtype {kv!r}",
                       hint=close_matches(kv, list(KV_CACHE_DTYPES)))
        s.kv_cache_dtype = kv
    if "--dtype" in values:
        dtype = values["--dtype"].strip().lower()
        if dtype not in table.dtypes:
            raise bad_value("--dtype", f"unknown dtype {values['--dtype']!r}",
                            hint="valid: " + ", ".join(table.dtypes))
        s.dtype = table.dtypes[dtype]
    if "--tensor-parallel-size" in values:
        s.tp = parse_int("--tensor-parallel-size", values["--tensor-parallel-size"], high=1024)
    if "--decode-context-parallel-size" in values:
        s.dcp = parse_int("--decode-context-parallel-size",
                     values["--decode-context-parallel-size"], high=1024)
    if "--prefill-context-parallel-size" in values:
        s.pcp = parse_int("--prefill-context-parallel-size",
                     values["--prefill-context-parallel-size"], high=1024)
    if "--cp-kv-cache-interleave-size" in values:
        s.cp_interleave = parse_int("--cp-kv-cache-interleave-size",
                               values["--cp-kv-cache-interleave-size"])
    _speculative_config(raw, s, notes)
    _compilation_config(raw, s, notes, catalog, engine, table)
    if "--enforce-eager" in raw.order and "--no-enforce-eager" not in raw.order:
        s.cudagraph_mode = "NONE"
        notes.append(ServeNote("info", "AS107", "--enforce-eager",
                               "--enforce-eager: no CUDA graphs (cudagraph_mode NONE)"))
    if "--kv-transfer-config" in values:
        config = json_object("--kv-transfer-config", values["--kv-transfer-config"])
        connector = config.get("kv_connector")
        if not isinstance(connector, str) or not connector:
            raise bad_value("--kv-transfer-config.kv_connector", "missing the connector name",
                       hint='e.g. {"kv_connector": "NixlConnector", "kv_role": "kv_both"}')
        s.kv_connector = connector
    if "--enable-prefix-caching" in raw.order:
        s.enable_prefix_caching = True
    if "--no-enable-prefix-caching" in raw.order:
        s.enable_prefix_caching = False
    if "--max-model-len" in values:
        s.max_model_len = parse_max_model_len("--max-model-len", values["--max-model-len"])
    if "--gpu-memory-utilization" in values:
        text = values["--gpu-memory-utilization"]
        try:
            fraction = float(text)
        except ValueError:
            raise bad_value("--gpu-memory-utilization", f"expected a fraction, got {text!r}") from None
        if not 0 < fraction <= 1:
            raise bad_value("--gpu-memory-utilization", f"{fraction} is not in (0, 1]",
                       hint="e.g. 0.9 for 90% of the GPU's memory")
        s.gpu_memory_utilization = fraction
    if "--max-num-batched-tokens" in values:
        s.kv_options["max_num_batched_tokens"] = parse_int("--max-num-batched-tokens",
                                                      values["--max-num-batched-tokens"])
    if "--pipeline-parallel-size" in values:
        s.pipeline_parallel_size = parse_int("--pipeline-parallel-size",
                                        values["--pipeline-parallel-size"], high=1024)
    if "--data-parallel-size" in values:
        s.data_parallel_size = parse_int("--data-parallel-size", values["--data-parallel-size"],
                                    high=65536)
    s.enable_expert_parallel = ("--enable-expert-parallel" in raw.order
                                and "--no-enable-expert-parallel" not in raw.order)
    if "--moe-backend" in values:
        backend = values["--moe-backend"].strip().lower().replace("-", "_")
        s.moe_backend = None if backend == "auto" else backend
    if "--max-num-seqs" in values:
        s.max_num_seqs = parse_int("--max-num-seqs", values["--max-num-seqs"])
    if "--kv-cache-memory-bytes" in values:
        s.kv_cache_memory_bytes = parse_bytes("--kv-cache-memory-bytes",
                                         values["--kv-cache-memory-bytes"])
    if "--hf-overrides" in values:
        s.hf_overrides = json_object("--hf-overrides", values["--hf-overrides"])
    if "--disable-sliding-window" in raw.order:
        s.disable_sliding_window = True
    return s
