"""The KV-cache layout names of ``schemas/kv-layouts.yaml``."""

from __future__ import annotations

from selector.schema.types import KVLayout, StrictModel

__all__ = ["KVLayoutNames"]


class KVLayoutNames(StrictModel):
    """Names vLLM accepts for a KV-cache layout besides ``KVCacheLayout``'s members."""

    source: str
    """The engine release the names are read from."""
    aliases: dict[str, KVLayout]
    """Legacy name -> the 5-D layout of the same memory order (``NHD`` -> ``LBNHC``)."""
