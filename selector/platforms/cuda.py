"""The CUDA platform (vLLM's ``CudaPlatform``, ``vllm/platforms/cuda.py``): compute
capabilities ``major.minor``, architectures ``sm_XY``, torch with a CUDA device."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from selector.errors import CannotRunHereError
from selector.platforms import GPU_EXTRA_HINT, Provided, import_torch
from selector.schema.device import Device

__all__ = [
    "ENVIRONMENT_VARIABLES",
    "INSTALL_HINT",
    "NAME",
    "arch_of",
    "capability_text",
    "check_device",
    "kernel_providers",
    "open_device",
    "parse_capability",
    "probe_torch",
    "read_switch",
]

NAME = "cuda"

ENVIRONMENT_VARIABLES: dict[str, str] = {}
"""The CUDA platform's own switches (none: the CUDA variables attn-select reads are read
for every platform, ``selector/inputs/serve/environment.py``)."""


def read_switch(value: str) -> bool:
    """A switch's value as vLLM's ``envs.py`` reads its booleans: ``1`` / ``true``."""
    return value.strip().lower() in ("1", "true")

INSTALL_HINT = GPU_EXTRA_HINT

_TEXT = re.compile(r"(?:sm_?)?(\d+)(?:\.(\d+))?")


@functools.cache
def _from_text(text: str) -> int:
    match = _TEXT.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(text)
    major, minor = match.groups()
    if minor is None:
        value = int(major)
        return value if value >= 10 else value * 10
    return int(major) * 10 + int(minor)


def parse_capability(value: object) -> int:
    """``"9.0"``, ``"sm_90"``, ``"90"``, ``90``, ``9``, ``[9, 0]`` -> 90; ValueError
    for anything else (``True`` is no capability)."""
    if isinstance(value, str):
        return _from_text(value)
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value if value >= 10 else value * 10
    if isinstance(value, (list, tuple)) and len(value) == 2:
        major, minor = value
        if isinstance(major, int) and isinstance(minor, int) and not isinstance(major, bool):
            return major * 10 + minor
    raise ValueError(value)


def capability_text(cc: int) -> str:
    """90 -> ``9.0``, 121 -> ``12.1`` (``DeviceCapability.as_version_str``)."""
    return f"{cc // 10}.{cc % 10}"


def arch_of(cc: int) -> str:
    """90 -> ``sm_90``, 121 -> ``sm_121`` (nvcc's ``-arch`` names)."""
    return f"sm_{cc}"


def check_device(device: Device) -> str:
    """A CUDA device's ``arch`` is ``sm_`` and its capability's digits."""
    expected = arch_of(parse_capability(device.capability))
    if device.arch != expected:
        return (f"arch {device.arch!r} is not that of capability {device.capability} "
                f"(write arch: {expected})")
    return ""


def probe_torch(what: str = "the smoke check") -> Any:
    """torch, with a CUDA device available (``torch.version.cuda`` set and
    ``torch.cuda.is_available()``); else :class:`CannotRunHereError`."""
    torch = import_torch(f"{what} needs PyTorch", f"install the GPU extra: {INSTALL_HINT}")
    if not torch.cuda.is_available():
        fix = (f"this torch is a CPU-only build; install a CUDA build ({INSTALL_HINT})"
               if torch.version.cuda is None else
               "check the NVIDIA driver and CUDA_VISIBLE_DEVICES")
        raise CannotRunHereError(
            f"{what} needs a CUDA GPU, and torch {torch.__version__} sees none "
            f"(torch.cuda.is_available() is False): {fix}")
    return torch


def open_device(torch: Any) -> tuple[Any, str]:
    """CUDA initialised, its current device and its name with the architecture
    (``NVIDIA H100 80GB HBM3 (sm_90)``)."""
    torch.cuda.init()
    device = torch.device("cuda")
    properties = torch.cuda.get_device_properties(device)
    return device, f"{properties.name} ({arch_of(properties.major * 10 + properties.minor)})"


def kernel_providers(backend: str, listed: Sequence[Provided]) -> list[Provided]:
    """Every provider the contract lists, in its order: vLLM's backend classes and
    kernels, its compiled extensions (``VLLM_KERNELS_DIR``), the standalone packages (all
    built for CUDA)."""
    del backend
    return list(listed)
