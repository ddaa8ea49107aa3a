"""The fleet layer without a cluster: exit-code rules, node discovery from ``ray.nodes()``
entries, device names, row JSON, and that nothing imports Ray unless --ray is given."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from selector.catalog import load_catalog
from selector.errors import ExitCode, InputError
from selector.fleet.cluster import nodes_by_type
from selector.fleet.outcome import DeviceOutcome, fleet_exit_code
from selector.fleet.run import CLUSTER, resolve_requested

REPO = Path(__file__).resolve().parents[2]
CONFIG = "tests/fixtures/fleet/small-gqa.yaml"
CODES = st.sampled_from([0, 1, 2, 3, 4, 5, 70])


@given(st.lists(CODES, min_size=1, max_size=8))
def test_exit_code_follows_checks_rules(codes: list[int]) -> None:
    code = fleet_exit_code(codes)
    assert code in codes
    if all(c == 0 for c in codes):
        assert code == 0
    if 2 in codes:
        assert code == 2
    elif 3 in codes and not {1, 70} & set(codes):
        assert code == 3
    elif set(codes) <= {0, 4} and 4 in codes:
        assert code == 4
    assert fleet_exit_code(list(reversed(codes))) == code


def test_rows_take_the_status_of_the_nodes_exit_code() -> None:
    statuses = {code: DeviceOutcome.answered(device="H100", config="x.yaml",
                                             exit_code=code).status
                for code in (0, 1, 2, 3, 4, 70, 5, 6)}
    assert statuses == {0: "passed", 1: "invalid", 2: "input-error", 3: "failed",
                        4: "cannot-run", 70: "error", 5: "substituted", 6: "other"}


@given(st.sampled_from(["passed", "failed", "absent", "timed-out", "worker-died"]),
       st.lists(st.text(max_size=30), max_size=3), st.none() | st.floats(0, 1e4))
def test_rows_round_trip_through_json(status: str, errors: list[str],
                                      elapsed: float | None) -> None:
    row = DeviceOutcome(device="B200", config="d.yaml", status=status,  # type: ignore[arg-type]
                        exit_code=4, errors=errors, elapsed_s=elapsed, node="n1")
    again = DeviceOutcome.from_json(row.to_json())
    assert again.to_json() == row.to_json()


def _node(node_id: str, *, alive: bool = True, gpus: float = 8, types: tuple[str, ...] = (),
          label: str | None = None) -> dict[str, object]:
    resources: dict[str, float] = {"CPU": 64, "GPU": gpus}
    resources.update({f"accelerator_type:{t}": 1 for t in types})
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": f"10.0.0.{node_id}",
            "NodeManagerHostname": f"host{node_id}", "Resources": resources,
            "Labels": {"ray.io/accelerator-type": label} if label else {}}


def test_nodes_are_found_by_resource_and_label() -> None:
    found = nodes_by_type([
        _node("1", types=("H100",)), _node("2", types=("H100",), gpus=2),
        _node("3", label="B200"), _node("4", alive=False, types=("L40S",)),
        _node("5", gpus=0, types=("A10G",)), _node("6")])
    assert sorted(found) == ["A10G", "B200", "H100"]
    assert [n.node_id for n in found["H100"]] == ["1", "2"]  # most GPUs first
    assert found["B200"][0].label == "host3 (10.0.0.3)"
    assert found["A10G"][0].gpus == 0


def test_requested_devices_resolve_through_the_catalog() -> None:
    assert resolve_requested([], load_catalog()) == [CLUSTER]
    assert resolve_requested(["h100-sxm", "H100", "cluster", "B200"], load_catalog()) == ["H100", CLUSTER, "B200"]
    with pytest.raises(InputError) as caught:
        resolve_requested(["H1000"], load_catalog())
    assert caught.value.exit_code == ExitCode.USAGE


def test_fleet_only_flags_need_ray() -> None:
    from selector.cli import app, register_commands

    register_commands()
    for extra in (["--format", "junit"], ["--device", "H100"], [CONFIG]):
        result = CliRunner().invoke(app, ["smoke", CONFIG, *extra])
        assert result.exit_code == 2, result.output
        assert "only for a fleet run (--ray" in result.output
    result = CliRunner().invoke(app, ["smoke", CONFIG, "--dry-run", "--ray", "auto"])
    assert result.exit_code == 2 and "--ray: only for a fleet run" in result.output


SCRIPT = textwrap.dedent("""
    import sys
    from typer.testing import CliRunner
    from selector.cli import app, register_commands
    register_commands()
    runner = CliRunner()
    for args in (["smoke", "--help"], ["bench", "--help"], ["smoke", "{config}"],
                 ["check", "{config}"]):
        runner.invoke(app, args)
    assert "ray" not in sys.modules, "a command without --ray imported Ray"
    sys.modules["ray"] = None  # Ray not installed
    result = runner.invoke(app, ["smoke", "{config}", "--ray", "auto"])
    assert result.exit_code == 4, result.output
    assert "pip install 'attn-select[ray]'" in result.output, result.output
    print("ok")
