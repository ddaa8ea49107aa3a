"""The device catalog (``schemas/devices.yaml``)."""

from __future__ import annotations

from pydantic import Field

from selector.schema.types import StrictModel

__all__ = ["Device", "DeviceCatalog"]


class Device(StrictModel):
    """One GPU model."""

    name: str
    aliases: tuple[str, ...] = ()
    capability: str = Field(pattern=r"^\d+\.\d+$")
    """CUDA compute capability, e.g. ``9.0``."""
    architecture: str
    memory_gib: float
    hbm_bandwidth_tbs: float
    """Peak memory bandwidth in TB/s (vendor figure)."""
    bf16_dense_tflops: float | None
    """Peak dense BF16 tensor-core TFLOP/s (vendor figure, no sparsity); null = no BF16 tensor cores."""
    notes: str = ""

    @property
    def capability_int(self) -> int:
        major, minor = self.capability.split(".")
        return int(major) * 10 + int(minor)


class DeviceCatalog(StrictModel):
    ignored_words: tuple[str, ...] = ()
    """Words of a device name that name no particular GPU (``NVIDIA``, ``Tesla``,
    ``GeForce``): dropped before a name is matched word by word."""
    devices: tuple[Device, ...]
