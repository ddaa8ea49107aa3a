"""``run_distributed``: a shard check with one process per rank (``smoke --gpus N``).

Starts ``N`` copies of :mod:`selector.parallel.worker` joined by ``torch.distributed``
on this host: NCCL with one GPU per rank and NVLink multicast left off
(``NCCL_NVLS_ENABLE=0``), or gloo on the CPU with the torch stand-in kernels (how CI
runs it). Rank 0 writes the report; a rank that fails makes the run fail with its
error output.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from selector.errors import CannotRunHereError, InputError
from selector.parallel.plan import ShardOptions, ShardPlan
from selector.parallel.report import ShardCheck, ShardPlanReport, ShardReport

__all__ = ["run_distributed"]

Progress = Callable[[str], None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _check_world(plans: Sequence[ShardPlan], processes: int) -> None:
    for plan in plans:
        if plan.world_size != processes:
            what = "DCP group" if plan.uses_dcp else "tensor-parallel group"
            raise InputError(
                f"plan '{plan.name}' spans {plan.world_size} ranks (its {what}), "
                f"--gpus is {processes}", field="--gpus",
                hint=f"use --gpus {plan.world_size}")


def _gpu_count() -> int:
    try:
        import torch
    except ImportError as error:
        raise CannotRunHereError(f"the shard check needs PyTorch ({error})") from None
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def _wait(children: list[tuple[subprocess.Popen[bytes], Any]], root: Path,
          timeout_s: float) -> list[str]:
    """Wait for every rank; when one fails (or time runs out) stop the others, which
    would otherwise wait in a collective for it."""
    deadline = time.monotonic() + timeout_s
    codes: dict[int, int] = {}
    while len(codes) < len(children):
        for rank, (child, _) in enumerate(children):
            if rank not in codes and child.poll() is not None:
                codes[rank] = child.returncode
        failed = any(code != 0 for code in codes.values())
        if failed or time.monotonic() > deadline:
            for rank, (child, _) in enumerate(children):
                if rank not in codes:
                    child.kill()
                    codes[rank] = child.wait()
            break
        time.sleep(0.2)
    failures = []
    for rank, (_, log) in enumerate(children):
        log.close()
        if codes[rank] != 0:
            tail = (root / f"rank{rank}.log").read_text(encoding="utf-8")[-600:]
            failures.append(f"rank {rank} exited {codes[rank]}: {tail.strip()}")
    return failures


def run_distributed(plans: Sequence[ShardPlan], options: ShardOptions, *, processes: int,
                    progress: Progress | None = None, timeout_s: float = 540.0
                    ) -> ShardReport:
    """Run every plan with one process per rank; the report comes from rank 0."""
    _check_world(plans, processes)
    on_cpu = options.kernels == "torch" and (options.device or "cpu") == "cpu"
    if not on_cpu:
        found = _gpu_count()
        if found < processes:
            raise CannotRunHereError(
                f"--gpus {processes} needs {processes} GPUs on this host; torch sees {found}")
    notify = progress or (lambda _: None)
    with tempfile.TemporaryDirectory(prefix="attn-select-shards-") as folder:
        root = Path(folder)
        spec = root / "spec.json"
        spec.write_text(json.dumps({"plans": [p.model_dump() for p in plans],
                                    "options": options.model_dump()}), encoding="utf-8")
        out = root / "report.json"
        port = _free_port()
        env = dict(os.environ, NCCL_NVLS_ENABLE="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), WORLD_SIZE=str(processes))
        notify(f"starting {processes} rank processes "
               f"({'gloo, CPU' if on_cpu else 'NCCL, one GPU each'})")
        children = []
        for rank in range(processes):
            log = open(root / f"rank{rank}.log", "w", encoding="utf-8")  # noqa: SIM115
            children.append((subprocess.Popen(
                [sys.executable, "-m", "selector.parallel.worker", "--spec", str(spec),
                 "--rank", str(rank), "--world", str(processes), "--port", str(port),
                 "--out", str(out)],
                env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)), stdout=log,
                stderr=subprocess.STDOUT), log))
        failures = _wait(children, root, timeout_s)
        if failures or not out.exists():
            report = ShardReport(device="-", processes=processes)
            failed = ShardPlanReport("process group", "-", f"{processes} processes", "-", "-",
                                     "-")
            failed.checks.append(ShardCheck("rank processes", False,
                                            " | ".join(failures)[-1500:] or "no report"))
            report.plans.append(failed)
            return report
        return ShardReport.from_json(json.loads(out.read_text(encoding="utf-8")))
