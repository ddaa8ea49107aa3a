"""What changes between two engine versions: for one deployment (two
:class:`SolveResult`) or over a support matrix of representative configs.

Pure: results in, frozen values out; no I/O, no printing (the results come from
:mod:`selector.pipeline.diff`).  Renderers live in :mod:`selector.report.diff`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from selector.result import Diagnostic, SolveResult

__all__ = [
    "BackendChange",
    "BackendSummary",
    "Change",
    "DeploymentDiff",
    "LayerDiff",
    "MatrixDiff",
    "MatrixPoint",
    "ModelDiff",
    "Outcome",
    "Transition",
    "diff_matrix",
    "diff_results",
    "support_matrix",
]

_Item = TypeVar("_Item", str, tuple[str, str])

@dataclass(frozen=True)
class Change:
    """One compared property of the verdict."""

    field: str
    label: str
    before: Any
    after: Any
    changed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "label": self.label, "before": self.before,
                "after": self.after, "changed": self.changed}


@dataclass(frozen=True)
class BackendChange:
    """One backend under both versions: its state and the reasons it gained or lost."""

    backend: str
    before: str
    """``selected``, ``valid``, ``invalid`` or ``absent`` (not in that engine version)."""
    after: str
    priority_before: int | None
    priority_after: int | None
    gained: tuple[tuple[str, str], ...]
    """(code, message) reasons the target version gives and the source does not."""
    lost: tuple[tuple[str, str], ...]
    relevant: bool = True
    """In this deployment's priority list under either version, or the pinned backend."""

    @property
    def changed(self) -> bool:
        return self.before != self.after or bool(self.gained) or bool(self.lost)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend, "before": self.before, "after": self.after,
            "priority_before": self.priority_before, "priority_after": self.priority_after,
            "relevant": self.relevant, "changed": self.changed,
            "reasons_gained": [{"code": c, "message": m} for c, m in self.gained],
            "reasons_lost": [{"code": c, "message": m} for c, m in self.lost],
        }


@dataclass(frozen=True)
class DeploymentDiff:
    """One deployment under two engine versions."""

    from_engine: str
    to_engine: str
    fields: tuple[Change, ...]
    backends: tuple[BackendChange, ...]
    priority_before: tuple[str, ...]
    priority_after: tuple[str, ...]
    source: str | None = None
    layout_aliases: Mapping[str, str] = field(default_factory=dict, compare=False)
    """The legacy KV-cache layout names vLLM accepts (``kv-layouts.yaml``): a pre-0.33
    ``NHD`` and 0.33.0's ``LBNHC`` are one layout."""

    def field(self, name: str) -> Change:
        for change in self.fields:
            if change.field == name:
                return change
        raise KeyError(name)

    @property
    def verdict_changed(self) -> bool:
        """Validity or the selected backend differs."""
        return self.field("valid").changed or self.field("selected").changed

    @property
    def changed(self) -> bool:
        return (any(c.changed for c in self.fields) or any(b.changed for b in self.backends)
                or self.priority_before != self.priority_after)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "from": self.from_engine,
            "to": self.to_engine,
            "verdict_changed": self.verdict_changed,
            "changed": self.changed,
            "fields": [c.to_dict() for c in self.fields],
            "priority": {"before": list(self.priority_before), "after": list(self.priority_after),
                         "changed": self.priority_before != self.priority_after},
            "backends": [b.to_dict() for b in self.backends],
        }


def _state(result: SolveResult, backend: str) -> tuple[str, int | None, list[tuple[str, str]]]:
    for verdict in result.verdicts:
        if verdict.backend == backend:
            state = "selected" if result.selected == backend else "valid" if verdict.valid else "invalid"
            return state, verdict.priority_index, [(d.code, d.message) for d in verdict.reasons]
    return "absent", None, []


def _multiset_minus(a: Iterable[_Item], b: Iterable[_Item]) -> tuple[_Item, ...]:
    """``a`` less ``b``, counting repeats (a reason or error given twice is two)."""
    remaining = Counter(b)
    out = []
    for item in a:
        if remaining[item]:
            remaining[item] -= 1
        else:
            out.append(item)
    return tuple(out)


def _error(diagnostic: Diagnostic | None) -> str | None:
    return None if diagnostic is None else f"[{diagnostic.code}] {diagnostic.message}"


