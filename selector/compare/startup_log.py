"""Read what vLLM decided and measured from its own start-up log (pure text; no vLLM).

Every fact is one line pattern of vLLM's logger, cited below (vLLM 0.25.1 unless stated;
the wording is unchanged through 0.33.0 where a release is not named). A fact the log does
not state is absent, never guessed. ``attn-select verify`` compares these with the tool's
prediction (:mod:`selector.compare.verify`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selector.errors import InputError

__all__ = ["LogFact", "StartupLog", "parse_startup_log", "read_startup_log"]

_GIB = r"([0-9]+(?:\.[0-9]+)?) ?GiB"


@dataclass(frozen=True)
class LogFact:
    """One figure or decision, as vLLM logged it."""

    name: str
    value: Any
    line: int
    text: str


def _float(match: re.Match[str]) -> float:
    return float(match.group(1))


def _int(match: re.Match[str]) -> int:
    return int(match.group(1).replace(",", ""))


def _word(match: re.Match[str]) -> str:
    return match.group(1)


# (fact, pattern, value, vLLM source of the line). First match wins for a single fact;
# "backends" collects every distinct one in order.
_PATTERNS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], Any], str], ...] = (
    ("version", re.compile(r"Initializing a V1 LLM engine \(v([0-9][^)\s]*)\)"), _word,
     "vllm/v1/engine/core.py:114-116"),
    ("version", re.compile(r"vLLM API server version ([0-9][^\s,]*)"), _word,
     "vllm/entrypoints/openai/api_server.py (run_server)"),
    ("backends", re.compile(r"Using ([A-Z][A-Z0-9_]+) attention backend out of potential backends"),
     _word, "vllm/platforms/cuda.py:476-479"),
    ("backends", re.compile(r"Using ([A-Z][A-Z0-9_]+) backend\.?$"), _word,
     "vllm/platforms/cuda.py:416 (an explicitly selected backend)"),
    ("fa_version", re.compile(r"Using FlashAttention version ([0-9])"), _int,
     "vllm/v1/attention/backends/flash_attn.py:718"),
    ("mla_prefill", re.compile(r"Using ([A-Z][A-Za-z0-9_]*) MLA prefill backend"), _word,
     "vllm/v1/attention/backends/mla/prefill/selector.py:137,174"),
    ("block_size", re.compile(r"Setting attention block size to ([0-9]+) tokens"), _int,
     "vllm/model_executor/models/config.py (HybridAttentionMambaModelConfig)"),
    ("cudagraph_mode", re.compile(r"Cudagraph is disabled under eager mode"),
     lambda _: "NONE", "vllm/config/vllm.py:1322"),
    ("cudagraph_mode", re.compile(r"cudagraph_mode=(?:CUDAGraphMode\.)?([A-Z_]+)"), _word,
     "vllm/config/compilation.py (CompilationConfig repr in the engine config line)"),
    ("cudagraph_mode", re.compile(r"'cudagraph_mode': <CUDAGraphMode\.([A-Z_]+)"), _word,
     "vllm/v1/engine/core.py:114 (the engine config line's compilation_config as a dict)"),
    ("model_loading_gib", re.compile(r"Model loading took " + _GIB), _float,
     "vllm/v1/worker/gpu_model_runner.py:5307 (V2 runner: v1/worker/gpu/model_runner.py:302)"),
    ("weights_gib", re.compile(r"weights memory: " + _GIB), _float,
     "vllm/utils/mem_utils.py:216-225 (DEBUG)"),
    ("peak_activation_gib", re.compile(r"torch peak memory increase: " + _GIB), _float,
     "vllm/utils/mem_utils.py:216-225 (DEBUG)"),
    ("non_torch_gib", re.compile(r"non-torch forward increase memory: " + _GIB), _float,
     "vllm/utils/mem_utils.py:216-225 (DEBUG)"),
    ("peak_activation_gib", re.compile(r"PyTorch activation peak memory takes " + _GIB), _float,
     "vllm/worker/worker.py (V0 engine, vLLM <= 0.10)"),
    ("non_torch_gib", re.compile(r"non_torch_memory takes " + _GIB), _float,
     "vllm/worker/worker.py (V0 engine, vLLM <= 0.10)"),
    ("cudagraph_gib", re.compile(r"and " + _GIB + r" for CUDAGraph memory"), _float,
     "vllm/v1/worker/gpu_worker.py:813-835 (DEBUG)"),
    ("cudagraph_gib", re.compile(r"Graph capturing finished in [0-9]+ secs?, took " + _GIB),
     _float, "vllm/v1/worker/gpu_model_runner.py:6708"),
    ("available_kv_gib", re.compile(r"Available KV cache memory: " + _GIB), _float,
     "vllm/v1/worker/gpu_worker.py:538-541"),
    ("kv_tokens", re.compile(r"GPU KV cache size: ([0-9,]+) tokens"), _int,
     "vllm/v1/core/kv_cache_utils.py:2146"),
    ("max_concurrency", re.compile(r"Maximum concurrency for [0-9,]+ tokens per request: "
                                   r"([0-9]+(?:\.[0-9]+)?)x"), _float,
     "vllm/v1/core/kv_cache_utils.py:2147-2150"),
    ("max_num_batched_tokens", re.compile(r"max_num_batched_tokens=([0-9]+)"), _int,
     "vllm/config/scheduler.py:252"),
    ("gpu_total_gib", re.compile(r"Free memory on device \([0-9.]+/([0-9.]+) GiB\)"), _float,
     "vllm/v1/worker/gpu_worker.py:813-835 (DEBUG)"),
)
_ARGS = re.compile(r"non-default args: (\{.*\})\s*$")
"""vllm/entrypoints/serve/utils/api_utils.py:273 (0.25.1); utils/argparse_utils in older."""
_CONFIG = re.compile(r"with config: (.*)$")
_REFUSAL = re.compile(r"^(?:\S+: )?((?:ValueError|RuntimeError|torch\.OutOfMemoryError|"
                      r"NotImplementedError|AssertionError): .+)$")
_PREFIX = re.compile(r"^(?:\(\w+(?: pid=\d+)?\)\s+)?(?:[A-Z]+ \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
                     r"\[[^\]]*\]\s+)?")
"""A log record's level, time and source (``INFO 12-01 22:21:57 [file.py:538] ``) and a
worker prefix (``(EngineCore_DP0 pid=123) ``)."""


@dataclass(frozen=True)
class StartupLog:
    """What one start-up log states."""

    source: str
    facts: dict[str, LogFact] = field(default_factory=dict)
    backends: tuple[LogFact, ...] = ()
    args: dict[str, Any] | None = None
    args_line: int | None = None
    config: dict[str, str] | None = None
    refusals: tuple[LogFact, ...] = ()

    def value(self, name: str) -> Any:
        fact = self.facts.get(name)
        return None if fact is None else fact.value

    @property
    def version(self) -> str | None:
        value = self.value("version")
        return None if value is None else str(value).split("+")[0].split(".dev")[0]


def _engine_config(text: str) -> dict[str, str]:
    """``key=value`` pairs of the engine config line (top level only)."""
    out: dict[str, str] = {}
    depth = 0
    key, start = None, 0
    i = 0
    while i < len(text):
        char = text[i]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and char == "=" and key is None:
            key = text[start:i].strip().lstrip(",").strip()
            start = i + 1
        elif depth == 0 and char == "," and key is not None:
            out[key] = text[start:i].strip().strip("'")
            key, start = None, i + 1
        i += 1
    if key is not None:
        out[key] = text[start:].strip().strip("'")
    return out


def parse_startup_log(text: str, source: str = "<log>") -> StartupLog:
    facts: dict[str, LogFact] = {}
    backends: list[LogFact] = []
    refusals: list[LogFact] = []
    args: dict[str, Any] | None = None
    args_line: int | None = None
    config: dict[str, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _PREFIX.sub("", raw.rstrip(), count=1)
        if args is None and (match := _ARGS.search(line)):
            try:
                value = ast.literal_eval(match.group(1))
            except (ValueError, SyntaxError):
                value = None
            if isinstance(value, dict):
                args, args_line = value, number
        if config is None and "LLM engine" in line and (match := _CONFIG.search(line)):
            config = _engine_config(match.group(1))
        if match := _REFUSAL.match(line.strip()):
            refusals.append(LogFact("refusal", match.group(1), number, raw))
        for name, pattern, convert, _source in _PATTERNS:
            match = pattern.search(line)
            if match is None:
                continue
            fact = LogFact(name, convert(match), number, raw)
            if name == "backends":
                if all(b.value != fact.value for b in backends):
                    backends.append(fact)
            elif name not in facts:
                facts[name] = fact
    return StartupLog(source=source, facts=facts, backends=tuple(backends), args=args,
                      args_line=args_line, config=config, refusals=tuple(refusals))


def read_startup_log(path: str | Path) -> StartupLog:
    """Parse the log at ``path`` (exit 2 with the file named when unreadable or when it
    holds no vLLM start-up)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise InputError(f"cannot read the log: {error.strerror}", file=str(path),
                         hint="pass the file vLLM's start-up was written to") from None
    log = parse_startup_log(text, str(path))
    if not log.facts and not log.backends and log.args is None and not log.refusals:
        raise InputError("no vLLM start-up in this file (no engine config, backend, KV cache "
                         "or memory line)", file=str(path),
                         hint="pass the log of a `vllm serve` or `vllm.LLM(...)` start-up")
    return log
