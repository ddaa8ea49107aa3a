"""Connect to a Ray cluster and find the GPU types it offers (the only module that starts
or joins Ray; imported only when ``--ray`` is given)."""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from selector.errors import CannotRunHereError, InputError

__all__ = ["RAY_INSTALL_HINT", "RayCluster", "RayNode", "connect", "import_ray"]

RAY_INSTALL_HINT = "pip install 'attn-select[ray]'"
ACCELERATOR_RESOURCE = "accelerator_type:"
ACCELERATOR_LABEL = "ray.io/accelerator-type"
LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024


def import_ray() -> ModuleType:
    """The ``ray`` module; else :class:`CannotRunHereError` with the install hint."""
    try:
        import ray
    except ImportError as error:
        raise CannotRunHereError(
            f"--ray needs the Ray client, which is not installed ({error}); install the "
            f"ray extra: {RAY_INSTALL_HINT}") from None
    return ray


@dataclass(frozen=True)
class RayNode:
    """One alive node with GPUs of one type."""

    node_id: str
    address: str
    hostname: str
    ray_type: str
    gpus: float

    @property
    def label(self) -> str:
        return self.hostname if self.hostname in ("", self.address) else \
            f"{self.hostname} ({self.address})"


def _node_types(node: dict[str, Any]) -> list[str]:
    resources: dict[str, float] = node.get("Resources") or {}
    types = [key[len(ACCELERATOR_RESOURCE):] for key, value in resources.items()
             if key.startswith(ACCELERATOR_RESOURCE) and value > 0]
    label = (node.get("Labels") or {}).get(ACCELERATOR_LABEL)
    if label and label not in types:
        types.append(str(label))
    return types


def nodes_by_type(nodes: list[dict[str, Any]]) -> dict[str, list[RayNode]]:
    """Ray accelerator type -> the alive nodes offering it (``ray.nodes()`` entries in)."""
    found: dict[str, list[RayNode]] = {}
    for node in nodes:
        if not node.get("Alive", node.get("alive", False)):
            continue
        gpus = float((node.get("Resources") or {}).get("GPU", 0.0))
        for ray_type in _node_types(node):
            found.setdefault(ray_type, []).append(RayNode(
                node_id=str(node["NodeID"]), address=str(node.get("NodeManagerAddress", "")),
                hostname=str(node.get("NodeManagerHostname", "")), ray_type=ray_type,
                gpus=gpus))
    for members in found.values():
        members.sort(key=lambda n: (-n.gpus, n.hostname, n.node_id))
    return found


@dataclass
class RayCluster:
    """A connection to a Ray cluster; :meth:`close` leaves a cluster it did not start."""

    ray: ModuleType
    address: str
    started_here: bool
    joined_here: bool
    types: dict[str, list[RayNode]] = field(default_factory=dict)

    def refresh(self) -> dict[str, list[RayNode]]:
        self.types = nodes_by_type(self.ray.nodes())
        return self.types

    def close(self) -> None:
        if self.joined_here:
            self.ray.shutdown()


CONNECT_TIMEOUT_S = 10.0
"""How long to wait for a Ray address to accept a connection (Ray itself retries for
minutes)."""


def _check_reachable(target: str) -> None:
    """Raise :class:`CannotRunHereError` unless ``HOST:PORT`` (or ``ray://HOST:PORT``)
    accepts a TCP connection within :data:`CONNECT_TIMEOUT_S`."""
    host, _, port = target.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"{target!r} is not a Ray address", field="--ray",
                         hint="auto, local, HOST:PORT (the GCS, e.g. head:6379) or "
                              "ray://HOST:PORT (Ray Client, e.g. head:10001)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise CannotRunHereError(
            f"cannot reach the Ray cluster at {target}: {error} (is the head node up, and "
            "is that its GCS or Ray Client port?)") from None


def connect(address: str, *, runtime_env: dict[str, Any] | None = None) -> RayCluster:
    """``auto``: this process's Ray session, ``RAY_ADDRESS``, or a cluster running on this
    machine; ``local``: start one here (stopped again by :meth:`RayCluster.close`); any
    other value: a Ray address (``HOST:PORT`` or ``ray://HOST:PORT``). ``runtime_env``:
    the job's runtime environment (``--ship-code``: ``py_modules``)."""
    ray = import_ray()
    if ray.is_initialized():
        if runtime_env:
            raise InputError("--ship-code needs a Ray session of its own, and this process "
                             "has joined one already", field="--ship-code",
                             hint="run attn-select in a process of its own")
        return RayCluster(ray, address, started_here=False, joined_here=False)
    settings: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False,
                                "runtime_env": runtime_env}
    if address == "local":
        # the tasks return small JSON documents: a small object store (default: 30% of RAM)
        try:
            ray.init(include_dashboard=False, object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                     **settings)
        except (OSError, RuntimeError, ConnectionError, ValueError) as error:
            raise CannotRunHereError(
                f"cannot start a local Ray cluster: {type(error).__name__}: "
                f"{str(error).splitlines()[0][:300]}") from None
        return RayCluster(ray, "local", started_here=True, joined_here=True)
    target = (os.environ.get("RAY_ADDRESS") or "auto") if address == "auto" else address
    if target != "auto":
        _check_reachable(target)
    try:
        ray.init(address=target, **settings)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = ("no running Ray cluster was found (RAY_ADDRESS is unset and none runs on "
                 "this machine)" if target == "auto" else f"cannot join the Ray cluster at "
                 f"{target}")
        raise CannotRunHereError(
            f"{where}: {type(error).__name__}: {str(error).splitlines()[0][:200]}; start one "
            "(`ray start --head` on the head node, `ray start --address HEAD:6379` on each "
            "GPU node) or use --ray local for this machine alone") from None
    return RayCluster(ray, target, started_here=False, joined_here=True)
