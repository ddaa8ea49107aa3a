"""The KV-cache layout facts of ``schemas/kv-layouts.yaml``."""

from __future__ import annotations

from typing import Literal

from selector.schema.types import KVLayout, StrictModel

__all__ = ["KVLayouts"]


class KVLayouts(StrictModel):
    """KV-cache layout facts that belong to no one backend: other names of the
    ``KVCacheLayout`` members (the legacy ones vLLM accepts, the per-layer ones) and the
    default preference."""

    source: str
    """The engine release the names are read from."""
    aliases: dict[str, KVLayout]
    """Legacy name -> the 5-D layout of the same memory order (``NHD`` -> ``LBNHC``)."""
    per_layer: dict[KVLayout, Literal["NHD", "HND"]]
    """5-D layout -> the per-layer ``NHD`` / ``HND`` view the kernels take (FlashInfer's names)."""
    default_preference: tuple[KVLayout, ...]
    """The layouts most preferred first when no backend declares a supported set."""