def diff_results(before: SolveResult, after: SolveResult, *, layout_aliases: Mapping[str, str],
                 source: str | None = None) -> DeploymentDiff:
    """Compare one deployment's results under two engine versions; ``layout_aliases``
    (the catalog's, ``kv-layouts.yaml``) keys pre-0.33 process-wide layouts by 0.33.0's
    ``KVCacheLayout`` names (same memory order)."""
    rb, ra = before.runtime, after.runtime

    def layout_key(layout: str | None) -> str | None:
        return layout_aliases.get(layout, layout) if layout else layout

    def change(name: str, label: str, b: Any, a: Any, *, key: Any = None,
               only_when_both: bool = False) -> Change:
        kb, ka = (key(b), key(a)) if key else (b, a)
        changed = kb != ka and not (only_when_both and (b is None or a is None))
        return Change(name, label, b, a, changed)

    fields = (
        change("valid", "valid", before.valid, after.valid),
        change("selected", "selected backend", before.selected, after.selected),
        change("error", "error", _error(before.error), _error(after.error), key=lambda e: e),
        change("fa_version", "FlashAttention version", before.derived.get("fa_version"),
               after.derived.get("fa_version")),
        change("block_size", "block size", rb.block_size if rb else None,
               ra.block_size if ra else None),
        change("kernel_block_sizes", "kernel block sizes",
               ", ".join(rb.kernel_block_sizes) if rb else None,
               ", ".join(ra.kernel_block_sizes) if ra else None),
        change("kv_layout", "KV-cache layout", rb.kv_layout if rb else None,
               ra.kv_layout if ra else None, key=layout_key),
        change("kv_cache_shape", "KV-cache tensor", rb.kv_cache_shape_values if rb else None,
               ra.kv_cache_shape_values if ra else None, only_when_both=True),
        change("cudagraph_support", "CUDA-graph support", rb.cudagraph_support if rb else None,
               ra.cudagraph_support if ra else None),
        change("cudagraph_mode", "CUDA-graph mode", rb.cudagraph_mode if rb else None,
               ra.cudagraph_mode if ra else None),
        change("cascade_attention", "cascade attention", rb.cascade_attention if rb else None,
               ra.cascade_attention if ra else None, only_when_both=True),
        change("warnings", "warnings", tuple(w.code for w in before.warnings),
               tuple(w.code for w in after.warnings)),
    )
    names = list(dict.fromkeys([*after.priority, *before.priority,
                                *sorted({v.backend for v in (*before.verdicts, *after.verdicts)})]))
    pinned = {before.requested_backend, after.requested_backend} - {None}
    backends = []
    for name in names:
        sb, pb, reasons_b = _state(before, name)
        sa, pa, reasons_a = _state(after, name)
        backends.append(BackendChange(
            backend=name, before=sb, after=sa, priority_before=pb, priority_after=pa,
            gained=_multiset_minus(reasons_a, reasons_b), lost=_multiset_minus(reasons_b, reasons_a),
            relevant=name in before.priority or name in after.priority or name in pinned))
    return DeploymentDiff(
        from_engine=before.engine, to_engine=after.engine, fields=fields,
        backends=tuple(backends), priority_before=before.priority,
        priority_after=after.priority, source=source, layout_aliases=dict(layout_aliases))


@dataclass(frozen=True)
class LayerDiff:
    """One group of a model's layers (the same attention facts) under both versions."""

    layers: str
    """The layer indices, e.g. ``0-35``."""
    kind: str
    diff: DeploymentDiff


@dataclass(frozen=True)
class ModelDiff:
    """A ``model:`` deployment or a command line under two engine versions: ``check``'s
    verdict under each (start-up refusals and the command line's own included) and each
    layer group's selection."""

    from_engine: str
    to_engine: str
    status_before: str
    status_after: str
    """``check``'s status under each version (``valid``, ``invalid`` ...)."""
    errors_before: tuple[str, ...]
    errors_after: tuple[str, ...]
    """``check``'s errors under each version, ``[CODE] message``."""
    layers: tuple[LayerDiff, ...]
    """The layer groups both versions selected for (none where one refuses before)."""
    source: str | None = None

    @property
    def gained(self) -> tuple[str, ...]:
        return _multiset_minus(self.errors_after, self.errors_before)

    @property
    def lost(self) -> tuple[str, ...]:
        return _multiset_minus(self.errors_before, self.errors_after)

    @property
    def verdict_changed(self) -> bool:
        """The verdict, an error, or some layer group's selected backend differs."""
        return (self.status_before != self.status_after or bool(self.gained) or bool(self.lost)
                or any(layer.diff.verdict_changed for layer in self.layers))

    @property
    def changed(self) -> bool:
        return self.verdict_changed or any(layer.diff.changed for layer in self.layers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "from": self.from_engine, "to": self.to_engine,
            "verdict_changed": self.verdict_changed, "changed": self.changed,
            "status": {"before": self.status_before, "after": self.status_after},
            "errors": {"before": list(self.errors_before), "after": list(self.errors_after),
                       "gained": list(self.gained), "lost": list(self.lost)},
            "layers": [{"layers": layer.layers, "kind": layer.kind, **layer.diff.to_dict()}
                       for layer in self.layers],
        }


