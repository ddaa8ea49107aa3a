"""The platform registry: one module per platform of ``schemas/platforms.yaml``
(``cuda``, ``rocm``), each reading its devices' capability text, naming their architecture and
probing torch for its GPUs.

Every capability a device, a deployment or a flat config states is read here, by the
module of the platform it belongs to, so that one platform's numbers are never taken for
another's (an MI300X's 9.4 is no CUDA 9.x). Importing this package loads no torch.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Protocol, TypeVar, cast

from selector.errors import CannotRunHereError
from selector.schema.device import Device

__all__ = [
    "DEFAULT_PLATFORM",
    "GPU_EXTRA_HINT",
    "PLATFORM_MODULES",
    "PlatformModule",
    "Provided",
    "capability_int",
    "import_torch",
    "platform_module",
]


GPU_EXTRA_HINT = "pip install 'attn-select[gpu]'"


def import_torch(needs: str, hint: str) -> Any:
    """torch, imported for a platform's probe; not installed: :class:`CannotRunHereError`
    saying what ``needs`` it and how to install it (``hint``)."""
    try:
        return importlib.import_module("torch")
    except ImportError as error:
        raise CannotRunHereError(f"{needs}, which is not installed ({error}); {hint}") from None
"""How to install what a GPU run needs (torch and the kernel libraries)."""


Provided = TypeVar("Provided")
"""A kernel provider of the smoke's contract (``selector.smoke.contract.ProviderSpec``)."""


class PlatformModule(Protocol):
    """What every module of this package provides."""

    NAME: str
    """The platform's name in ``schemas/platforms.yaml``."""

    ENVIRONMENT_VARIABLES: dict[str, str]
    """The platform's own ``VLLM_*`` switches -> the environment fact each sets."""

    def read_switch(self, value: str) -> bool:
        """A switch's value as vLLM reads it."""
        ...

    def parse_capability(self, value: object) -> int:
        """Capability text (or number) as users and data write it -> the capability as
        profiles read it (``major * 10 + minor``); ValueError when it is none."""
        ...

    def capability_text(self, cc: int) -> str:
        """The capability as vLLM prints it (``9.0``)."""
        ...

    def arch_of(self, cc: int) -> str:
        """The architecture name of a capability (``sm_90``), as devices.yaml writes it."""
        ...

    def check_device(self, device: Device) -> str:
        """What is wrong with a device entry of this platform ("" if nothing)."""
        ...

    def probe_torch(self, what: str) -> Any:
        """torch, with a GPU of this platform available; else CannotRunHereError
        (``what`` names the run that needs it)."""
        ...

    def open_device(self, torch: Any) -> tuple[Any, str]:
        """The GPU a smoke or bench run puts its tensors on (initialised) and its name as
        the report states it."""
        ...

    def kernel_providers(self, backend: str, listed: Sequence[Provided]) -> list[Provided]:
        """The kernel providers a smoke of ``backend`` tries on this platform's GPUs, in
        order, from those the engine's kernel call contract lists for it (``listed``)."""
        ...


PLATFORM_MODULES: dict[str, str] = {
    "cuda": "selector.platforms.cuda",
    "rocm": "selector.platforms.rocm",
}
"""Platform name -> its module (``tests/unit/test_platforms.py``: the names are those of
``schemas/platforms.yaml``)."""


DEFAULT_PLATFORM = next(iter(PLATFORM_MODULES))
"""The platform of what names none (a device given by capability alone, a flat config):
the first of ``schemas/platforms.yaml`` (``Catalog.default_platform``)."""


def platform_module(name: str) -> PlatformModule:
    """The module of platform ``name`` (KeyError names the known ones)."""
    try:
        path = PLATFORM_MODULES[name]
    except KeyError:
        raise KeyError(f"no module for platform {name!r} (selector/platforms/: "
                       f"{', '.join(PLATFORM_MODULES)})") from None
    module: ModuleType = sys.modules.get(path) or importlib.import_module(path)
    return cast(PlatformModule, module)


def capability_int(device: Device) -> int:
    """A catalog device's capability, read by its platform's module (``9.0`` -> 90)."""
    return platform_module(device.platform).parse_capability(device.capability)
