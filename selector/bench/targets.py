"""What ``attn-select bench CONFIG`` runs: per attention group, every valid backend that
has a kernel runner, each as a :class:`~selector.smoke.plan.SmokePlan` with exactly the
geometry the check negotiated for it (pure Python, no torch). The deployment is solved by
:mod:`selector.pipeline.bench`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from selector.bench.measurements import GeometryInfo, GroupInfo
from selector.catalog import Catalog
from selector.check.model import LayerSelection, ModelCheckResult
from selector.errors import InputError
from selector.result import SolveResult
from selector.smoke.from_result import SMOKE_BACKENDS, smoke_plan
from selector.smoke.plan import SmokePlan
from selector.solver import pinned

__all__ = ["NO_RUNNER", "BenchGroup", "BenchTargets", "count_layers", "layer_groups", "model_groups",
           "targets_from_groups"]

NO_RUNNER = "valid, but attn-select has no kernel runner for it (only FLASH_ATTN, FLASHINFER)"


def count_layers(spec: str) -> int:
    """``"0-31"`` -> 32, ``"0,2,4-6"`` -> 5."""
    total = 0
    for raw in spec.split(","):
        part = raw.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            total += int(high) - int(low) + 1
        else:
            total += 1
    return max(total, 1)


@dataclass(frozen=True)
class BenchGroup:
    """One attention group: its plans (vLLM's choice first) and what the solver said."""

    name: str
    layers: int
    selected: str | None
    valid: tuple[str, ...]
    plans: tuple[SmokePlan, ...]
    unmeasured: dict[str, str] = field(default_factory=dict)
    result: SolveResult | None = None

    def info(self) -> GroupInfo:
        plan = self.plans[0]
        geometry = GeometryInfo(num_q_heads=plan.num_q_heads, num_kv_heads=plan.num_kv_heads,
                                head_size=plan.head_size, dtype=plan.dtype,
                                kv_cache_dtype=plan.kv_cache_dtype,
                                sliding_window=plan.sliding_window,
                                logits_soft_cap=plan.logits_soft_cap)
        return GroupInfo(name=self.name, layers=self.layers, geometry=geometry,
                         selected=self.selected, valid=list(self.valid),
                         unmeasured=dict(self.unmeasured))


@dataclass(frozen=True)
class BenchTargets:
    source: str
    engine: str
    device: str | None
    mode: str
    groups: tuple[BenchGroup, ...]

    @property
    def plans(self) -> list[SmokePlan]:
        return [plan for group in self.groups for plan in group.plans]


def _group(result: SolveResult, catalog: Catalog, *, name: str, layers: int,
           sliding_window: int | None, logits_soft_cap: float | None,
           negotiated: dict[str, Any] | None = None) -> BenchGroup:
    valid = tuple(v.backend for v in result.verdicts if v.valid)
    ordered = [b for b in result.priority if b in valid] + [b for b in valid
                                                            if b not in result.priority]
    if result.selected in ordered:
        ordered.remove(result.selected)
        ordered.insert(0, result.selected)
    plans = []
    unmeasured = {}
    for backend in ordered:
        if backend not in SMOKE_BACKENDS:
            unmeasured[backend] = NO_RUNNER
            continue
        extra = negotiated if (negotiated and backend == result.selected) else {}
        plans.append(smoke_plan(pinned(result, backend, catalog), backend, catalog=catalog,
                                name=f"{name} {backend}",
                                sliding_window=sliding_window, logits_soft_cap=logits_soft_cap,
                                **extra))
    return BenchGroup(name=name, layers=layers, selected=result.selected, valid=valid,
                      plans=tuple(plans), unmeasured=unmeasured, result=result)


def layer_groups(result: SolveResult, catalog: Catalog, *, name: str,
                 sliding_window: int | None, logits_soft_cap: float | None) -> list[BenchGroup]:
    """The one group of a single-layer deployment."""
    return [_group(result, catalog, name=name, layers=1, sliding_window=sliding_window,
                   logits_soft_cap=logits_soft_cap)]


def _selection(checked: ModelCheckResult, backend: str, first: int) -> LayerSelection | None:
    """The selection of a KV group's layers when it is their attention backend; None for
    the groups no attention backend serves (the Mamba / GDN state groups: vLLM builds them
    no attention backend to time) and for side caches (the sparse indexer's)."""
    selection = next((s for s in checked.selections if first in s.layers), None)
    if selection is None or selection.result.selected != backend:
        return None
    return selection


def model_groups(checked: ModelCheckResult, catalog: Catalog) -> list[BenchGroup]:
    """One group per distinct attention group of a model's KV plan, with the geometry the
    plan negotiated for the selected backend (state and side-cache groups have none)."""
    plan = checked.plan
    assert plan is not None
    layout = plan.layout.layout if plan.layout is not None else "LBNHC"
    mode = str(plan.cudagraph.resolved) if plan.cudagraph is not None else None
    groups: list[BenchGroup] = []
    seen: set[tuple[Any, ...]] = set()
    for kv_group in plan.groups:
        for attention in kv_group.attention_groups:
            first = int(attention.layers.split(",")[0].split("-")[0])
            selection = _selection(checked, attention.backend.name, first)
            if selection is None:
                continue
            layer = checked.model.layer(first)
            key = (attention.backend.name, layer.sliding_window, layer.head_size,
                   layer.num_q_heads, layer.num_kv_heads)
            if key in seen:
                continue
            seen.add(key)
            negotiated = {"kernel_block_size": attention.kernel_block_size
                          or kv_group.manager_block_size,
                          "kv_layout": layout, "cudagraph_mode": mode}
            groups.append(_group(selection.result, catalog,
                                 name=f"kv{kv_group.index} layers {attention.layers}",
                                 layers=count_layers(attention.layers),
                                 sliding_window=layer.sliding_window,
                                 logits_soft_cap=layer.logits_soft_cap,
                                 negotiated=negotiated))
    return groups


def targets_from_groups(source: str, *, engine: str, device: str | None, mode: str,
                  groups: list[BenchGroup]) -> BenchTargets:
    """The targets of the groups that have a kernel runner.

    Raises :class:`InputError` (exit 2) when no valid backend of any group has one.
    """
    if not any(group.plans for group in groups):
        chosen = sorted({group.selected or "-" for group in groups})
        raise InputError(
            f"no valid backend of this deployment ({', '.join(chosen)} selected) has a kernel "
            f"runner; attn-select runs {' and '.join(SMOKE_BACKENDS)}", file=source,
            hint="the bench compares FLASH_ATTN and FLASHINFER where the solver finds them valid")
    return BenchTargets(source=source, engine=engine, device=device, mode=mode,
                        groups=tuple(g for g in groups if g.plans))
