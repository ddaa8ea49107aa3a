"""CUDA-graph mode resolution across KV-cache groups (reference section 9;
``CompilationConfig.resolve_cudagraph_mode_and_sizes``) and what a downgrade
costs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from selector.kv.backend_facts import CG_LEVEL, CGSupport
from selector.schema.types import CudaGraphMode

__all__ = [
    "CudaGraphMode",
    "CudaGraphResolution",
    "GraphKind",
    "batch_graphs",
    "minimum_support",
    "resolve_cudagraph_mode",
]

GraphKind = Literal["full", "piecewise", "eager"]

_HALVES: dict[str, tuple[str, str]] = {
    "NONE": ("NONE", "NONE"),
    "PIECEWISE": ("PIECEWISE", "PIECEWISE"),
    "FULL": ("FULL", "FULL"),
    "FULL_DECODE_ONLY": ("FULL", "NONE"),
    "FULL_AND_PIECEWISE": ("FULL", "PIECEWISE"),
}
"""(decode_mode, mixed_mode) of each mode."""

_KIND: dict[str, GraphKind] = {"FULL": "full", "PIECEWISE": "piecewise", "NONE": "eager"}
_RANK: dict[GraphKind, int] = {"eager": 0, "piecewise": 1, "full": 2}


class CudaGraphResolution(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    requested: CudaGraphMode | None
    resolved: CudaGraphMode | None
    """None when vLLM raises (see ``error``)."""
    min_support: CGSupport
    min_support_backend: str | None
    warnings: tuple[str, ...] = ()
    error: str | None = None
    decode_graphs: GraphKind = "eager"
    """What uniform decode batches run (q_len 1, or 1 + speculative tokens)."""
    mixed_graphs: GraphKind = "eager"
    """What prefill and mixed prefill/decode batches run."""
    cost: tuple[str, ...] = ()
    """Plain-language consequences of the resolution against the request."""
    severity: Literal["none", "minor", "major", "fatal"] = "none"


def minimum_support(groups: Sequence[tuple[CGSupport, str]]) -> tuple[CGSupport, str | None]:
    """The lowest support over (support, backend class name) pairs in order;
    the first backend reaching the minimum is the one named."""
    level: CGSupport = "ALWAYS"
    backend: str | None = None
    for support, name in groups:
        if CG_LEVEL[support] < CG_LEVEL[level]:
            level, backend = support, name
    return level, backend


def batch_graphs(mode: str | None) -> tuple[GraphKind, GraphKind]:
    """(decode, mixed) graph kinds a mode runs."""
    decode, mixed = _HALVES[mode or "NONE"]
    return _KIND[decode], _KIND[mixed]


def _has_full(mode: str) -> bool:
    return "FULL" in _HALVES[mode]


def _needs_piecewise(mode: str) -> bool:
    return "PIECEWISE" in _HALVES[mode]


def _support_text(support: str) -> str:
    return f"AttentionCGSupport.{support}"


_SEVERITY: tuple[Literal["none", "minor", "major"], ...] = ("none", "minor", "major")


def _cost(
    requested: str, resolved: str, support: str, uniform_decode_query_len: int
) -> tuple[tuple[str, ...], Literal["none", "minor", "major"]]:
    want_decode, want_mixed = batch_graphs(requested)
    got_decode, got_mixed = batch_graphs(resolved)
    notes: list[str] = []
    level = 0
    if _RANK[got_decode] < _RANK[want_decode]:
        notes.append(
            f"uniform decode batches run {got_decode} instead of {want_decode} CUDA graphs "
            "(more kernel launches per decode step)"
        )
        level = max(level, 1 if got_decode == "piecewise" else 2)
    if _RANK[got_mixed] < _RANK[want_mixed]:
        suffix = " (no graphs at all: the largest throughput loss)" if got_mixed == "eager" else ""
        notes.append(
            f"prefill and mixed batches run {got_mixed} instead of {want_mixed} CUDA graphs"
            + suffix
        )
        level = max(level, 1 if got_mixed == "piecewise" else 2)
    if got_decode == "full" and support == "UNIFORM_SINGLE_TOKEN_DECODE":
        notes.append("full decode graphs cover only batches whose every request has q_len == 1")
    elif got_decode == "full" and uniform_decode_query_len > 1:
        notes.append(
            f"full decode graphs cover uniform batches of q_len {uniform_decode_query_len}; "
            f"capture sizes are rounded to multiples of {uniform_decode_query_len}"
        )
    return tuple(notes), _SEVERITY[level]


def _fatal(
    requested: CudaGraphMode,
    support: CGSupport,
    backend: str | None,
    warnings: list[str],
    error: str,
) -> CudaGraphResolution:
    return CudaGraphResolution(
        requested=requested,
        resolved=None,
        min_support=support,
        min_support_backend=backend,
        warnings=tuple(warnings),
        error=error,
        severity="fatal",
    )


def resolve_cudagraph_mode(
    requested: CudaGraphMode | None,
    min_support: CGSupport,
    min_support_backend: str | None,
    *,
    uniform_decode_query_len: int = 1,
    vllm_compile: bool = True,
    attention_in_splitting_ops: bool = True,
    inductor_graph_partition: bool = False,
    piecewise_capture_available: bool = True,
) -> CudaGraphResolution:
    """vLLM's resolution steps 0-5 with its exact warning and error texts."""
    if requested is None or requested == "NONE":
        return CudaGraphResolution(
            requested=requested,
            resolved="NONE",
            min_support=min_support,
            min_support_backend=min_support_backend,
        )
    mode: CudaGraphMode = requested
    warnings: list[str] = []
    head = f"with {min_support_backend} backend (support: {_support_text(min_support)})"
    if _HALVES[mode][1] == "FULL" and min_support != "ALWAYS":
        msg = f"CUDAGraphMode.{mode} is not supported {head}"
        if min_support == "NEVER":
            error = (
                f"{msg}; please try cudagraph_mode=PIECEWISE, and make sure compilation mode "
                "is VLLM_COMPILE"
            )
            return _fatal(requested, min_support, min_support_backend, warnings, error)
        mode = "FULL_AND_PIECEWISE" if attention_in_splitting_ops else "FULL_DECODE_ONLY"
        warnings.append(f"{msg}; setting cudagraph_mode={mode}")
    if _HALVES[mode][0] == "FULL" and min_support == "NEVER":
        msg = f"CUDAGraphMode.{mode} is not supported {head}"
        if vllm_compile and (attention_in_splitting_ops or inductor_graph_partition):
            mode = "PIECEWISE"
            warnings.append(
                f"{msg}; setting cudagraph_mode=PIECEWISE because attention is compiled piecewise"
            )
        else:
            mode = "NONE"
            warnings.append(
                f"{msg}; setting cudagraph_mode=NONE because attention is not compiled piecewise"
            )
    if (
        _HALVES[mode][0] == "FULL"
        and uniform_decode_query_len > 1
        and CG_LEVEL[min_support] < CG_LEVEL["UNIFORM_BATCH"]
    ):
        new: CudaGraphMode = "PIECEWISE" if attention_in_splitting_ops else "NONE"
        warnings.append(
            f"CUDAGraphMode.{mode} is not supported with spec-decode for attention backend "
            f"{min_support_backend} (support: {_support_text(min_support)}); "
            f"setting cudagraph_mode={new}"
        )
        mode = new
    if not piecewise_capture_available and _needs_piecewise(mode):
        fallback: CudaGraphMode = "NONE" if mode == "PIECEWISE" else "FULL_DECODE_ONLY"
        warnings.append(
            f"Cudagraph mode {mode} requires piecewise capture, but the loaded model provides "
            "neither a compiled submodule nor breakable CUDA graphs. "
            f"Overriding to {fallback}."
        )
        mode = fallback
    if _has_full(mode) and min_support == "NEVER":
        error = (
            f"CUDAGraphMode.{mode} is not supported with {min_support_backend} backend "
            f"(support:{_support_text(min_support)}) ; please try cudagraph_mode=PIECEWISE, "
            "and make sure compilation mode is VLLM_COMPILE"
        )
        return _fatal(requested, min_support, min_support_backend, warnings, error)
    decode_kind, mixed_kind = batch_graphs(mode)
    cost, severity = _cost(requested, mode, min_support, uniform_decode_query_len)
    return CudaGraphResolution(
        requested=requested,
        resolved=mode,
        min_support=min_support,
        min_support_backend=min_support_backend,
        warnings=tuple(warnings),
        decode_graphs=decode_kind,
        mixed_graphs=mixed_kind,
        cost=cost,
        severity=severity,
    )
