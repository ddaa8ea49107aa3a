"""The platform catalog (``schemas/platforms.yaml``) and an engine's per-platform data
(``schemas/engines/<engine>/platforms/<name>.yaml``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from selector.schema.engine import FactSpec, InputSpec, PerformanceHint, PriorityBranch
from selector.schema.types import StrictModel

__all__ = [
    "PLATFORM_SECTIONS",
    "CapabilityKind",
    "PlatformCatalog",
    "PlatformMessages",
    "PlatformProfile",
    "PlatformSpec",
]

CapabilityKind = Literal["sm_XY", "gfxNNN"]
"""How a platform's devices name their architecture: ``sm_90`` (CUDA: ``sm_`` and the
compute capability's digits) or ``gfx942`` (ROCm: the GCN architecture)."""

PLATFORM_SECTIONS = ("environment", "priorities", "reported_backends")
"""The sections of an engine profile that are a platform's own: they live only in the
profile's ``platforms/<name>.yaml``, never in ``profile.yaml``."""


class PlatformSpec(StrictModel):
    """One platform of vLLM (``vllm/platforms/``)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """The platform's name (vLLM's ``device_name``: ``cuda``); the module
    ``selector.platforms.<name>`` reads its capabilities."""
    vendor: str
    vllm_platform: str
    """vLLM's platform class (``CudaPlatform``)."""
    source: str = ""
    capability_kind: CapabilityKind
    environment_prefixes: tuple[str, ...] = ()
    """Prefixes of the process variables the platform's runtime reads (``CUDA_``)."""
    device_control_env_var: str
    """The variable that selects the visible devices (``CUDA_VISIBLE_DEVICES``)."""
    torch_probe: str
    """The attribute of ``torch.version`` a torch built for the platform sets
    (``cuda``; ROCm: ``hip``)."""
    runtime: str
    """The GPU runtime whose memory figure vLLM reads (``torch.cuda.mem_get_info``):
    ``CUDA``; ROCm: ``HIP`` (``hipMemGetInfo``)."""
    environment_basis: str
    """What the environment facts' defaults assume (``vLLM's pinned wheels``; ROCm:
    vLLM's ROCm image): the title of a report's environment table."""
    environment_summary: str
    """The defaults in a few words, for a report's one environment line."""
    out_of_memory: str
    """torch's words when an allocation does not fit the GPU, as a torch built for the
    platform raises them (``torch.OutOfMemoryError: CUDA out of memory``; ROCm: ``HIP
    out of memory``): the start-up refusal of weights larger than the GPU."""


class PlatformCatalog(StrictModel):
    platforms: tuple[PlatformSpec, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> PlatformCatalog:
        names = [p.name for p in self.platforms]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate platform(s) {duplicates}")
        return self


class PlatformMessages(StrictModel):
    """The templates of :class:`EngineMessages` a platform states differently (each one
    replaces the profile's of the same name)."""

    no_valid_backend: str | None = None
    selected_invalid: str | None = None
    config_repr: str | None = None
    reasons_item: str | None = None
    reasons_join: str | None = None
    block_size_precluded: str | None = None
    kv_dtypes_hint: str | None = None
    selected_import_error: str | None = None


class PlatformProfile(StrictModel):
    """What of an engine profile is one platform's own (the complete form, as the base
    profile's ``platforms/<name>.yaml`` states it; a newer profile's file states only
    what changed, by the profile's one inheritance rule)."""

    engine: str = Field(pattern=r"^[a-z][a-z0-9_-]*==\d+(\.\d+)*$")
    platform: str
    environment: dict[str, InputSpec]
    """Run-time facts vLLM detects on the machine; explicit inputs with defaults."""
    priorities: tuple[PriorityBranch, ...]
    """The platform's backend priority lists (``_get_backend_priorities``)."""
    reported_backends: tuple[str, ...]
    """Backends a sweep line reports (the oracle's default set)."""
    facts: tuple[FactSpec, ...] = ()
    """Derived facts of the platform, merged over the profile's by name."""
    performance_hints: tuple[PerformanceHint, ...] = ()
    """Warnings where vLLM's choice on this platform is slower than a valid alternative."""
    mla_prefill: dict[str, Any] | None = None
    """The MLA prefill selector's changes on this platform (``mla_prefill.yaml``'s
    sections: backends by name, priority branches by id, ``consulted``), merged over the
    release's ``mla_prefill.yaml`` (vLLM's ``RocmPlatform.get_mla_prefill_backend_cls``
    has its own list); validated with it."""
    messages: PlatformMessages | None = None
    """Message templates of the platform, merged over the profile's key by key (only the
    ones that differ: ``no_valid_backend`` names vLLM's ``device_name``)."""