# ---------------------------------------------------------------------------
# The support matrix (``diff --all``)
# ---------------------------------------------------------------------------

_CAPABILITIES = ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1")
_STANDARD_HEADS = (64, 128, 256, 512)
_STANDARD_KV = ("auto", "fp8", "fp8_e5m2", "nvfp4")
_STANDARD_FEATURES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("decoder", {}),
    ("sinks", {"has_sink": True}),
    ("non-causal", {"use_non_causal": True}),
    ("sliding window", {"has_sliding_window": True}),
    ("mm prefix", {"use_mm_prefix": True}),
    ("encoder-decoder", {"attn_type": "encoder_decoder"}),
    ("encoder-only", {"attn_type": "encoder_only"}),
)
_MLA_MODELS: tuple[tuple[str, int, bool, dict[str, int]], ...] = (
    ("MLA 576 (DeepSeek-V3)", 576, False,
     {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}),
    ("MLA 512 (NoPE)", 512, False,
     {"kv_lora_rank": 512, "qk_rope_head_dim": 0, "qk_nope_head_dim": 256, "v_head_dim": 512}),
    ("sparse MLA 576 (DeepSeek-V3.2)", 576, True,
     {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
      "index_topk": 2048}),
    ("sparse MLA 512 (NoPE)", 512, True,
     {"kv_lora_rank": 512, "qk_rope_head_dim": 0, "qk_nope_head_dim": 256, "v_head_dim": 512,
      "index_topk": 2048}),
)
_MLA_KV = ("auto", "fp8", "fp8_ds_mla")
_MLA_HEADS = (16, 128)


@dataclass(frozen=True)
class MatrixPoint:
    """One representative config: a label and the flat selector config (the
    oracle's input format, see :mod:`selector.inputs.flat`)."""

    label: str
    config: Mapping[str, Any]


def support_matrix() -> Iterator[MatrixPoint]:
    """A grid of representative configs per compute capability: standard attention
    (head sizes x dtypes x KV-cache dtypes x features, a GQA model with 32 query and
    8 KV heads) and MLA (dense / sparse, RoPE / NoPE x KV-cache dtypes x head counts)."""
    for cc in _CAPABILITIES:
        for head, dtype, kv, (feature, extra) in itertools.product(
                _STANDARD_HEADS, ("bfloat16", "float16"), _STANDARD_KV, _STANDARD_FEATURES):
            config: dict[str, Any] = {
                "device_capability": cc, "head_size": head, "dtype": dtype, "kv_cache_dtype": kv,
                "block_size": None, "use_mla": False, "attn_type": "decoder",
                "model": {"num_attention_heads": 32, "num_kv_heads": 8},
            }
            config.update(extra)
            yield MatrixPoint(f"sm{cc} head {head} {dtype} kv {kv} {feature}", config)
        for (name, head, sparse, dims), kv, heads in itertools.product(_MLA_MODELS, _MLA_KV, _MLA_HEADS):
            config = {
                "device_capability": cc, "head_size": head, "dtype": "bfloat16", "kv_cache_dtype": kv,
                "block_size": None, "use_mla": True, "use_sparse": sparse, "num_heads": heads,
                "model": {"num_attention_heads": heads, "num_kv_heads": 1, "hf_text_config": dict(dims)},
            }
            yield MatrixPoint(f"sm{cc} {name} kv {kv} {heads} heads", config)


@dataclass(frozen=True)
class Transition:
    """Configs whose selected backend went from ``before`` to ``after``."""

    before: str | None
    after: str | None
    count: int
    examples: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before, "after": self.after, "count": self.count,
                "examples": list(self.examples)}


@dataclass(frozen=True)
class BackendSummary:
    """What changed for one backend across the matrix."""

    backend: str
    presence: str
    """``both``, ``added`` (only in the target version) or ``removed``."""
    newly_valid: int = 0
    newly_invalid: int = 0
    now_selected: int = 0
    no_longer_selected: int = 0
    reasons_gained: tuple[tuple[str, str, int], ...] = ()
    """(code, an example message, configs), most frequent first."""
    reasons_lost: tuple[tuple[str, str, int], ...] = ()

    @property
    def changed(self) -> bool:
        return (self.presence != "both" or self.newly_valid > 0 or self.newly_invalid > 0
                or self.now_selected > 0 or self.no_longer_selected > 0
                or bool(self.reasons_gained) or bool(self.reasons_lost))

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend, "presence": self.presence, "changed": self.changed,
            "newly_valid": self.newly_valid, "newly_invalid": self.newly_invalid,
            "now_selected": self.now_selected, "no_longer_selected": self.no_longer_selected,
            "reasons_gained": [{"code": c, "example": m, "configs": n}
                               for c, m, n in self.reasons_gained],
            "reasons_lost": [{"code": c, "example": m, "configs": n}
                             for c, m, n in self.reasons_lost],
        }


