"""Choosing a backend from measurements (pure Python).

* ``priority``: vLLM's own choice (the first valid backend of its priority list, or the
  pinned one); the measurements only say how it compares.
* ``fastest``: the valid backend with the lowest total measured time over the workload
  (each shape's median times its weight, times the layers of its attention group). It
  replaces the priority choice only when the difference is larger than the noise of the
  two totals and at least 1%; the decision carries the vLLM flag that pins it.

:func:`apply_measurements` re-judges a saved measurements file against any check result,
so a machine without a GPU can ask "which valid backend was fastest for this workload".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from selector.bench.measurements import BenchResult, GroupInfo, Measurements
from selector.result import SolveResult

__all__ = ["BackendScore", "Policy", "PolicyDecision", "apply_measurements", "decide",
           "decide_for_deployment"]

Policy = Literal["priority", "fastest"]
MIN_GAIN = 0.01


@dataclass(frozen=True)
class BackendScore:
    """One backend's total measured time over the compared shapes."""

    backend: str
    total_us: float
    uncertainty_us: float
    """Half-width of the total's interval (the shapes' median intervals, in quadrature)."""
    per_shape_us: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "total_us": self.total_us,
                "uncertainty_us": self.uncertainty_us, "per_shape_us": self.per_shape_us}


@dataclass(frozen=True)
class PolicyDecision:
    """What a policy chose from measurements, and why."""

    policy: Policy
    applicable: bool
    current: str | None
    """What the deployment runs now: vLLM's priority-list choice, or the pinned backend."""
    chosen: str | None
    fastest: str | None
    speedup: float | None
    """current total / fastest total (1.25: the fastest takes 20% less time)."""
    significant: bool
    scores: tuple[BackendScore, ...] = ()
    shapes: tuple[str, ...] = ()
    excluded: dict[str, str] = field(default_factory=dict)
    """Measured or valid backends left out of the comparison, and why."""
    notes: tuple[str, ...] = ()

    @property
    def flags(self) -> tuple[str, ...]:
        """The ``vllm serve`` flags that pin the chosen backend."""
        return ("--attention-backend", self.chosen) if self.chosen else ()

    @property
    def changes(self) -> bool:
        return self.chosen is not None and self.chosen != self.current

    def summary(self) -> str:
        """One line for reports."""
        if not self.applicable:
            return "measurements not applicable: " + "; ".join(self.notes)
        if self.chosen is None:
            return "no measured backend is valid for this deployment"
        flag = " ".join(self.flags)
        if self.fastest is None or self.current is None or self.speedup is None:
            return f"{self.chosen} ({flag})"
        if self.fastest == self.current:
            return (f"{self.current}, vLLM's choice, is also the fastest measured "
                    f"({flag} pins it)")
        gain = f"{self.speedup:.2f}x"
        if self.policy == "priority":
            return (f"{self.current} (priority); {self.fastest} measured {gain} faster "
                    f"(--policy fastest would pin it)")
        if not self.significant:
            return (f"{self.current} kept: {self.fastest} is {gain} within noise "
                    f"({flag} pins {self.chosen})")
        return f"{self.chosen}: {gain} faster than {self.current} (priority choice); {flag}"

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "applicable": self.applicable, "current": self.current,
                "chosen": self.chosen, "fastest": self.fastest, "speedup": self.speedup,
                "significant": self.significant, "flags": list(self.flags),
                "summary": self.summary(), "shapes": list(self.shapes),
                "scores": [s.to_json() for s in self.scores], "excluded": self.excluded,
                "notes": list(self.notes)}


def _failure(result: BenchResult) -> str:
    if result.error:
        return f"failed on {result.shape_name}: {result.error}"
    if result.check is not None and not result.check.passed:
        return f"output mismatch on {result.shape_name} ({result.check.detail or 'vs reference'})"
    return f"no samples for {result.shape_name}"


