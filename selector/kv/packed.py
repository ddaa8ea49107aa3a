"""The block-outermost layout's packed grouping (``_get_packed_kv_cache_groups``,
vllm/v1/core/kv_cache_planning.py:914-1041 in 0.33.0), for every spec kind: greedy
buckets of one uniform type, balanced buckets (one layer of each page size per repeat)
split into groups of the same number of repeats, and the state buckets (Mamba, circular
buffers, sliding windows when nothing repeats) split so a group fits the block the
other buckets already need. Each group is a ``UniformTypeKVCacheSpecs``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from selector.kv.merge import is_uniform_type
from selector.kv.specs import AnySpec, CircularBufferSpec, MambaSpec, SlidingWindowSpec

__all__ = ["approximate_gcd", "max_layers_per_page", "packed_layer_groups"]


def approximate_gcd(values: Sequence[int], lower_bound: int) -> int:
    """``_approximate_gcd`` (kv_cache_planning.py:879-912): the d in [lower_bound,
    max(values)] with the least total upward padding, ties to the larger."""
    low = max(1, lower_bound)
    high = max(values)
    if low > high:
        return low
    best, best_pad = low, None
    for d in range(low, high + 1):
        pad = sum(-(-x // d) * d - x for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


def _buckets(specs: Mapping[str, AnySpec]) -> list[dict[str, AnySpec]]:
    """Each layer joins the first bucket it stays uniform-typed with (kv_cache_planning.py
    :934-942)."""
    buckets: list[dict[str, AnySpec]] = []
    for name, spec in specs.items():
        for bucket in buckets:
            if is_uniform_type([*bucket.values(), spec]):
                bucket[name] = spec
                break
        else:
            buckets.append({name: spec})
    return buckets


def max_layers_per_page(bucket: Mapping[str, AnySpec]) -> int:
    """``UniformTypeKVCacheSpecs.getmax_layers_per_page_size``."""
    return Counter(s.page_size_bytes for s in bucket.values()).most_common(1)[0][1]


def _by_page(bucket: Mapping[str, AnySpec]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for name, spec in bucket.items():
        out.setdefault(spec.page_size_bytes, []).append(name)
    return out


def packed_layer_groups(specs: Mapping[str, AnySpec]) -> list[list[str]] | None:
    """The layer names of each packed group, in vLLM's order; None when every layer has
    one page size (vLLM then returns no packed groups)."""
    if len({s.page_size_bytes for s in specs.values()}) <= 1:
        return None
    rows = []
    for bucket in _buckets(specs):
        by_page = _by_page(bucket)
        rows.append((bucket, by_page, len({len(n) for n in by_page.values()}) == 1))
    floor = max((max_layers_per_page(b) for b, pages, balanced in rows
                 if balanced and len(pages) > 1), default=0)
    repeats = (approximate_gcd([max_layers_per_page(b) for b, _, balanced in rows if balanced],
                               floor) if floor else None)

    def groups_for(bucket: Mapping[str, AnySpec], balanced: bool) -> int:
        if balanced and repeats is not None:
            return -(-max_layers_per_page(bucket) // repeats)
        return 1

    def is_state(bucket: Mapping[str, AnySpec]) -> bool:
        first = next(iter(bucket.values()))
        if isinstance(first, MambaSpec | CircularBufferSpec):
            return True
        return repeats is None and isinstance(first, SlidingWindowSpec)

    def widest(pages: Mapping[int, list[str]], n: int) -> int:
        return sum(-(-len(names) // n) * page for page, names in pages.items())

    anchor = max((widest(pages, len(b) if is_state(b) else groups_for(b, balanced))
                  for b, pages, balanced in rows), default=0)
    out: list[list[str]] = []
    for bucket, pages, balanced in rows:
        count = groups_for(bucket, balanced)
        if anchor and is_state(bucket):  # a state group holds what a block already fits
            per_block = max(anchor // next(iter(bucket.values())).page_size_bytes, 1)
            count = max(count, -(-len(bucket) // per_block))
        if count == 1:
            out.append(list(bucket))
            continue
        pattern = list(zip(*pages.values(), strict=False))
        out.extend([name for repeat in pattern[i::count] for name in repeat] for i in range(count))
    return out
