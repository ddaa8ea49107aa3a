"""The CUDA compute capabilities recorders ask vLLM about, from ``schemas/devices.yaml``.

Every catalog device's capability, plus ``UNCATALOGUED``: capabilities vLLM's code
distinguishes that no catalog device has. A recorder whose grid leaves some out names
them (``cuda_capabilities(without=...)``); naming one that is not in the list is an
error, so a list never silently drifts from the catalog.
"""

from __future__ import annotations

from collections.abc import Iterable

from .locate import REPO

__all__ = ["UNCATALOGUED", "catalog_devices", "cuda_capabilities"]

UNCATALOGUED: dict[str, str] = {
    "8.7": "Jetson Orin (sm_87)",
    "11.0": "Jetson Thor (sm_110)",
}
"""Capabilities vLLM's platform code and kernels name that no catalog device has."""


def catalog_devices(platform: str = "cuda") -> list[dict[str, object]]:
    """The ``devices:`` rows of ``schemas/devices.yaml`` of one platform (a row without
    ``platform:`` is a CUDA device)."""
    import yaml

    data = yaml.safe_load((REPO / "schemas" / "devices.yaml").read_text(encoding="utf-8"))
    return [d for d in data["devices"] if str(d.get("platform", "cuda")).lower() == platform]


def _key(cap: str) -> tuple[int, int]:
    major, minor = cap.split(".")
    return int(major), int(minor)


def cuda_capabilities(*, without: Iterable[str] = (), catalog_only: bool = False) -> tuple[str, ...]:
    """The capabilities (``"9.0"`` ...), ascending: the catalog's and, unless
    ``catalog_only``, ``UNCATALOGUED``; ``without`` those the caller's grid leaves out."""
    found = {str(device["capability"]) for device in catalog_devices()}
    if not catalog_only:
        found |= set(UNCATALOGUED)
    left_out = set(without)
    unknown = sorted(left_out - found, key=_key)
    if unknown:
        raise ValueError(f"cuda_capabilities(without={unknown}): not among {sorted(found, key=_key)}")
    return tuple(sorted(found - left_out, key=_key))
