"""The release's grouping of the caches' specs into KV-cache groups (``DrivenModel.grouping``):
vLLM's packed grouping (``selector.kv.packed``) or the uniform groups of 0.25.1-0.28.0."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selector.kv.packed import approximate_gcd, max_layers_per_page, packed_layer_groups
from selector.kv.specs import AnySpec, CircularBufferSpec, MambaSpec, SlidingWindowSpec

__all__ = [
    "packed_groups",
]


def packed_groups(specs: Mapping[str, AnySpec], algorithm: str = "packed"
                  ) -> tuple[list[list[str]], dict[str, int]]:
    """The KV-cache groups (layer names per group) and the pages the grouping pads
    (layer name -> page bytes), by the release's algorithm (``DrivenModel.grouping``)."""
    if algorithm in ("uniform_groups", "uniform_groups_padded"):
        return _uniform_groups(specs, pad=algorithm == "uniform_groups_padded")
    return _packed(specs), {}


def _packed(specs: Mapping[str, AnySpec]) -> list[list[str]]:
    """``_get_packed_kv_cache_groups`` (``selector.kv.packed``); one page size: one group
    per uniform type."""
    groups = packed_layer_groups(specs)
    if groups is not None:
        return groups
    buckets: dict[tuple[Any, ...], list[str]] = {}
    for name, spec in specs.items():
        buckets.setdefault(_uniform_key(spec), []).append(name)
    return list(buckets.values())


def _uniform_key(spec: AnySpec) -> tuple[Any, ...]:
    """``UniformTypeKVCacheSpecs.is_uniform_type``: one block size, one base spec type (a
    sliding window also of one width; ``is_uniform_with_collection``,
    vllm/v1/kv_cache_interface.py:315-326, :957-996 in 0.33.0)."""
    if isinstance(spec, SlidingWindowSpec):
        return ("sliding", spec.block_size, spec.sliding_window)
    if isinstance(spec, CircularBufferSpec | MambaSpec):
        return (spec.kind, spec.block_size)
    return ("full", spec.block_size)


def _uniform_groups(specs: Mapping[str, AnySpec], *, pad: bool
                    ) -> tuple[list[list[str]], dict[str, int]]:
    """The DeepSeek-V4 grouping of 0.25.1-0.28.0 (``group_and_unify_kv_cache_specs`` and
    ``_get_kv_cache_groups_uniform_groups``, vllm/v1/core/kv_cache_utils.py:1499-1666 in
    0.25.1): every MLA cache in one group; the sliding-window caches by (block, window),
    each split into groups of the chosen number of layer tuples; ``pad`` (0.25.1-0.26.0):
    every sliding-window page padded to the nearest larger page of the MLA group."""
    mla = {n: s for n, s in specs.items() if not isinstance(s, SlidingWindowSpec)}
    windows: dict[tuple[int, int], dict[str, AnySpec]] = {}
    for name, spec in specs.items():
        if isinstance(spec, SlidingWindowSpec):
            windows.setdefault((spec.block_size, spec.sliding_window), {})[name] = spec
    counts = [max_layers_per_page(mla), *(max_layers_per_page(b) for b in windows.values())]
    chunk = approximate_gcd(counts, counts[0])
    mla_pages = {s.page_size_bytes for s in mla.values()}
    groups: list[list[str]] = [list(mla)]
    padded: dict[str, int] = {}
    for bucket in windows.values():
        by_page: dict[int, list[str]] = {}
        for name, spec in bucket.items():
            candidate = (min(x for x in mla_pages if x >= spec.page_size_bytes) if pad
                         else spec.page_size_bytes)
            if candidate != spec.page_size_bytes:
                padded[name] = candidate
            by_page.setdefault(candidate, []).append(name)
        per_size = len(next(iter(by_page.values())))
        count = -(-per_size // chunk)
        pattern = list(zip(*by_page.values(), strict=False))
        for i in range(count):
            groups.append([name for repeat in pattern[i::count] for name in repeat])
    return groups, padded
