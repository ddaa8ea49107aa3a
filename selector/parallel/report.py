"""The shard check's report: per plan, each rank's work and timing, the checks, a verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RankResult", "ShardCheck", "ShardPlanReport", "ShardReport"]


@dataclass
class ShardCheck:
    name: str
    passed: bool
    detail: str = ""
    max_abs: float | None = None


@dataclass
class RankResult:
    rank: int
    q_heads: str
    kv_heads: str
    kv_tokens: int
    """KV tokens this rank's cache holds for the batch (all requests)."""
    kernel_us: float
    """Wall time of this rank's attention calls, host-side planning included (median)."""


@dataclass
class ShardPlanReport:
    name: str
    backend: str
    split: str
    implementation: str
    batch: str
    merge_base: str
    ranks: list[RankResult] = field(default_factory=list)
    checks: list[ShardCheck] = field(default_factory=list)
    collective_us: float | None = None
    """Multi-process runs: the all-gather + reduce of the partial outputs (rank 0)."""
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)


@dataclass
class ShardReport:
    device: str
    processes: int
    """1: every rank ran in turn on one device; N: one process per rank."""
    plans: list[ShardPlanReport] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.plans) and all(plan.passed for plan in self.plans)

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device, "processes": self.processes, "passed": self.passed,
            "plans": [{
                "name": p.name, "backend": p.backend, "split": p.split,
                "implementation": p.implementation, "batch": p.batch,
                "merge_lse_base": p.merge_base, "passed": p.passed,
                "collective_us": p.collective_us, "notes": p.notes,
                "ranks": [vars(r) for r in p.ranks],
                "checks": [vars(c) for c in p.checks],
            } for p in self.plans],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShardReport:
        report = cls(device=data["device"], processes=data["processes"])
        for item in data["plans"]:
            plan = ShardPlanReport(item["name"], item["backend"], item["split"],
                                   item["implementation"], item["batch"],
                                   item["merge_lse_base"], collective_us=item["collective_us"],
                                   notes=list(item["notes"]))
            plan.ranks = [RankResult(**rank) for rank in item["ranks"]]
            plan.checks = [ShardCheck(**check) for check in item["checks"]]
            report.plans.append(plan)
        return report

    def render_lines(self) -> list[str]:
        mode = "one process per rank" if self.processes > 1 else "ranks in turn on one device"
        lines = [f"shard check on {self.device} ({mode})"]
        for plan in self.plans:
            verdict = "PASS" if plan.passed else "FAIL"
            lines.append(f"{verdict}  {plan.name}: {plan.split}")
            lines.append(f"      kernels {plan.implementation}; merge in LSE base "
                         f"{plan.merge_base}; {plan.batch}")
            for rank in plan.ranks:
                lines.append(f"      rank {rank.rank}: q heads {rank.q_heads}, KV heads "
                             f"{rank.kv_heads}, {rank.kv_tokens} KV tokens, "
                             f"{rank.kernel_us:.1f} us")
            if plan.collective_us is not None:
                lines.append(f"      collective (all-gather LSE + reduce outputs): "
                             f"{plan.collective_us:.1f} us")
            for check in plan.checks:
                mark = "ok  " if check.passed else "FAIL"
                error = f" (max abs {check.max_abs:.2e})" if check.max_abs is not None else ""
                detail = f": {check.detail}" if check.detail else ""
                lines.append(f"      {mark} {check.name}{error}{detail}")
            lines.extend(f"      note: {note}" for note in plan.notes)
        return lines
