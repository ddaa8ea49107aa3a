"""The batch a shard check runs, and where each token lands on each rank (pure Python).

Requests come decodes first (vLLM's order for FlashInfer and for DCP,
``reorder_batch_threshold`` 1) and are chosen to hit the edges of the DCP split: a
decode whose context leaves some ranks empty, one that fills a virtual block exactly,
one that ends inside an interleave chunk, a long one spanning several virtual blocks,
and an extend (several new tokens) that needs the context + new-token merge.

Pages: every rank uses the request's block table; entry ``j`` is the physical page of
virtual block ``j`` (``block_size * dcp`` tokens, ``block_size`` of them on each rank),
so a request needs ``ceil(seq_len / (block_size * dcp))`` pages. Page 0 is never used
(vLLM's null block) and pages are shuffled, so tables are non-contiguous.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from selector.parallel.sharding import dcp_local_seq_len, dcp_owner

__all__ = ["ShardRequest", "ShardWorkload", "dcp_slot", "shard_workload"]


@dataclass(frozen=True)
class ShardRequest:
    id: str
    context_len: int
    query_len: int
    block_ids: tuple[int, ...]

    @property
    def seq_len(self) -> int:
        return self.context_len + self.query_len


@dataclass(frozen=True)
class ShardWorkload:
    block_size: int
    dcp_size: int
    interleave: int
    requests: tuple[ShardRequest, ...]
    num_pages: int

    @property
    def cu_seqlens_q(self) -> list[int]:
        starts = [0]
        for request in self.requests:
            starts.append(starts[-1] + request.query_len)
        return starts

    @property
    def num_tokens(self) -> int:
        return self.cu_seqlens_q[-1]

    def local_len(self, length: int, rank: int) -> int:
        return dcp_local_seq_len(length, self.dcp_size, rank, self.interleave)

    def describe(self) -> str:
        parts = ", ".join(f"{r.id} {r.context_len}+{r.query_len}" for r in self.requests)
        return f"{len(self.requests)} requests [{parts}] (cached+new)"


def dcp_slot(position: int, block_ids: tuple[int, ...], block_size: int, dcp_size: int,
             rank: int, interleave: int) -> int | None:
    """The cache slot of token ``position`` on ``rank``, or None when another rank owns
    it: ``ComputeSlotMappingKernel.kernel`` (vllm/v1/worker/block_table.py:351-373)."""
    virtual_block = block_size * dcp_size
    index, offset = divmod(position, virtual_block)
    if dcp_owner(offset, dcp_size, interleave) != rank:
        return None
    local = (offset // (dcp_size * interleave)) * interleave + offset % interleave
    return block_ids[index] * block_size + local


def shard_workload(block_size: int, dcp_size: int = 1, interleave: int = 1,
                   seed: int = 0) -> ShardWorkload:
    """Decodes first, then one extend; lengths relative to the virtual block."""
    virtual = block_size * dcp_size
    chunk = dcp_size * interleave
    shapes = [
        ("decode-short", 1, 1),
        ("decode-full-virtual-block", virtual - 1, 1),
        ("decode-mid-chunk", 2 * chunk + max(interleave - 1, 1), 1),
        ("decode-long", 3 * virtual + block_size // 2 + 1, 1),
        ("extend", virtual + 3, 5),
    ]
    rng = random.Random(seed)
    counts = [-(-(context + query) // virtual) for _, context, query in shapes]
    num_pages = 2 * sum(counts) + 1
    pool = list(range(1, num_pages))
    rng.shuffle(pool)
    requests = []
    cursor = 0
    for (name, context, query), count in zip(shapes, counts, strict=True):
        requests.append(ShardRequest(name, context, query, tuple(pool[cursor:cursor + count])))
        cursor += count
    return ShardWorkload(block_size, dcp_size, interleave, tuple(requests), num_pages)
