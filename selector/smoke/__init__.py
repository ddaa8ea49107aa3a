"""GPU smoke check of the negotiated attention kernels, and the metadata it rests on.

Importing this package never imports torch or a kernel library: those are imported
inside :func:`run_smoke` only, so the CPU-side metadata tools work anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

if TYPE_CHECKING:
    from selector.smoke.contract import load_contract, resolve_calls
    from selector.smoke.dry_run import dry_run
    from selector.smoke.plan import SmokeOptions, SmokePlan, SmokePlansFile, load_plans_file
    from selector.smoke.report import (
        CheckResult,
        GroupReport,
        SmokeChecksFailed,
        SmokeReport,
        SmokeSubstituted,
        TimingResult,
    )
    from selector.smoke.runner import Progress, SmokeMachine, run_smoke

_LAZY = {
    "SmokeOptions": "selector.smoke.plan", "SmokePlan": "selector.smoke.plan",
    "SmokePlansFile": "selector.smoke.plan", "load_plans_file": "selector.smoke.plan",
    "CheckResult": "selector.smoke.report", "GroupReport": "selector.smoke.report",
    "SmokeChecksFailed": "selector.smoke.report", "SmokeReport": "selector.smoke.report",
    "TimingResult": "selector.smoke.report", "Progress": "selector.smoke.runner",
    "run_smoke": "selector.smoke.runner", "SmokeMachine": "selector.smoke.runner",
    "SmokeSubstituted": "selector.smoke.report", "load_contract": "selector.smoke.contract",
    "resolve_calls": "selector.smoke.contract", "dry_run": "selector.smoke.dry_run",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "CheckResult",
    "GroupReport",
    "Progress",
    "SmokeChecksFailed",
    "SmokeMachine",
    "SmokeOptions",
    "SmokePlan",
    "SmokePlansFile",
    "SmokeReport",
    "SmokeSubstituted",
    "TimingResult",
    "dry_run",
    "load_contract",
    "load_plans_file",
    "resolve_calls",
    "run_smoke",
]
