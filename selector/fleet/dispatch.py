"""Run one task per (deployment, device type) on the cluster and collect every answer.

A task is pinned to one node of its type (node affinity, one GPU, the type's
``accelerator_type:*`` resource) and is never retried: a crash is an answer. Tasks that
do not answer within the timeout are cancelled, and so is everything on Ctrl-C.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from selector.errors import ExitCode
from selector.fleet.cluster import RayCluster, RayNode
from selector.fleet.entry import NODE_INSTALL_HINT
from selector.fleet.outcome import DeviceOutcome

__all__ = ["ENTRIES", "FleetTask", "call_entry", "run_tasks"]

ENTRIES: dict[str, str] = {
    "smoke": "selector.fleet.entry:smoke_on_this_node",
    "bench": "selector.fleet.entry:bench_on_this_node",
}
"""The worker entry of each command, as ``module:function`` (imported on the worker)."""

POLL_S = 0.5
"""How often the driver wakes up while waiting (keeps Ctrl-C prompt)."""


@dataclass(frozen=True)
class FleetTask:
    """One row to run: a deployment on one node of one device type."""

    device: str
    node: RayNode
    request: dict[str, Any]

    @property
    def config(self) -> str:
        return str(self.request["config"])


def call_entry(entry: str, request: dict[str, Any]) -> dict[str, Any]:
    """Runs on the worker: import ``module:function`` and call it with ``request``."""
    module, _, name = entry.partition(":")
    function: Callable[[dict[str, Any]], dict[str, Any]] = getattr(
        importlib.import_module(module), name)
    return function(request)


def _row(task: FleetTask, *, status: Any, exit_code: int, errors: list[str],
         hint: str | None, elapsed: float | None) -> DeviceOutcome:
    return DeviceOutcome(device=task.device, config=task.config, status=status,
                         exit_code=exit_code, ray_type=task.node.ray_type,
                         node_id=task.node.node_id, node=task.node.label, errors=errors,
                         hint=hint, elapsed_s=None if elapsed is None else round(elapsed, 3))


def _answered(task: FleetTask, answer: dict[str, Any], elapsed: float) -> DeviceOutcome:
    return DeviceOutcome.answered(
        device=task.device, config=task.config, exit_code=int(answer["exit_code"]),
        ray_type=task.node.ray_type, node_id=task.node.node_id,
        node=str(answer.get("hostname") or task.node.label),
        errors=[str(e) for e in answer.get("errors") or []], hint=answer.get("hint"),
        elapsed_s=round(elapsed, 3), report=answer.get("report"),
        worker=dict(answer.get("worker") or {}),
        payload={k: v for k, v in answer.items() if k == "measurements" and v is not None})


def _failed(ray: Any, task: FleetTask, error: Exception, elapsed: float) -> DeviceOutcome:
    """A task that raised instead of answering: say why, on which node."""
    exceptions = ray.exceptions
    where = f"on node {task.node.label}"
    if isinstance(error, exceptions.TaskCancelledError):
        return _row(task, status="cancelled", exit_code=ExitCode.CANNOT_RUN,
                    errors=[f"cancelled {where}"], hint=None, elapsed=elapsed)
    died = tuple(getattr(exceptions, name) for name in
                 ("WorkerCrashedError", "NodeDiedError", "OutOfMemoryError",
                  "LocalRayletDiedError", "ObjectLostError") if hasattr(exceptions, name))
    if isinstance(error, died):
        first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
        return _row(task, status="worker-died", exit_code=ExitCode.CANNOT_RUN,
                    errors=[f"the worker died {where}: {type(error).__name__}"
                            + (f": {first}" if first else "")],
                    hint="a kernel that crashes its process, or memory running out, ends the "
                         "worker: run `attn-select smoke` on that node to see it",
                    elapsed=elapsed)
    cause = getattr(error, "cause", None) or error
    text = f"{type(cause).__name__}: {cause}".strip().splitlines()
    message = (text[0] if text else type(cause).__name__)[:400]
    if isinstance(cause, ImportError) or (
            isinstance(error, getattr(exceptions, "RuntimeEnvSetupError", ())) ):
        return _row(task, status="cannot-run", exit_code=ExitCode.CANNOT_RUN,
                    errors=[f"attn-select cannot be loaded {where}: {message}"],
                    hint=f"{NODE_INSTALL_HINT}, or pass --ship-code (a Ray runtime_env "
                         "with py_modules) with attn-select's dependencies installed there",
                    elapsed=elapsed)
    return _row(task, status="error", exit_code=ExitCode.INTERNAL,
                errors=[f"the task raised {where}: {message}"],
                hint="an unexpected error: please report it", elapsed=elapsed)


def _submit(ray: Any, task: FleetTask, entry: str, name: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(call_entry)
    return remote.options(
        name=f"attn-select {name} {task.device}", num_gpus=1, num_cpus=0, max_retries=0,
        retry_exceptions=False,
        resources={f"accelerator_type:{task.node.ray_type}": 0.001},
        scheduling_strategy=NodeAffinitySchedulingStrategy(task.node.node_id, soft=False),
    ).remote(entry, task.request)


def run_tasks(cluster: RayCluster, tasks: Sequence[FleetTask], *, command: str,
              timeout_s: float, progress: Callable[[str], None] = lambda _: None,
              entry: str | None = None) -> tuple[list[DeviceOutcome], bool]:
    """Run every task; return one outcome per task (in the tasks' order) and whether the
    run was interrupted (Ctrl-C: every unfinished task is cancelled)."""
    ray = cluster.ray
    entry = entry or ENTRIES[command]
    started = time.perf_counter()
    pending: dict[Any, int] = {_submit(ray, task, entry, command): index
                               for index, task in enumerate(tasks)}
    outcomes: dict[int, DeviceOutcome] = {}
    interrupted = False
    lost: str | None = None
    deadline = started + timeout_s
    try:
        while pending:
            now = time.perf_counter()
            if now >= deadline:
                break
            waiting = ", ".join(tasks[i].device for i in sorted(pending.values()))
            progress(f"{command} on the cluster: waiting for {waiting}")
            ready, _ = ray.wait(list(pending), num_returns=1,
                                timeout=min(POLL_S, deadline - now))
            for ref in ready:
                index = pending.pop(ref)
                elapsed = time.perf_counter() - started
                try:
                    outcomes[index] = _answered(tasks[index], ray.get(ref), elapsed)
                except Exception as error:
                    outcomes[index] = _failed(ray, tasks[index], error, elapsed)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as error:  # the driver lost the cluster (a Ray Client or GCS failure)
        lost = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}" \
            if str(error).strip() else type(error).__name__
    for ref, index in pending.items():
        try:
            ray.cancel(ref, force=True)
        except Exception:  # already finished, or the cluster is gone
            pass
        task = tasks[index]
        if interrupted:
            outcomes[index] = _row(task, status="cancelled", exit_code=ExitCode.CANNOT_RUN,
                                   errors=[f"interrupted (Ctrl-C): cancelled on node "
                                           f"{task.node.label}"], hint=None, elapsed=None)
        elif lost:
            outcomes[index] = _row(task, status="cannot-run", exit_code=ExitCode.CANNOT_RUN,
                                   errors=[f"lost the Ray cluster while waiting for node "
                                           f"{task.node.label}: {lost}"],
                                   hint="check the head node and the network, then run again",
                                   elapsed=time.perf_counter() - started)
        else:
            outcomes[index] = _row(
                task, status="timed-out", exit_code=ExitCode.CANNOT_RUN,
                errors=[f"no answer within {timeout_s:g} s: cancelled on node {task.node.label}"],
                hint="a first run JIT-compiles kernels (FlashInfer prefill ~90 s), and a task "
                     "waits while its node's GPUs are busy: raise --timeout",
                elapsed=timeout_s)
    return [outcomes[i] for i in range(len(tasks))], interrupted
