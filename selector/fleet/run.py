"""A fleet run end to end: read the deployments, join the cluster, pick one node per
requested device type, run the tasks, and merge every answer into one report."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from selector.catalog import Catalog
from selector.errors import CannotRunHereError, ExitCode, InputError
from selector.fleet.outcome import DeviceOutcome, FleetReport
from selector.fleet.shipping import shipped_code
from selector.inputs.config import load_deployment

__all__ = ["CLUSTER", "FleetRequest", "resolve_requested", "run_fleet"]

CLUSTER = "cluster"
"""``--device cluster``: every device type the cluster offers."""


@dataclass(frozen=True)
class FleetRequest:
    """What to run where: deployment files, device types, and the command's settings."""

    command: Literal["smoke", "bench"]
    configs: tuple[str, ...]
    devices: tuple[str, ...] = (CLUSTER,)
    address: str = "auto"
    timeout_s: float = 600.0
    settings: dict[str, Any] | None = None
    """Sent to each task: ``options`` (smoke) or ``workload`` (bench)."""
    ship_code: bool = False


def resolve_requested(values: Sequence[str], catalog: Catalog) -> list[str]:
    """``--device`` values -> catalog device names (``cluster`` kept as is); an unknown
    name is an :class:`InputError` (exit 2) before any cluster is joined."""
    out: list[str] = []
    for value in values or [CLUSTER]:
        name = CLUSTER if value.strip().lower() in (CLUSTER, "all") else \
            catalog.device(value).name
        if name not in out:
            out.append(name)
    return out


def _catalog_name(ray_type: str, catalog: Catalog) -> str | None:
    try:
        return catalog.device(ray_type).name
    except InputError:
        return None


def _read(configs: Sequence[str]) -> list[tuple[str, str]]:
    """(name, text) of each deployment, validated here so bad input stops before Ray."""
    return [(loaded.path, loaded.text) for loaded in map(load_deployment, configs)]


def run_fleet(request: FleetRequest, catalog: Catalog, *,
              progress: Callable[[str], None] = lambda _: None,
              entry: str | None = None) -> FleetReport:
    """Run ``request`` on the cluster (its device names read by ``catalog``); every
    requested device gets a row."""
    from selector.fleet.cluster import connect
    from selector.fleet.dispatch import FleetTask, run_tasks

    started = time.perf_counter()
    deployments = _read(request.configs)
    requested = resolve_requested(request.devices, catalog)
    shipped = None
    if request.ship_code:
        progress("packing this attn-select for the workers")
        shipped = shipped_code()
    try:
        progress(f"joining the Ray cluster ({request.address})")
        cluster = connect(request.address, runtime_env={"py_modules": [str(shipped)]}
                          if shipped is not None else None)
    finally:
        if shipped is not None:  # Ray uploaded it when the session started
            shutil.rmtree(shipped.parent, ignore_errors=True)
    report = FleetReport(command=request.command, cluster=cluster.address)
    try:
        types = cluster.refresh()
        by_device: dict[str, list[Any]] = {}
        unknown: list[str] = []
        for ray_type, nodes in sorted(types.items()):
            name = _catalog_name(ray_type, catalog)
            if name is None:
                unknown.append(ray_type)
            else:
                by_device.setdefault(name, []).extend(nodes)
        devices = [d for d in requested if d != CLUSTER]
        if CLUSTER in requested:
            devices += [d for d in sorted(by_device) if d not in devices]
            devices += [t for t in unknown if t not in devices]
        if not devices:
            raise CannotRunHereError(
                f"the Ray cluster ({cluster.address}) offers no GPU type: no alive node has an "
                "accelerator_type:* resource or a ray.io/accelerator-type label (Ray sets them "
                "on nodes with NVIDIA GPUs)")
        rows: list[DeviceOutcome | None] = []
        tasks: list[FleetTask] = []
        settings_key = "options" if request.command == "smoke" else "workload"
        for name, text in deployments:
            for device in devices:
                nodes = sorted(by_device.get(device, []), key=lambda n: (-n.gpus, n.hostname))
                if device in unknown:
                    rows.append(DeviceOutcome(
                        device=device, config=name, status="cannot-run",
                        exit_code=ExitCode.CANNOT_RUN, ray_type=device,
                        errors=[f"the cluster offers accelerator type {device}, which "
                                "attn-select's device catalog does not know"],
                        hint="add it to schemas/devices.yaml (or as an alias of a known GPU)"))
                    continue
                gpu_nodes = [n for n in nodes if n.gpus >= 1]
                if not gpu_nodes:
                    offered = ", ".join(sorted(by_device)) or "none"
                    rows.append(DeviceOutcome(
                        device=device, config=name, status="absent",
                        exit_code=ExitCode.CANNOT_RUN,
                        errors=[f"no alive node with a {device} GPU in the cluster"
                                + (" (nodes of that type list no GPU)" if nodes else "")
                                + f"; it offers: {offered}"],
                        hint="start a node of that type, or leave the device out"))
                    continue
                rows.append(None)
                tasks.append(FleetTask(device=device, node=gpu_nodes[0], request={
                    "config": name, "text": text, "device": device,
                    settings_key: request.settings}))
        if tasks:
            answers, report.interrupted = run_tasks(
                cluster, tasks, command=request.command, timeout_s=request.timeout_s,
                progress=progress, entry=entry)
            filled = iter(answers)
            rows = [row if row is not None else next(filled) for row in rows]
        report.outcomes = [row for row in rows if row is not None]
    finally:
        cluster.close()
    report.elapsed_s = round(time.perf_counter() - started, 3)
    return report
