"""The device catalog (``schemas/devices.yaml``)."""

from __future__ import annotations

from pydantic import Field

from selector.schema.types import StrictModel

__all__ = ["Device", "DeviceCatalog", "OtherPlatform"]


class Device(StrictModel):
    """One GPU model."""

    name: str
    aliases: tuple[str, ...] = ()
    platform: str
    """The platform it runs on (``schemas/platforms.yaml``: ``cuda``)."""
    arch: str = Field(pattern=r"^[a-z]+_?[0-9a-z]+$")
    """The architecture as its platform names it (``sm_90``; ROCm: ``gfx942``)."""
    capability: str = Field(pattern=r"^\d+\.\d+$")
    """The capability vLLM's platform reports for it (``get_device_capability``), e.g.
    ``9.0``; read by the platform's module (:mod:`selector.platforms`)."""
    architecture: str
    memory_gib: float
    hbm_bandwidth_tbs: float
    """Peak memory bandwidth in TB/s (vendor figure)."""
    bf16_dense_tflops: float | None
    """Peak dense BF16 tensor-core TFLOP/s (vendor figure, no sparsity); null = no BF16 tensor cores."""
    notes: str = ""


class OtherPlatform(StrictModel):
    """Accelerators the catalog does not hold, recognised by name, so that a name of
    theirs gets a plain answer rather than a "did you mean" an unrelated GPU."""

    platform: str
    """e.g. ``AMD``."""
    pattern: str
    """A regular expression a device name matches (case-insensitive, the whole name)."""
    reason: str
    """Why the catalog has none, e.g. ``AMD GPUs are not supported yet``."""


class DeviceCatalog(StrictModel):
    ignored_words: tuple[str, ...] = ()
    """Words of a device name that name no particular GPU (``NVIDIA``, ``Tesla``,
    ``GeForce``): dropped before a name is matched word by word."""
    other_platforms: tuple[OtherPlatform, ...] = ()
    """Names of accelerators the catalog does not hold (another vendor's), answered as such."""
    devices: tuple[Device, ...]
