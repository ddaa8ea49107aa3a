"""Fleet runs on a Ray cluster: the smoke check (and the bench) once per GPU type.

Importing this package never imports Ray: only :mod:`selector.fleet.cluster` and
:mod:`selector.fleet.dispatch` touch it, inside the functions a ``--ray`` run calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

if TYPE_CHECKING:
    from selector.fleet.entry import bench_on_this_node, smoke_on_this_node
    from selector.fleet.outcome import DeviceOutcome, FleetReport, fleet_exit_code
    from selector.fleet.run import FleetRequest, run_fleet

_LAZY = {
    "DeviceOutcome": "selector.fleet.outcome", "FleetReport": "selector.fleet.outcome",
    "fleet_exit_code": "selector.fleet.outcome", "FleetRequest": "selector.fleet.run",
    "run_fleet": "selector.fleet.run", "bench_on_this_node": "selector.fleet.entry",
    "smoke_on_this_node": "selector.fleet.entry",
}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [
    "DeviceOutcome",
    "FleetReport",
    "FleetRequest",
    "bench_on_this_node",
    "fleet_exit_code",
    "run_fleet",
    "smoke_on_this_node",
]
