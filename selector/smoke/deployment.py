"""A deployment on another device: a fleet run negotiates the same file once per device
type of the cluster (the smoke plans themselves come from :mod:`selector.pipeline.smoke`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selector.inputs.config import LoadedDeployment

__all__ = ["on_device"]


def on_device(loaded: LoadedDeployment, device: str | None) -> LoadedDeployment:
    """``loaded`` with its ``device:`` replaced by ``device`` (None: unchanged)."""
    if device is None:
        return loaded
    return replace(loaded, deployment=loaded.deployment.model_copy(update={"device": device}))
