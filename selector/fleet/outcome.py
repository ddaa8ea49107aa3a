"""What a fleet run reports: one row per (deployment, device type), merged into one verdict.

Plain data, no Ray: rows cross the wire as JSON dictionaries (:meth:`DeviceOutcome.to_json`
and :meth:`DeviceOutcome.from_json`), so a worker with a different build of attn-select
still answers in a form the driver reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from selector.errors import ExitCode

__all__ = [
    "FLEET_SCHEMA",
    "DeviceOutcome",
    "FleetReport",
    "OutcomeStatus",
    "fleet_exit_code",
]

FLEET_SCHEMA = "attn-select-fleet/1"

OutcomeStatus = Literal["passed", "failed", "cannot-run", "absent", "timed-out",
                        "worker-died", "cancelled", "invalid", "input-error", "error",
                        "substituted", "other"]
"""passed / failed: the smoke verdict of that device; cannot-run: the node lacks torch, a
GPU or a kernel library; absent: no node of that type in the cluster; timed-out: no answer
within ``--timeout`` (cancelled); worker-died: the task's process or node died; cancelled:
interrupted (Ctrl-C); invalid: vLLM rejects the deployment on that device; input-error:
bad input; error: an unexpected error inside the task (a bug); substituted: every check
passed, but on another kernel than the plan negotiated (exit 5); other: the node's pipeline
ended with an exit code of its own (its report says which status)."""

_SEVERITY = (ExitCode.USAGE, ExitCode.INTERNAL, ExitCode.INVALID, ExitCode.SMOKE_FAILED)
"""Which code wins when rows disagree (first listed first); any other non-zero code (a
smoke status added later) comes next, then 4 (some device could not run), then 0."""


def fleet_exit_code(codes: list[int]) -> int:
    """The overall exit code of a fleet run, by ``check``'s rules: 2 bad input, 3 a kernel
    failed somewhere, 4 some device could not run, 0 every device passed."""
    for code in _SEVERITY:
        if code in codes:
            return int(code)
    others = sorted(c for c in codes if c not in (ExitCode.OK, ExitCode.CANNOT_RUN))
    if others:
        return others[0]
    return int(ExitCode.CANNOT_RUN) if ExitCode.CANNOT_RUN in codes else int(ExitCode.OK)


_ANSWERED: dict[int, OutcomeStatus] = {
    ExitCode.OK: "passed", ExitCode.SMOKE_FAILED: "failed", ExitCode.CANNOT_RUN: "cannot-run",
    ExitCode.INVALID: "invalid", ExitCode.USAGE: "input-error", ExitCode.INTERNAL: "error",
    ExitCode.SUBSTITUTED: "substituted"}


def _status_of(exit_code: int) -> OutcomeStatus:
    """The row status of a pipeline that ended with ``exit_code`` (a code this build does
    not know, e.g. a newer smoke status, is kept as ``other`` with its code)."""
    return _ANSWERED.get(exit_code, "other")


@dataclass
class DeviceOutcome:
    """One device type's answer: the smoke (or bench) result of its node, or why none came."""

    device: str
    """The device type as the catalog names it (e.g. ``H200``)."""
    config: str
    """The deployment file."""
    status: OutcomeStatus
    exit_code: int
    ray_type: str | None = None
    """Ray's name for the type (the ``accelerator_type:*`` resource), None if absent."""
    node_id: str | None = None
    node: str | None = None
    """Hostname / address of the node the task was pinned to."""
    errors: list[str] = field(default_factory=list)
    hint: str | None = None
    elapsed_s: float | None = None
    """Wall seconds from submitting the task to its answer (the verdict time)."""
    report: dict[str, Any] | None = None
    """The local command's JSON report, as that node produced it."""
    worker: dict[str, str] = field(default_factory=dict)
    """The attn-select build that answered (version, where its code lives, Python)."""
    payload: dict[str, Any] = field(default_factory=dict)
    """What else the node returned (a bench: ``measurements``); not part of the report."""

    @classmethod
    def answered(cls, *, device: str, config: str, exit_code: int, **values: Any
                 ) -> DeviceOutcome:
        """A row whose status follows the exit code the node's pipeline ended with."""
        return cls(device=device, config=config, status=_status_of(exit_code),
                   exit_code=exit_code, **values)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def backends(self) -> list[str]:
        """The backends (and FlashAttention versions) of the plans that ran."""
        out: list[str] = []
        for group in (self.report or {}).get("groups", []):
            plan = group.get("plan", {})
            name = str(plan.get("backend", "?")) + (f" FA{plan['fa_version']}"
                                                   if plan.get("fa_version") else "")
            if name not in out:
                out.append(name)
        return out

    @property
    def providers(self) -> list[str]:
        """What ran each plan (library, version, entry point), as the node reported it."""
        out: list[str] = []
        for group in (self.report or {}).get("groups", []):
            provider = str(group.get("provider") or group.get("implementation") or "")
            if provider and provider not in out:
                out.append(provider)
        return out

    @property
    def verdict(self) -> str:
        if self.status == "other":
            return str((self.report or {}).get("status") or f"EXIT {self.exit_code}").upper()
        return {"passed": "PASS", "failed": "FAIL"}.get(self.status, self.status.upper())

    @property
    def summary(self) -> str:
        """One line: the first errors, or the hint, or the verdict."""
        if self.errors:
            shown = "; ".join(self.errors[:2])
            return shown + (f"; and {len(self.errors) - 2} more" if len(self.errors) > 2 else "")
        return self.hint or ""

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "config": self.config, "status": self.status,
                "verdict": self.verdict, "exit_code": self.exit_code,
                "ray_type": self.ray_type, "node_id": self.node_id, "node": self.node,
                "backends": self.backends, "providers": self.providers,
                "errors": self.errors, "hint": self.hint, "elapsed_s": self.elapsed_s,
                "worker": self.worker, "report": self.report}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeviceOutcome:
        given = data.get("status")
        status = cast(OutcomeStatus, given if given in get_args(OutcomeStatus) else "error")
        return cls(device=str(data["device"]), config=str(data["config"]), status=status,
                   exit_code=int(data["exit_code"]), ray_type=data.get("ray_type"),
                   node_id=data.get("node_id"), node=data.get("node"),
                   errors=[str(e) for e in data.get("errors", [])], hint=data.get("hint"),
                   elapsed_s=data.get("elapsed_s"), report=data.get("report"),
                   worker={str(k): str(v) for k, v in (data.get("worker") or {}).items()})


@dataclass
class FleetReport:
    """Every row of a fleet run, and where it ran."""

    command: Literal["smoke", "bench"]
    cluster: str
    """The Ray address (or ``local``) the run used."""
    outcomes: list[DeviceOutcome] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return fleet_exit_code([o.exit_code for o in self.outcomes])

    @property
    def passed(self) -> bool:
        return bool(self.outcomes) and all(o.passed for o in self.outcomes)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FleetReport:
        """A report read back from its JSON form (``--format json``)."""
        command: Literal["smoke", "bench"] = "bench" if data.get("command") == "bench" \
            else "smoke"
        return cls(command=command, cluster=str(data.get("cluster", "")),
                   outcomes=[DeviceOutcome.from_json(row) for row in data.get("devices", [])],
                   elapsed_s=float(data.get("elapsed_s") or 0.0),
                   interrupted=bool(data.get("interrupted", False)))

    def to_json(self) -> dict[str, Any]:
        return {"schema": FLEET_SCHEMA, "command": self.command, "cluster": self.cluster,
                "passed": self.passed, "exit_code": self.exit_code,
                "interrupted": self.interrupted, "elapsed_s": self.elapsed_s,
                "devices": [o.to_json() for o in self.outcomes]}