def decide(measurements: Measurements, *, current: str | None, valid: Iterable[str],
           policy: Policy = "fastest", groups: Iterable[str] | None = None,
           unmeasured: Mapping[str, str] | None = None,
           shapes: Iterable[str] | None = None) -> PolicyDecision:
    """Score every valid measured backend over the shapes all of them ran (or only
    ``shapes``, by name); choose by ``policy``."""
    valid_set = set(valid)
    wanted = set(groups) if groups is not None else None
    wanted_shapes = set(shapes) if shapes is not None else None
    layers = {g.name: g.layers for g in measurements.deployment.groups}
    results = [r for r in measurements.results if (wanted is None or r.group in wanted)
               and (wanted_shapes is None or r.shape_name in wanted_shapes)]
    by_backend: dict[str, dict[tuple[str, str], BenchResult]] = {}
    for result in results:
        by_backend.setdefault(result.backend, {})[(result.group, result.shape_name)] = result
    excluded: dict[str, str] = {}
    notes: list[str] = []
    candidates: dict[str, dict[tuple[str, str], BenchResult]] = {}
    for backend, items in by_backend.items():
        if backend not in valid_set:
            excluded[backend] = "measured, but not valid for this deployment"
            continue
        failed = [r for r in items.values() if not r.ok]
        if failed:
            excluded[backend] = _failure(failed[0])
            continue
        candidates[backend] = items
    for backend in sorted(valid_set - set(by_backend)):
        excluded[backend] = (unmeasured or {}).get(backend, "valid, not measured")
    if not candidates:
        return PolicyDecision(policy, True, current, current if policy == "priority" else None,
                              None, None, False, excluded=excluded,
                              notes=("no valid backend has passing measurements",))
    keys = set.intersection(*(set(items) for items in candidates.values()))
    dropped = set.union(*(set(items) for items in candidates.values())) - keys
    if dropped:
        notes.append(f"compared on the {len(keys)} shape(s) every candidate ran; "
                     f"{len(dropped)} measured by some only")
    ordered_keys = sorted(keys, key=lambda k: (k[0], _shape_order(measurements, k[1])))
    scores = []
    for backend, items in candidates.items():
        total = 0.0
        variance = 0.0
        per_shape: dict[str, float] = {}
        for key in ordered_keys:
            result = items[key]
            summary = result.summary
            assert summary is not None
            weight = float(result.shape.get("weight", 1.0)) * layers.get(key[0], 1)
            total += summary.median * weight
            variance += (summary.ci_half_width * weight) ** 2
            label = key[1] if len(layers) <= 1 else f"{key[0]}: {key[1]}"
            per_shape[label] = summary.median
        scores.append(BackendScore(backend, total, math.sqrt(variance), per_shape))
    scores.sort(key=lambda s: s.total_us)
    best = scores[0]
    by_name = {s.backend: s for s in scores}
    reference = by_name.get(current) if current is not None else None
    speedup = reference.total_us / best.total_us if reference is not None else None
    significant = False
    if reference is not None and reference is not best:
        gap = reference.total_us - best.total_us
        significant = (gap > reference.uncertainty_us + best.uncertainty_us
                       and gap > MIN_GAIN * reference.total_us)
    if current is not None and current not in by_name:
        notes.append(f"{current}, vLLM's choice, has no passing measurement: "
                     f"{excluded.get(current, 'not measured')}")
    if policy == "priority":
        chosen = current
    elif reference is None or significant:
        chosen = best.backend
    else:
        chosen = current
    shapes = tuple(k[1] if len(layers) <= 1 else f"{k[0]}: {k[1]}" for k in ordered_keys)
    return PolicyDecision(policy, True, current, chosen, best.backend, speedup, significant,
                          tuple(scores), shapes, excluded, tuple(notes))


def _shape_order(measurements: Measurements, name: str) -> int:
    names = measurements.shape_names()
    return names.index(name) if name in names else len(names)


def _matching_groups(result: SolveResult, groups: list[GroupInfo]) -> tuple[list[str], list[str]]:
    """Groups measured with this result's geometry, and why the others do not match."""
    facts = result.facts
    wanted = {"head_size": facts.get("head_size"), "num_q_heads": facts.get("model_num_q_heads"),
              "num_kv_heads": facts.get("model_num_kv_heads") or facts.get("model_num_q_heads"),
              "dtype": facts.get("dtype")}
    matching, problems = [], []
    for group in groups:
        geometry = group.geometry
        have = {"head_size": geometry.head_size, "num_q_heads": geometry.num_q_heads,
                "num_kv_heads": geometry.num_kv_heads, "dtype": geometry.dtype}
        differences = [f"{name} {have[name]} (deployment: {value})"
                       for name, value in wanted.items()
                       if value is not None and have[name] != value]
        if differences:
            problems.append(f"group '{group.name}' was measured with " + ", ".join(differences))
        else:
            matching.append(group.name)
    return matching, problems


def apply_measurements(result: SolveResult, measurements: Measurements, *,
                       policy: Policy = "fastest") -> PolicyDecision:
    """The ``policy``'s choice for the deployment ``result`` checked, from saved measurements.

    Only backends this result finds valid are candidates; only groups measured with the
    result's geometry (head size, heads, dtype) count. Pure: no GPU, no torch.
    """
    matching, problems = _matching_groups(result, measurements.deployment.groups)
    if not matching:
        return PolicyDecision(policy, False, result.selected, None, None, None, False,
                              notes=tuple(problems or ["the file has no groups"]))
    valid = [v.backend for v in result.verdicts if v.valid]
    unmeasured: dict[str, str] = {}
    for group in measurements.deployment.groups:
        if group.name in matching:
            unmeasured.update(group.unmeasured)
    decision = decide(measurements, current=result.selected, valid=valid, policy=policy,
                      groups=matching, unmeasured=unmeasured)
    extra = []
    engine = measurements.deployment.engine
    if engine and engine != result.engine:
        extra.append(f"measured for {engine}, checked against {result.engine}")
    if measurements.device.catalog_name:
        extra.append(f"measured on {measurements.device.name}")
    if extra:
        decision = dataclasses.replace(decision, notes=(*decision.notes, *extra))
    return decision


def decide_for_deployment(measurements: Measurements, *, policy: Policy = "fastest"
                          ) -> PolicyDecision:
    """The policy's choice for the deployment the measurements were taken for.

    ``--attention-backend`` pins one backend for every layer, so a backend must be valid
    for every group; vLLM's choice is the groups' common selection.
    """
    groups = measurements.deployment.groups
    selected = {g.selected for g in groups}
    current = next(iter(selected)) if len(selected) == 1 else None
    valid = set.intersection(*(set(g.valid) for g in groups)) if groups else set()
    unmeasured: dict[str, str] = {}
    for group in groups:
        unmeasured.update(group.unmeasured)
    decision = decide(measurements, current=current, valid=valid, policy=policy,
                      unmeasured=unmeasured)
    if current is None and len(selected) > 1:
        decision = dataclasses.replace(decision, notes=(
            *decision.notes, "the groups select different backends: "
            + ", ".join(sorted(s or "-" for s in selected))))
    return decision
