"""Frozen result values of the solver; renderers read only these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BackendVerdict",
    "Diagnostic",
    "FactTrace",
    "MLAPrefillResult",
    "MLAPrefillVerdict",
    "RuntimePlan",
    "SolveResult",
    "Suggestion",
]


@dataclass(frozen=True)
class Diagnostic:
    """One reason, with its registered code."""

    code: str
    name: str
    severity: str
    message: str
    hint: str = ""
    backend: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
            "backend": self.backend,
        }


@dataclass(frozen=True)
class BackendVerdict:
    """One backend's validation: valid iff ``reasons`` is empty."""

    backend: str
    reasons: tuple[Diagnostic, ...]
    priority_index: int | None
    """Position in this configuration's priority list (None: not in it)."""
    selection: str
    """``auto`` (in some priority list) or ``explicit`` (only reachable when pinned)."""

    @property
    def valid(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class FactTrace:
    """How a derived fact (e.g. the FlashAttention version) got its value."""

    name: str
    value: Any
    steps: tuple[str, ...]
    """The notes of the rules that applied, in order."""


@dataclass(frozen=True)
class RuntimePlan:
    """What the selected backend implies for the KV cache and CUDA graphs."""

    kernel_block_sizes: tuple[str, ...]
    preferred_block_size: int
    block_size: int
    """The block size vLLM will use: the pinned one, else the backend's preferred one."""
    kv_layouts: tuple[str, ...] | None
    kv_layout: str
    cudagraph_support: str
    cudagraph_mode_requested: str
    cudagraph_mode: str
    cudagraph_messages: tuple[str, ...]
    """vLLM's warnings (or error) from resolving the mode."""
    reorder_batch_threshold: int | None
    update_block_table: bool
    cudagraph_cost: tuple[str, ...] = ()
    """Plain-language consequences of a downgrade (which batches run piecewise or eager)."""
    explained_facts: tuple[FactTrace, ...] = ()
    """Derived facts the backend's data asks to show (e.g. the FlashAttention version)."""
    kv_cache_shape: str | None = None
    """Engines whose backends shape their own KV cache (vLLM 0.25.1): the
    ``get_kv_cache_shape`` template, e.g. ``(num_blocks, 2, block_size, num_kv_heads, head_size)``."""
    kv_cache_shape_values: str | None = None
    """The same with this deployment's values (``num_blocks`` stays symbolic), or the
    exception the call raises."""
    kv_cache_layout: str | None = None
    """``NHD`` or ``HND``: the process-wide layout after selection."""
    kv_cache_stride_order: tuple[int, ...] | None = None
    """``get_kv_cache_stride_order()`` under that layout (None: the logical order)."""
    cascade_attention: bool | None = None
    """Whether the builder can use cascade (shared-prefix) attention (None: not modelled)."""
    cascade_attention_note: str = ""

    def fact(self, name: str) -> FactTrace | None:
        for trace in self.explained_facts:
            if trace.name == name:
                return trace
        return None


@dataclass(frozen=True)
class Suggestion:
    """A change to the request that was re-checked and makes it valid."""

    summary: str
    changes: dict[str, Any]
    selected: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class MLAPrefillVerdict:
    """One MLA prefill backend's ``validate_configuration`` answer."""

    backend: str
    reasons: tuple[Diagnostic, ...]
    priority_index: int | None
    """Position in this configuration's prefill priority list (None: not in it)."""
    raises: bool = False
    """vLLM raises instead of answering (the single reason is the exception text)."""

    @property
    def valid(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class MLAPrefillResult:
    """vLLM's separate MLA prefill-backend selection (``get_mla_prefill_backend``)."""

    engine: str
    mode: str
    """``auto`` or ``explicit`` (``-ac.mla_prefill_backend``)."""
    requested: str | None
    config: str
    """vLLM's ``MLAPrefillSelectorConfig`` repr."""
    dimensions: tuple[int, int, int]
    """``(qk_nope_head_dim, qk_rope_head_dim, v_head_dim)`` as vLLM reads them (absent = 0)."""
    priority: tuple[str, ...]
    verdicts: tuple[MLAPrefillVerdict, ...]
    selected: str | None
    error: Diagnostic | None
    """vLLM's ValueError text when the selection fails."""
    consulted: bool | None
    """Whether the MLA layer runs this selector (None: unknown, the attention-backend
    selection fails first)."""
    fatal: bool
    """The failure aborts start-up (a sparse layer falls back to its top-k path otherwise)."""
    warning: Diagnostic | None = None
    environment: tuple[str, ...] = ()
    """Package-presence facts that the MLA backends and the prefill backends probe."""

    @property
    def valid(self) -> bool:
        return self.selected is not None

    def verdict(self, backend: str) -> MLAPrefillVerdict:
        for v in self.verdicts:
            if v.backend == backend:
                return v
        raise KeyError(backend)


@dataclass(frozen=True)
class SolveResult:
    """The complete, explainable outcome of one selection."""

    engine: str
    mode: str
    """``auto`` or ``explicit``."""
    requested_backend: str | None
    facts: dict[str, Any]
    derived: dict[str, Any]
    priority: tuple[str, ...]
    verdicts: tuple[BackendVerdict, ...]
    selected: str | None
    error: Diagnostic | None
    warnings: tuple[Diagnostic, ...] = ()
    runtime: RuntimePlan | None = None
    suggestions: tuple[Suggestion, ...] = ()
    environment_defaults: dict[str, Any] = field(default_factory=dict)
    environment_basis: str = ""
    """What :attr:`environment_defaults` assume (the platform's, ``schemas/platforms.yaml``)."""
    environment_summary: str = ""
    """Those defaults in a few words (the platform's)."""
    mla_prefill: MLAPrefillResult | None = None
    """MLA layers: vLLM's separate prefill-backend selection (None for other layers)."""
    platform: str | None = None
    """The platform the engine was loaded for (None: the catalog's default platform)."""

    @property
    def valid(self) -> bool:
        if self.mla_prefill is not None and self.mla_prefill.fatal:
            return False
        return self.selected is not None

    def verdict(self, backend: str) -> BackendVerdict:
        for v in self.verdicts:
            if v.backend == backend:
                return v
        raise KeyError(backend)
