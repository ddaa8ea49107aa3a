"""Results of a smoke run, per attention group (plain data; rendering is elsewhere)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from selector.errors import AttnSelectError, ExitCode, SmokeFailedError
from selector.smoke.plan import SmokePlan

__all__ = ["CANNOT_RUN", "CheckResult", "GroupReport", "SmokeChecksFailed", "SmokeReport",
           "SmokeSubstituted", "TimingResult", "cannot_run_json"]


@dataclass(frozen=True)
class CheckResult:
    """One pass/fail item: a comparison, an invariant pass, a graph replay, a kernel call."""

    name: str
    passed: bool
    detail: str = ""
    max_abs: float | None = None
    max_rel: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail,
                "max_abs": self.max_abs, "max_rel": self.max_rel}


@dataclass(frozen=True)
class TimingResult:
    """Kernel time from CUDA events (median of repeats) and what it achieves."""

    name: str
    median_us: float
    min_us: float
    repeats: int
    kv_read_tbps: float | None = None
    tflops: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "median_us": self.median_us, "min_us": self.min_us,
                "repeats": self.repeats, "kv_read_tbps": self.kv_read_tbps,
                "tflops": self.tflops}


@dataclass
class GroupReport:
    """Everything checked and measured for one plan (attention group)."""

    plan: SmokePlan
    implementation: str = ""
    provider: str = ""
    """The contract provider that ran (e.g. ``_vllm_fa3_C``)."""
    substitution: str | None = None
    """Set when the negotiated kernel could not run and another one did (SUBSTITUTED)."""
    shapes: str = ""
    cross_checks: list[str] = field(default_factory=list)
    """Other implementations that ran the same layers and data (vLLM's backend classes)."""
    notes: list[str] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    timings: list[TimingResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks) and bool(self.checks)

    @property
    def status(self) -> str:
        """PASS, FAIL, or SUBSTITUTED (every check passed, but not on the negotiated kernel)."""
        if not self.passed:
            return "FAIL"
        return "SUBSTITUTED" if self.substitution else "PASS"

    def failures(self) -> list[str]:
        return [f"{self.plan.name}: {check.name}" + (f" ({check.detail})" if check.detail
                                                      else "")
                for check in self.checks if not check.passed]

    def to_json(self) -> dict[str, Any]:
        return {"plan": self.plan.model_dump(mode="json"), "implementation": self.implementation,
                "provider": self.provider, "status": self.status,
                "substitution": self.substitution,
                "shapes": self.shapes, "cross_checks": self.cross_checks, "notes": self.notes,
                "passed": self.passed,
                "checks": [c.to_json() for c in self.checks],
                "timings": [t.to_json() for t in self.timings]}


@dataclass
class SmokeReport:
    """The whole run: the machine, each group, and the wall time to a verdict."""

    device: str
    software: dict[str, str] = field(default_factory=dict)
    groups: list[GroupReport] = field(default_factory=list)
    elapsed_s: float = 0.0
    stages: list[tuple[str, float]] = field(default_factory=list)
    """Wall seconds per stage (imports, JIT compiles, graph capture, timing), in order."""
    notes: list[str] = field(default_factory=list)
    """What this machine does that slows every verdict, and the fix (e.g. no bytecode
    cache for torch: :mod:`selector.smoke.bytecode`)."""

    @property
    def passed(self) -> bool:
        return all(group.passed for group in self.groups)

    @property
    def status(self) -> str:
        """FAIL if any group failed, else SUBSTITUTED if any ran another kernel, else PASS."""
        statuses = {group.status for group in self.groups}
        return next((s for s in ("FAIL", "SUBSTITUTED") if s in statuses), "PASS")

    def failures(self) -> list[str]:
        return [failure for group in self.groups for failure in group.failures()]

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "software": self.software, "passed": self.passed,
                "status": self.status,
                "elapsed_s": self.elapsed_s,
                "stages": [{"stage": name, "seconds": seconds} for name, seconds in self.stages],
                "notes": list(self.notes),
                "groups": [g.to_json() for g in self.groups]}


CANNOT_RUN = "CANNOT-RUN"
"""The status of a run this machine cannot do (no torch, no GPU; exit 4), as a fleet row
names it."""


def cannot_run_json(reason: str, plans: Sequence[str]) -> dict[str, Any]:
    """The JSON document of a smoke (or shard) run that cannot run here: the report's
    keys, no group run, the reason and the plans that would have run."""
    return {"device": None, "software": {}, "passed": False, "status": CANNOT_RUN,
            "exit_code": int(ExitCode.CANNOT_RUN), "reason": reason, "elapsed_s": 0.0,
            "stages": [], "groups": [], "plans": list(plans)}


class SmokeSubstituted(AttnSelectError):
    """Every check passed, but a plan ran another kernel than the one it negotiated."""

    exit_code = ExitCode.SUBSTITUTED

    def __init__(self, report: SmokeReport) -> None:
        self.report = report
        reasons = [f"{g.plan.name}: {g.substitution}" for g in report.groups if g.substitution]
        super().__init__("smoke check SUBSTITUTED: " + "; ".join(reasons))


class SmokeChecksFailed(SmokeFailedError):
    """At least one smoke item failed; carries the full report for rendering."""

    def __init__(self, report: SmokeReport) -> None:
        self.report = report
        failures = report.failures()
        shown = "; ".join(failures[:3]) + (f"; and {len(failures) - 3} more"
                                           if len(failures) > 3 else "")
        super().__init__(f"smoke check failed: {shown}")
