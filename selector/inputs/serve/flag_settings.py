"""The flags of a ``vllm serve`` command line -> the :class:`Settings` they amount to
(bad values raise :class:`InputError` naming the flag)."""

from __future__ import annotations

from selector.catalog import Catalog, EngineData, close_matches
from selector.inputs.serve.command import ServeNote
from selector.inputs.serve.config_flags import (
    attention_config,
    backend_name,
    compilation_config,
    speculative_config,
)
from selector.inputs.serve.flags import ServeFlags
from selector.inputs.serve.settings import Settings
from selector.inputs.serve.tokenize import RawCommand
from selector.inputs.serve.values import (
    bad_value,
    json_object,
    parse_bytes,
    parse_count,
    parse_int,
    parse_max_model_len,
)
from selector.schema.types import KV_CACHE_DTYPES

__all__ = ["build_settings"]


def _check_choices(values: dict[str, str], catalog: Catalog, notes: list[ServeNote],
                   table: ServeFlags) -> None:
    """argparse's refusal of a value outside a flag's ``choices`` (the release's parser:
    ``flag_choices`` of serve-flags.yaml; vLLM exits 2 before the engine starts)."""
    for flag, choices in table.flag_choices.items():
        value = values.get(flag)
        if value is None or value in choices:
            continue
        listed = ", ".join(c if c == "None" else repr(c) for c in choices)
        notes.append(ServeNote("error", "SU045", flag, catalog.code("SU045").message.format(
            flag=flag, value=repr(value), choices=listed),
            hint=close_matches(value, [c for c in choices if c != "None"])))


def build_settings(raw: RawCommand, catalog: Catalog, engine: str | EngineData | None,
                   notes: list[ServeNote], table: ServeFlags) -> Settings:
    """The settings the flags amount to (bad values raise :class:`InputError`)."""
    s = Settings()
    values = raw.values
    _check_choices(values, catalog, notes, table)
    if "--attention-backend" in values:
        s.attention_backend = backend_name("--attention-backend", values["--attention-backend"],
                                            catalog, engine)
    attention_config(raw, s, notes, catalog, engine, table)
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
    speculative_config(raw, s, notes, catalog, table)
    compilation_config(raw, s, notes, catalog, engine, table)
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
        s.kv_options["max_num_batched_tokens"] = parse_count("--max-num-batched-tokens",
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
    if "--cpu-offload-gb" in values:
        s.cpu_offload_gb = parse_offload_gib("--cpu-offload-gb", values["--cpu-offload-gb"])
    if "--quantization" in values:
        s.quantization = values["--quantization"].strip().lower() or None
    if "--max-num-seqs" in values:
        s.max_num_seqs = parse_int("--max-num-seqs", values["--max-num-seqs"])
    if "--kv-cache-memory-bytes" in values:
        s.kv_cache_memory_bytes = parse_bytes("--kv-cache-memory-bytes",
                                         values["--kv-cache-memory-bytes"])
    if "--hf-overrides" in values:
        s.hf_overrides = json_object("--hf-overrides", values["--hf-overrides"])
    if "--disable-sliding-window" in raw.order:
        s.disable_sliding_window = True
    _multimodal_settings(raw, values, s)
    return s


def parse_offload_gib(flag: str, value: str) -> float:
    """``--cpu-offload-gb``: a float of GiB, at least 0 (UVAOffloadConfig, vllm/config/offload.py:23)."""
    try:
        gib = float(value)
    except ValueError:
        raise bad_value(flag, f"expected GiB as a number, got {value!r}") from None
    if not gib >= 0 or gib == float("inf"):
        raise bad_value(flag, f"{value!r} is not a size of 0 GiB or more")
    return gib


def _multimodal_settings(raw: RawCommand, values: dict[str, str], s: Settings) -> None:
    """The flags the multimodal encoder's start-up reads (selector/memory/encoder.py)."""
    if "--mm-encoder-attn-backend" in values:
        s.multimodal["mm_encoder_attn_backend"] = values["--mm-encoder-attn-backend"].strip()
    for flag in ("--limit-mm-per-prompt", "--mm-processor-kwargs"):
        if flag in values:
            s.multimodal[flag[2:].replace("-", "_")] = json_object(flag, values[flag])
    if "--disable-chunked-mm-input" in raw.order and not {
            "--no-disable-chunked-mm-input", "--enable-chunked-mm-input"} & set(raw.order):
        s.multimodal["disable_chunked_mm_input"] = True
