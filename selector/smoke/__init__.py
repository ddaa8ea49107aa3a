"""GPU smoke check of the negotiated attention kernels, and the metadata it rests on.

Importing this package never imports torch or a kernel library: those are imported
inside :func:`run_smoke` only, so the CPU-side metadata tools work anywhere.
"""

from __future__ import annotations

from selector.smoke.plan import SmokeOptions, SmokePlan, SmokePlansFile, load_plans_file
from selector.smoke.report import (
    CheckResult,
    GroupReport,
    SmokeChecksFailed,
    SmokeReport,
    TimingResult,
)
from selector.smoke.runner import Progress, run_smoke

__all__ = [
    "CheckResult",
    "GroupReport",
    "Progress",
    "SmokeChecksFailed",
    "SmokeOptions",
    "SmokePlan",
    "SmokePlansFile",
    "SmokeReport",
    "TimingResult",
    "load_plans_file",
    "run_smoke",
]
