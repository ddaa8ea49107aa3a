"""The batches a smoke run feeds the kernels (pure Python, deterministic per seed).

* :func:`mixed_batch` -- one step holding two decodes (one ending on a full page), a
  fresh multi-page prefill and an extend that crosses a page boundary, scheduled in a
  prefill-first order so FlashInfer's decode-first reorder is a real permutation;
* :func:`decode_batch` -- decodes only, for CUDA-graph capture and replay;
* :func:`uniform_decode_batch` -- the bandwidth benchmark's batch.

Physical pages are drawn at random from a pool without page 0 (vLLM's null block,
the block-table padding), so they are non-contiguous and interleaved across requests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from selector.smoke.batch import BatchRequest, BatchSpec, pages_needed
from selector.smoke.plan import SmokePlan

__all__ = [
    "MAX_SPLITS",
    "Workload",
    "assign_pages",
    "decode_batch",
    "long_context_for",
    "mixed_batch",
    "mla_decode_batch",
    "uniform_decode_batch",
]


@dataclass(frozen=True)
class Workload:
    """A batch and the size of the page pool it was drawn from (page 0 included)."""

    batch: BatchSpec
    num_pages: int


def assign_pages(shapes: list[tuple[str, int, int]], block_size: int, rng: random.Random,
                  *, spare_factor: int = 2, capacity_tokens: int | None = None) -> Workload:
    """Give each (id, context_len, query_len) random distinct pages from a shuffled pool."""
    counts = [pages_needed(capacity_tokens or (context + query), block_size)
              for _, context, query in shapes]
    num_pages = spare_factor * sum(counts) + 1
    pool = list(range(1, num_pages))
    rng.shuffle(pool)
    requests: list[BatchRequest] = []
    cursor = 0
    for (request_id, context, query), count in zip(shapes, counts, strict=True):
        needed = pages_needed(context + query, block_size)
        requests.append(BatchRequest(id=request_id, context_len=context, query_len=query,
                                     block_ids=pool[cursor:cursor + needed]))
        cursor += count
    return Workload(BatchSpec(block_size=block_size, requests=requests), num_pages)


MAX_SPLITS = 32
"""Split-KV parts a kernel may use (vLLM's flash_attn_max_num_splits_for_cuda_graph)."""


def long_context_for(plan: SmokePlan) -> int:
    """A context long enough to see window and split bugs: longer than the sliding window
    (by two pages and a few tokens) and than 2 x page x the most splits."""
    block = plan.kernel_block_size
    window = plan.sliding_window or 0
    return max(2 * block * MAX_SPLITS, window) + 2 * block + 5


def mixed_batch(block_size: int, seed: int, *, long_context: int | None = None) -> Workload:
    """Prefill, full-page decode, page-crossing extend, partial-page decode (in that order);
    with ``long_context``, also a long decode and a long extend whose contexts exceed it."""
    size = block_size
    shapes = [
        ("prefill", 0, min(size + size // 2 + 3, 160)),
        ("decode-full-page", 4 * size - 1, 1),
        ("extend", size + size // 2, size // 2 + 3 + min(size, 64)),
        ("decode", 2 * size + min(4, size - 1), 1),
    ]
    if long_context is not None:
        shapes += [("long-decode", long_context, 1),
                   ("long-extend", long_context + size // 2 + 1, 37)]
    return assign_pages(shapes, block_size, random.Random(seed))


def mla_decode_batch(block_size: int, seed: int, long_context: int) -> Workload:
    """MLA decodes: short, page-aligned, partial-page and long contexts, random pages."""
    rng = random.Random(seed)
    contexts = [0, block_size - 1, 3 * block_size + 7, long_context, long_context // 2 + 3,
                rng.randint(1, long_context)]
    shapes = [(f"d{index}", context, 1) for index, context in enumerate(contexts)]
    return assign_pages(shapes, block_size, rng)


def decode_batch(block_size: int, seed: int, *, num_requests: int = 8,
                 max_context: int | None = None) -> Workload:
    """Decodes with random context lengths up to ``max_context`` (default 6 pages)."""
    rng = random.Random(seed)
    limit = max_context or 6 * block_size
    shapes = [(f"d{index}", rng.randint(0, limit - 1), 1) for index in range(num_requests)]
    # every request reserves room for the longest context, so the pool size (and with it
    # the KV-cache allocation a captured graph reads) is the same for every seed
    return assign_pages(shapes, block_size, rng, capacity_tokens=limit)


def uniform_decode_batch(block_size: int, num_requests: int, context_len: int,
                         seed: int = 0) -> Workload:
    """``num_requests`` decodes, each with ``context_len`` cached tokens (a benchmark batch)."""
    shapes = [(f"d{index}", context_len - 1, 1) for index in range(num_requests)]
    return assign_pages(shapes, block_size, random.Random(seed), spare_factor=1)


def graph_capacity_pages(block_size: int, max_context: int | None = None) -> int:
    """Pages per request a decode graph's page-table buffer must hold."""
    return pages_needed(max_context or 6 * block_size, block_size)
