"""Start vLLM on the oracle's emulated CUDA platform, at a compute capability.

Every recorder that imports vLLM starts it here, before any vLLM import: the instrument's
``bootstrap`` (compiled extensions stubbed, ``current_platform`` = vLLM's own
``NvmlCudaPlatform`` answering the emulated capability; see the oracle's README), then
``emulate`` switches the capability (and, where a recorder asks vLLM about a device, the
name and memory the platform reports). Model builds need more CPU stand-ins:
``oracle.models.start_models``.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from .locate import instrument

__all__ = ["capability", "emulate", "engine", "start"]


def capability(text: str | tuple[int, int]) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)`` (a pair is returned as it is)."""
    if isinstance(text, tuple):
        return text
    major, minor = str(text).split(".")
    return int(major), int(minor)


def start(at: str | tuple[int, int] = (9, 0), *,
          oracle_dir: str | os.PathLike[str] | None = None) -> ModuleType:
    """vLLM imported as a CUDA platform of capability ``at`` (idempotent); the instrument."""
    module = instrument(oracle_dir)
    module.bootstrap(capability(at))
    return module


def engine(at: str | tuple[int, int] = (9, 0), *,
           oracle_dir: str | os.PathLike[str] | None = None, **options: Any) -> Any:
    """The instrument's ``Oracle`` (the selection oracle: backend enum, names, config
    builder) started at ``at``, without its KV-cache report unless ``kv_cache=True``."""
    options.setdefault("kv_cache", False)
    return instrument(oracle_dir).Oracle(initial_capability=capability(at), **options)


def emulate(at: str | tuple[int, int], *, name: str | None = None,
            memory_bytes: int | None = None) -> bool:
    """Switch the emulated GPU to capability ``at`` (every vLLM cache cleared on a
    change); with ``name`` / ``memory_bytes`` the platform also reports that device
    name and total memory. True when the capability changed."""
    changed = bool(instrument().set_capability(capability(at)))
    if name is not None or memory_bytes is not None:
        from vllm.platforms import current_platform

        klass = type(current_platform)
        if name is not None:
            klass.get_device_name = classmethod(lambda cls, device_id=0: name)
        if memory_bytes is not None:
            klass.get_device_total_memory = classmethod(lambda cls, device_id=0: memory_bytes)
    return changed
