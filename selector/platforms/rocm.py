"""The ROCm platform (vLLM's ``RocmPlatform``, ``vllm/platforms/rocm.py``): AMD GPUs named
by their GCN architecture (``gfx942``), whose capability vLLM derives from that name
(``_capability_from_gcn_arch``, 0.33.0 ``rocm.py:236-305``: ``gfx942`` -> 9.4), and torch
built for HIP.

vLLM's ROCm rules read the architecture itself (``on_mi3xx()``, ``get_cdna_version()``,
``on_rdna4()``: ``rocm.py:215-234,335-384``), which a capability does not always name
(gfx1100, gfx1101 and gfx1102 are all 11.0). The modelled architectures are those of the
catalog's AMD devices, one per capability (:data:`ARCHS`); a profile's ROCm facts read the
capability as that architecture's, and any other architecture is refused by name rather
than taken for its neighbour.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from selector.errors import CannotRunHereError
from selector.platforms import Provided, import_torch
from selector.schema.device import Device

__all__ = [
    "ARCHS",
    "ENVIRONMENT_VARIABLES",
    "INSTALL_HINT",
    "NAME",
    "arch_of",
    "capability_of_arch",
    "capability_text",
    "check_device",
    "environment_facts",
    "kernel_providers",
    "open_device",
    "parse_capability",
    "probe_torch",
    "read_switch",
]

NAME = "rocm"

INSTALL_HINT = "install a ROCm build of torch (https://pytorch.org, ROCm wheels) and aiter"

ARCHS: dict[int, str] = {
    90: "gfx90a",    # CDNA 2: MI210, MI250X
    94: "gfx942",    # CDNA 3: MI300A, MI300X, MI308X, MI325X
    95: "gfx950",    # CDNA 4: MI350X, MI355X
    110: "gfx1100",  # RDNA 3: Radeon PRO W7900, RX 7900 XTX
    115: "gfx1151",  # RDNA 3.5: Strix Halo (Radeon 8060S)
    120: "gfx1201",  # RDNA 4: Radeon AI PRO R9700
}
"""Capability -> the one architecture attn-select models for it (the catalog's)."""

ENVIRONMENT_VARIABLES: dict[str, str] = {
    "VLLM_ROCM_USE_AITER": "env_rocm_use_aiter",
    "VLLM_ROCM_USE_AITER_MHA": "env_rocm_use_aiter_mha",
    "VLLM_ROCM_USE_AITER_MLA": "env_rocm_use_aiter_mla",
    "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "env_rocm_use_aiter_unified_attention",
    "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "env_rocm_shuffle_kv_cache_layout",
    "VLLM_ROCM_USE_AITER_TRITON_SPARSE_MLA": "env_rocm_use_aiter_triton_sparse_mla",
}
"""The ``VLLM_ROCM_*`` switches vLLM's ROCm selection reads -> the environment fact of
``platforms/rocm.yaml`` each sets (a deployment's ``environment:`` key is the fact's name
without ``env_``). vLLM reads each as ``os.getenv(NAME, default).lower() in ("true",
"1")`` (0.33.0 ``vllm/envs.py:1267-1404``): :func:`read_switch`."""


def read_switch(value: str) -> bool:
    """A ``VLLM_ROCM_*`` switch's value as vLLM reads it: ``"1"`` / ``"true"`` (any case)
    are on, every other text is off (``vllm/envs.py``)."""
    return value.lower() in ("true", "1")


def environment_facts(env: Mapping[str, str]) -> dict[str, bool]:
    """The environment facts (and ``use_batch_invariant``) a process environment's
    ``VLLM_ROCM_*`` switches and ``VLLM_BATCH_INVARIANT`` set, as vLLM reads them; a
    switch not set keeps the profile's default (vLLM's)."""
    facts: dict[str, bool] = {}
    for name, value in env.items():
        if name in ENVIRONMENT_VARIABLES:
            facts[ENVIRONMENT_VARIABLES[name]] = read_switch(value)
        elif name == "VLLM_BATCH_INVARIANT":  # bool(int(...)) (vllm/envs.py:638)
            facts["use_batch_invariant"] = bool(int(value))
    return facts


_GFX = re.compile(r"gfx(\d+)[0-9a-z]*")
_NUMBER = re.compile(r"(\d+)\.(\d+)")


def capability_of_arch(arch: str) -> int:
    """vLLM's capability of a GCN architecture, ``major * 10 + minor``, by the rule of
    ``_capability_from_gcn_arch`` (0.33.0 ``rocm.py:236-305``: the digits after ``gfx``;
    two or three: ``gfx9Xs`` -> 9.X, ``gfx90a`` -> 9.0; four: ``gfxMMms`` -> MM.m; major 9
    to 12); ValueError for what vLLM refuses."""
    match = _GFX.fullmatch(arch.strip().lower().split(":")[0])
    if match is None:
        raise ValueError(arch)
    digits = match.group(1)
    if len(digits) in (2, 3):
        major, minor = int(digits[0]), int(digits[1])
    elif len(digits) == 4:
        major, minor = int(digits[:2]), int(digits[2])
    else:
        raise ValueError(arch)
    if not 9 <= major <= 12:
        raise ValueError(arch)
    return major * 10 + minor


def parse_capability(value: object) -> int:
    """``"gfx942"``, ``"9.4"``, ``94``, ``[9, 4]`` -> 94, for the modelled architectures
    (:data:`ARCHS`); ValueError for anything else (another gfx name of the same
    capability included: its rules may differ)."""
    cc: int
    if isinstance(value, str):
        text = value.strip().lower()
        if text.startswith("gfx"):
            cc = capability_of_arch(text)
            if ARCHS.get(cc) != text.split(":")[0]:
                raise ValueError(value)
            return cc
        match = _NUMBER.fullmatch(text)
        if match is None:
            raise ValueError(value)
        cc = int(match.group(1)) * 10 + int(match.group(2))
    elif isinstance(value, bool):
        raise ValueError(value)
    elif isinstance(value, int):
        cc = value
    elif isinstance(value, (list, tuple)) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        cc = value[0] * 10 + value[1]
    else:
        raise ValueError(value)
    if cc not in ARCHS:
        raise ValueError(value)
    return cc


def capability_text(cc: int) -> str:
    """94 -> ``9.4``, 120 -> ``12.0`` (``DeviceCapability.as_version_str``)."""
    return f"{cc // 10}.{cc % 10}"


def arch_of(cc: int) -> str:
    """94 -> ``gfx942``: the modelled architecture of a capability."""
    return ARCHS[cc]


def check_device(device: Device) -> str:
    """A ROCm device's ``arch`` is a modelled architecture and its capability vLLM's."""
    try:
        cc = capability_of_arch(device.arch)
    except ValueError:
        return f"arch {device.arch!r} is no GCN architecture (write e.g. arch: gfx942)"
    if ARCHS.get(cc) != device.arch:
        return (f"arch {device.arch} is not modelled (the modelled architectures: "
                f"{', '.join(ARCHS.values())})")
    if capability_text(cc) != device.capability:
        return (f"capability {device.capability} is not vLLM's for {device.arch} "
                f"(write capability: \"{capability_text(cc)}\")")
    return ""


def probe_torch(what: str = "the smoke check") -> Any:
    """torch, with an AMD GPU available (``torch.version.hip`` set and
    ``torch.cuda.is_available()``); else :class:`CannotRunHereError`."""
    torch = import_torch(f"{what} needs an AMD GPU and PyTorch built for ROCm", INSTALL_HINT)
    if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
        seen = ("a CUDA build, for NVIDIA GPUs" if getattr(torch.version, "cuda", None)
                else "a CPU-only build") if getattr(torch.version, "hip", None) is None \
            else "a ROCm build that sees no GPU (check the amdgpu driver and HIP_VISIBLE_DEVICES)"
        raise CannotRunHereError(
            f"{what} needs an AMD GPU (a ROCm deployment runs vLLM's ROCm kernels), and "
            f"torch {torch.__version__} is {seen}; run it on a machine with an AMD "
            f"Instinct or Radeon GPU and {INSTALL_HINT}")
    return torch



def open_device(torch: Any) -> tuple[Any, str]:
    """HIP initialised (torch's ``cuda`` device on a ROCm build), its device and its name
    with the GCN architecture (``AMD Instinct MI300X (gfx942)``)."""
    torch.cuda.init()
    device = torch.device("cuda")
    properties = torch.cuda.get_device_properties(device)
    arch = str(getattr(properties, "gcnArchName", "") or "").split(":")[0] or "gfx"
    return device, f"{properties.name} ({arch})"


def kernel_providers(backend: str, listed: Sequence[Provided]) -> list[Provided]:
    """The providers the contract lists for a ROCm backend, in its order (vLLM's own
    ROCm ops and Triton kernels); reached only on an AMD GPU (:func:`probe_torch`)."""
    del backend
    return list(listed)
