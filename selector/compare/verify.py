"""``attn-select verify``: what a real vLLM start-up log says next to what the tool
predicts for the same deployment (agree / differ per fact; pure, no I/O).

The log's facts come from :mod:`selector.compare.startup_log`; the prediction is ``check``'s
record of the deployment (a whole-model check: per-layer backends, the KV plan and the
start-up memory budget). Figures agree within a tolerance (KV tokens and the memory left
for the KV cache 3%, each reserved part 10%, as vLLM's log rounds to 0.01 GiB); names
(backends, the CUDA-graph mode) and refusals agree word for word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from selector.check.records import CheckRecord
from selector.compare.startup_log import StartupLog

__all__ = ["TOLERANCES", "VerifyResult", "VerifyRow", "compare_log", "serve_argv_of_log"]

_GIB = 1024**3

TOLERANCES: dict[str, float] = {
    "kv_tokens": 0.03, "available_kv_gib": 0.03, "max_concurrency": 0.03,
    "weights_gib": 0.10, "model_loading_gib": 0.10, "peak_activation_gib": 0.10, "non_torch_gib": 0.10,
    "cudagraph_gib": 0.10,
}
"""Relative tolerance of each figure (the same as the recorded start-ups' CI test)."""
_ABSOLUTE_GIB = 0.02
"""A reserved part within 0.02 GiB agrees whatever its size (vLLM logs 0.01 GiB steps)."""

_LABELS = {
    "backends": "attention backend(s)", "fa_version": "FlashAttention version",
    "mla_prefill": "MLA prefill backend", "block_size": "block size",
    "cudagraph_mode": "CUDA-graph mode", "weights_gib": "weights (GiB)",
    "model_loading_gib": "model loading (GiB)",
    "peak_activation_gib": "peak activation (GiB)", "non_torch_gib": "non-torch memory (GiB)",
    "cudagraph_gib": "CUDA-graph memory (GiB)", "available_kv_gib": "available KV cache (GiB)",
    "kv_tokens": "GPU KV cache size (tokens)", "max_concurrency": "maximum concurrency (x)",
    "refusal": "start-up refusal",
}

_SERVE_KEYS = ("dtype", "max_model_len", "gpu_memory_utilization", "max_num_seqs",
               "max_num_batched_tokens", "kv_cache_dtype", "tensor_parallel_size",
               "block_size", "quantization", "attention_backend", "enforce_eager",
               "decode_context_parallel_size", "kv_cache_memory_bytes")
"""The logged non-default args that decide what verify compares (others are left out)."""


@dataclass(frozen=True)
class VerifyRow:
    fact: str
    label: str
    logged: Any
    predicted: Any
    agree: bool | None
    """None: the tool has no prediction for this fact (counts as neither)."""
    line: int | None
    detail: str = ""


@dataclass(frozen=True)
class VerifyResult:
    log: str
    deployment: str
    engine: str | None
    device: str
    rows: tuple[VerifyRow, ...]

    @property
    def differs(self) -> bool:
        return any(row.agree is False for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"log": self.log, "deployment": self.deployment, "engine": self.engine,
                "device": self.device, "agree": not self.differs,
                "rows": [{"fact": r.fact, "label": r.label, "logged": r.logged,
                          "predicted": r.predicted, "agree": r.agree, "line": r.line,
                          "detail": r.detail} for r in self.rows]}


def serve_argv_of_log(log: StartupLog, model: str) -> list[str]:
    """The ``vllm serve`` command line of the log's non-default args (those verify needs),
    plus the scheduler's logged ``max_num_batched_tokens`` when the args leave it out (an
    engine started from Python defaults it differently from the API server)."""
    args = dict(log.args or {})
    if "max_num_batched_tokens" not in args and log.value("max_num_batched_tokens"):
        args["max_num_batched_tokens"] = log.value("max_num_batched_tokens")
    argv = ["vllm", "serve", model]
    for key in _SERVE_KEYS:
        if key not in args or args[key] is None:
            continue
        value = args[key]
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            if value:
                argv.append(flag)
            continue
        argv += [flag, str(value)]
    return argv


def _close(fact: str, logged: float, predicted: float) -> bool:
    if fact.endswith("_gib") and abs(logged - predicted) <= _ABSOLUTE_GIB:
        return True
    tolerance = TOLERANCES.get(fact, 0.0)
    scale = max(abs(logged), 1e-9)
    return abs(logged - predicted) / scale <= tolerance


def _predicted(record: CheckRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    model = record.model
    if model is not None:
        backends: list[str] = []
        for selection in model.selections:
            name = selection.result.selected
            if name and name not in backends:
                backends.append(name)
            prefill = selection.result.mla_prefill
            if prefill is not None and prefill.selected:
                out.setdefault("mla_prefill", prefill.selected)
            runtime = selection.result.runtime
            fa = runtime.fact("fa_version") if runtime is not None else None
            if fa is not None and fa.value is not None and name == "FLASH_ATTN":
                out.setdefault("fa_version", int(fa.value))
        out["backends"] = backends
        plan = model.plan
        if plan is not None:
            if plan.block_size is not None:
                out["block_size"] = record.block_size
            if plan.cudagraph is not None:
                out["cudagraph_mode"] = str(plan.cudagraph.resolved)
        memory = model.memory
        if memory is not None:
            for line in memory.budget.lines:
                key = {"weights": "weights_gib", "activation peak (profile run)":
                       "peak_activation_gib", "non-torch memory": "non_torch_gib",
                       "CUDA graphs": "cudagraph_gib"}.get(line.name)
                if key:
                    out[key] = round(line.bytes / _GIB, 2)
                if key == "weights_gib":
                    out["model_loading_gib"] = out[key]
            if memory.budget.cudagraph_capture_bytes is not None:
                # vLLM logs the capture itself, after the KV cache is sized
                out["cudagraph_gib"] = round(memory.budget.cudagraph_capture_bytes / _GIB, 2)
            out.setdefault("cudagraph_gib", 0.0)
            out["available_kv_gib"] = round(memory.budget.available_kv_bytes / _GIB, 2)
            cap = memory.capacity
            if cap is not None:
                if cap.kv_cache_tokens is not None:
                    out["kv_tokens"] = cap.kv_cache_tokens
                if cap.max_concurrency is not None:
                    out["max_concurrency"] = round(cap.max_concurrency, 2)
            if memory.issue is not None:
                out["refusal"] = memory.issue.message
    elif record.result is not None:
        out["backends"] = [record.result.selected] if record.result.selected else []
    if record.cudagraph_mode and "cudagraph_mode" not in out:
        out["cudagraph_mode"] = record.cudagraph_mode
    if record.result is not None and record.result.runtime is not None:
        fa = record.result.runtime.fact("fa_version")
        if fa is not None and fa.value is not None:
            out.setdefault("fa_version", int(fa.value))
    return out


def compare_log(log: StartupLog, record: CheckRecord, *, deployment: str) -> VerifyResult:
    """One row per fact the log states (and the tool's refusal when only it refuses)."""
    predicted = _predicted(record)
    rows: list[VerifyRow] = []
    if log.backends:
        logged = [b.value for b in log.backends]
        guess = predicted.get("backends")
        rows.append(VerifyRow("backends", _LABELS["backends"], ", ".join(logged),
                              None if guess is None else ", ".join(guess),
                              None if guess is None else sorted(logged) == sorted(guess),
                              log.backends[0].line))
    for fact in ("fa_version", "mla_prefill", "block_size", "cudagraph_mode",
                 "model_loading_gib", "weights_gib",
                 "peak_activation_gib", "non_torch_gib", "cudagraph_gib", "available_kv_gib",
                 "kv_tokens", "max_concurrency"):
        logged_fact = log.facts.get(fact)
        if logged_fact is None:
            continue
        guess = predicted.get(fact)
        if guess is None:
            agree = None
        elif isinstance(logged_fact.value, (int, float)) and fact not in ("fa_version",
                                                                          "block_size"):
            agree = _close(fact, float(logged_fact.value), float(guess))
        else:
            agree = str(logged_fact.value).upper() == str(guess).upper()
        detail = ""
        if agree is not None and fact in TOLERANCES and isinstance(guess, (int, float)):
            error = (float(guess) - float(logged_fact.value)) / max(abs(float(logged_fact.value)), 1e-9)
            detail = f"{error:+.1%} (tolerance {TOLERANCES[fact]:.0%})"
        rows.append(VerifyRow(fact, _LABELS[fact], logged_fact.value, guess, agree,
                              logged_fact.line, detail))
    refusal = predicted.get("refusal")
    if log.refusals or refusal:
        logged_text = log.refusals[0].value if log.refusals else None
        rows.append(VerifyRow("refusal", _LABELS["refusal"], logged_text, refusal,
                              (logged_text or "").endswith(refusal or "") and
                              bool(logged_text) == bool(refusal),
                              log.refusals[0].line if log.refusals else None))
    return VerifyResult(log=log.source, deployment=deployment, engine=record.engine,
                        device=record.device, rows=tuple(rows))
