"""One real local Ray cluster per test module (2 CPUs; custom ``accelerator_type:*``
resources stand in for GPU types), and the proof that it leaves no process behind."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ray_processes import processes_of  # noqa: E402

CLUSTER_TYPES = ("H100", "B200", "L40S", "A100", "A10G", "L4", "A10")
"""GPU types the test cluster offers (H20, asked for in the tests, is absent)."""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    pytest.importorskip("torch")
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # no OOM killer: on a shared CI box the node's memory use is not the tests' own doing
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, num_gpus=len(CLUSTER_TYPES),
             resources={f"accelerator_type:{name}": 1 for name in CLUSTER_TYPES},
             object_store_memory=80 * 1024 * 1024, include_dashboard=False,
             log_to_driver=False, logging_level=logging.WARNING,
             runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}})
    session = ray._private.worker._global_node.get_session_dir_path()
    try:
        yield ray
    finally:
        ray.shutdown()
    deadline = time.monotonic() + 30
    while processes_of(session) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_of(session) == [], f"Ray processes left behind: {processes_of(session)}"


@pytest.fixture
def cpu_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fleet tasks call the CPU node's entries (tests/fleet/cpu_node.py)."""
    from selector.fleet import dispatch

    monkeypatch.setitem(dispatch.ENTRIES, "smoke", "cpu_node:smoke_on_cpu")
    monkeypatch.setitem(dispatch.ENTRIES, "bench", "cpu_node:bench_on_cpu")