""").replace("{config}", CONFIG)


def test_nothing_imports_ray_unless_asked() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stdout + result.stderr


def test_ray_local_starts_a_cluster_and_stops_it() -> None:
    """``--ray local`` on a machine without GPUs: the row says the type is absent (exit 4),
    and the cluster it started is gone when the command returns."""
    pytest.importorskip("ray")
    import shutil
    import tempfile

    from ray_processes import processes_of

    tmp_path = Path(tempfile.mkdtemp(prefix="rayt", dir="/tmp"))  # Ray's sockets: short paths
    env = {**__import__("os").environ, "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_TMPDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "selector", "smoke", CONFIG, "--ray", "local", "--device", "H200",
         "--format", "json"], cwd=REPO, capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 4, result.stdout + result.stderr
    document = __import__("json").loads(result.stdout)
    assert document["cluster"] == "local"
    assert [(r["device"], r["status"]) for r in document["devices"]] == [("H200", "absent")]
    sessions = [str(p) for p in tmp_path.glob("**/session_2*")]
    assert sessions, "the local cluster wrote no session under RAY_TMPDIR"
    assert all(processes_of(session) == [] for session in sessions)
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_cluster_without_gpu_types_is_an_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from selector.errors import CannotRunHereError
    from selector.fleet import cluster as cluster_module
    from selector.fleet.run import FleetRequest, run_fleet

    class NoGpus:
        closed = False

        def __init__(self) -> None:
            self.address = "fake"

        def refresh(self) -> dict[str, list[object]]:
            return {}

        def close(self) -> None:
            NoGpus.closed = True

    monkeypatch.setattr(cluster_module, "connect", lambda *a, **k: NoGpus())
    with pytest.raises(CannotRunHereError, match="offers no GPU type"):
        run_fleet(FleetRequest(command="smoke", configs=(CONFIG,)), catalog=load_catalog())
    assert NoGpus.closed


RAY_NVIDIA_TYPES = {
    # ray/util/accelerators/accelerators.py (Ray 2.60.0): the accelerator_type names Ray
    # gives NVIDIA GPUs -> the catalog device (None: a GPU the catalog does not list)
    "V100": "V100", "P100": None, "T4": "T4", "P4": None, "K80": None, "A10G": "A10G",
    "L4": "L4", "L40S": "L40S", "A100": "A100", "H100": "H100", "H200": "H200", "H20": "H20",
    "B200": "B200", "B300": "B300", "GB200": "GB200", "GB300": None,
    "RTX-PRO-6000": "RTX PRO 6000", "A100-40G": "A100-40GB", "A100-80G": "A100",
    # nvidia_gpu.py's fallback for consumer cards: the product name, hyphen-joined
    "GeForce-RTX-5090": "RTX 5090", "GeForce-RTX-4090": "RTX 4090",
}


def test_rays_gpu_type_names_map_to_catalog_devices() -> None:
    from selector.fleet.run import _catalog_name

    assert {name: _catalog_name(name, load_catalog()) for name in RAY_NVIDIA_TYPES} == RAY_NVIDIA_TYPES


def test_an_address_that_is_no_cluster_is_an_answer_not_a_hang() -> None:
    pytest.importorskip("ray")
    import socket
    import time

    from selector.cli import app, register_commands

    register_commands()
    with socket.socket() as server:  # a port that refuses: bound, never listening
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        started = time.monotonic()
        result = CliRunner().invoke(app, ["smoke", CONFIG, "--ray", f"127.0.0.1:{port}"])
    assert result.exit_code == 4, result.output
    assert "cannot reach the Ray cluster at 127.0.0.1:" in result.output
    assert time.monotonic() - started < 30
    result = CliRunner().invoke(app, ["smoke", CONFIG, "--ray", "head-without-port"])
    assert result.exit_code == 2 and "is not a Ray address" in result.output