@dataclass(frozen=True)
class MatrixDiff:
    """The support matrix under two engine versions, summarised per backend."""

    from_engine: str
    to_engine: str
    configs: int
    verdicts_changed: int
    validity_changed: int
    transitions: tuple[Transition, ...]
    backends: tuple[BackendSummary, ...]
    fa_version_changed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": self.from_engine, "to": self.to_engine, "configs": self.configs,
            "verdicts_changed": self.verdicts_changed, "validity_changed": self.validity_changed,
            "fa_version_changed": self.fa_version_changed,
            "transitions": [t.to_dict() for t in self.transitions],
            "backends": [b.to_dict() for b in self.backends],
        }


class Outcome(Protocol):
    """What :func:`diff_matrix` reads of one evaluation (a
    :class:`selector.solver.SelectionOutcome`)."""

    @property
    def reasons(self) -> Mapping[str, list[tuple[str, str]]]: ...

    @property
    def selected(self) -> str | None: ...

    @property
    def derived(self) -> Mapping[str, Any]: ...

    @property
    def order(self) -> list[str]: ...


def diff_matrix(points: Iterable[MatrixPoint],
                before: Iterable[Outcome], after: Iterable[Outcome], *,
                from_engine: str, to_engine: str,
                backends_before: Iterable[str], backends_after: Iterable[str],
                top: int = 3, examples: int = 2) -> MatrixDiff:
    """Summarise per-config outcomes of the same points under two versions."""
    names_before, names_after = list(backends_before), list(backends_after)
    all_names = list(dict.fromkeys([*names_after, *names_before]))
    counters: dict[str, Counter[str]] = {n: Counter() for n in all_names}
    gained: dict[str, Counter[str]] = {n: Counter() for n in all_names}
    lost: dict[str, Counter[str]] = {n: Counter() for n in all_names}
    transitions: dict[tuple[str | None, str | None], list[str]] = {}
    example: dict[tuple[str, str], str] = {}
    configs = verdicts = validity = fa_changed = 0
    for point, ob, oa in zip(points, before, after, strict=True):
        configs += 1
        if ob.selected != oa.selected:
            verdicts += 1
            transitions.setdefault((ob.selected, oa.selected), []).append(point.label)
        if (ob.selected is None) != (oa.selected is None):
            validity += 1
        if ob.derived.get("fa_version") != oa.derived.get("fa_version"):
            fa_changed += 1
        for name in all_names:
            if name not in names_before or name not in names_after:
                continue
            rb = ob.reasons.get(name)
            ra = oa.reasons.get(name)
            if rb is None or ra is None or (name not in ob.order and name not in oa.order):
                continue  # only backends this config's priority list (in either version) has
            counter = counters[name]
            if rb and not ra:
                counter["newly_valid"] += 1
            if ra and not rb:
                counter["newly_invalid"] += 1
            if oa.selected == name and ob.selected != name:
                counter["now_selected"] += 1
            if ob.selected == name and oa.selected != name:
                counter["no_longer_selected"] += 1
            for code in {c for c, _ in ra} - {c for c, _ in rb}:
                gained[name][code] += 1
                example.setdefault((name, code), next(m for c, m in ra if c == code))
            for code in {c for c, _ in rb} - {c for c, _ in ra}:
                lost[name][code] += 1
                example.setdefault((name, code), next(m for c, m in rb if c == code))
    summaries = []
    for name in all_names:
        presence = ("both" if name in names_before and name in names_after
                    else "added" if name in names_after else "removed")
        c = counters[name]
        summaries.append(BackendSummary(
            backend=name, presence=presence, newly_valid=c["newly_valid"],
            newly_invalid=c["newly_invalid"], now_selected=c["now_selected"],
            no_longer_selected=c["no_longer_selected"],
            reasons_gained=tuple((code, example[name, code], n)
                                 for code, n in gained[name].most_common(top)),
            reasons_lost=tuple((code, example[name, code], n)
                               for code, n in lost[name].most_common(top))))
    ordered = sorted(transitions.items(), key=lambda kv: (-len(kv[1]), str(kv[0])))
    return MatrixDiff(
        from_engine=from_engine, to_engine=to_engine, configs=configs,
        verdicts_changed=verdicts, validity_changed=validity,
        transitions=tuple(Transition(b, a, len(labels), tuple(labels[:examples]))
                          for (b, a), labels in ordered),
        backends=tuple(summaries), fa_version_changed=fa_changed)

