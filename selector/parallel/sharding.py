"""How vLLM 0.33.0 splits attention across ranks: KV tokens over DCP ranks, heads over TP.

Pure Python (no torch); every rule cites the vLLM source it restates.

* **Decode context parallelism (DCP).** Token ``p`` of a request is stored on DCP rank
  ``(p // I) % N`` at rank-local position ``(p // (N * I)) * I + p % I`` (``N`` the DCP
  size, ``I`` ``cp_kv_cache_interleave_size``): ``ComputeSlotMappingKernel.kernel`` in
  ``vllm/v1/worker/block_table.py:351-373`` (a virtual block of ``block_size * N``
  tokens; rank-local offsets inside it). Every rank uses the same block table: the
  physical page ids of the request's virtual blocks, each page holding that rank's
  ``block_size`` tokens of the virtual block. The number of tokens rank ``r`` holds
  is ``get_dcp_local_seq_lens`` (``vllm/v1/attention/backends/utils.py:1166-1211``).
* **DCP groups** are consecutive tensor-parallel ranks (``vllm/distributed/
  parallel_state.py:2248-2257``: ``all_ranks.transpose(-1, -2).reshape(-1, dcp)``,
  PCP 1); the query heads of a group are all-gathered before attention
  (``flash_attn.py:1516`` ``get_dcp_group().all_gather(query, dim=1)``;
  ``flashinfer.py:2608``), so each rank attends with ``dcp * heads_per_rank`` heads.
* **Tensor parallelism (TP).** Rank ``r`` holds query heads ``[r*H/T, (r+1)*H/T)``; with
  ``T > KV`` each KV head is replicated on ``T / KV`` consecutive ranks and rank ``r``
  holds KV head ``r // (T / KV)`` (``QKVParallelLinear``:
  ``vllm/model_executor/layers/linear.py:1065-1071`` and ``:1316``).
* **vLLM's own limits on DCP for GQA** (``vllm/config/model.py:1578-1606``,
  ``vllm/config/parallel.py:596-600``) are :func:`selector.memory.dcp.dcp_refusals`, the
  predicate ``check`` reports them with (a start-up refusal, in each release's words).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "HeadShard",
    "dcp_block_size_problem",
    "dcp_group_ranks",
    "dcp_local_position",
    "dcp_local_seq_len",
    "dcp_owner",
    "dcp_rank_positions",
    "head_shard",
]


def dcp_owner(position: int, dcp_size: int, interleave: int = 1) -> int:
    """The DCP rank that stores token ``position`` (block_table.py:357-362)."""
    return (position // interleave) % dcp_size


def dcp_local_position(position: int, dcp_size: int, interleave: int = 1) -> int:
    """Where token ``position`` sits in its owner's share of the request (block_table.py:
    363-367, with the virtual block folded in: pages are ``block_size`` local tokens)."""
    return (position // (dcp_size * interleave)) * interleave + position % interleave


def dcp_local_seq_len(seq_len: int, dcp_size: int, rank: int, interleave: int = 1) -> int:
    """Tokens of a ``seq_len``-token request stored on ``rank``: vLLM's
    ``get_dcp_local_seq_lens`` (backends/utils.py:1198-1211) for one request."""
    base = seq_len // interleave // dcp_size * interleave
    remainder = seq_len - base * dcp_size
    return base + min(max(remainder - rank * interleave, 0), interleave)


def dcp_rank_positions(seq_len: int, dcp_size: int, rank: int, interleave: int = 1
                       ) -> list[int]:
    """The global positions ``rank`` stores, in rank-local order."""
    return [p for p in range(seq_len) if dcp_owner(p, dcp_size, interleave) == rank]


def dcp_group_ranks(tp_size: int, dcp_size: int) -> list[list[int]]:
    """TP ranks of each DCP group (parallel_state.py:2248-2257, PCP 1): consecutive."""
    return [list(range(start, start + dcp_size)) for start in range(0, tp_size, dcp_size)]


@dataclass(frozen=True)
class HeadShard:
    """The heads one tensor-parallel rank holds (global head indices)."""

    rank: int
    q_heads: tuple[int, ...]
    kv_heads: tuple[int, ...]
    kv_replicas: int
    """How many ranks hold each of this rank's KV heads (1 without replication)."""


def head_shard(rank: int, tp_size: int, num_heads: int, num_kv_heads: int) -> HeadShard:
    """Rank ``rank``'s query and KV heads (linear.py:1065-1071, 1316)."""
    q_per_rank = num_heads // tp_size
    q_heads = tuple(range(rank * q_per_rank, (rank + 1) * q_per_rank))
    if tp_size >= num_kv_heads:
        replicas = tp_size // num_kv_heads
        return HeadShard(rank, q_heads, (rank // replicas,), replicas)
    kv_per_rank = num_kv_heads // tp_size
    return HeadShard(rank, q_heads,
                     tuple(range(rank * kv_per_rank, (rank + 1) * kv_per_rank)), 1)


def dcp_block_size_problem(*, dcp_size: int, block_size: int, interleave: int = 1) -> str | None:
    """vLLM's start-up error for a block size the DCP interleave does not tile, in vLLM's
    words (None: accepted); vllm/config/vllm.py:3404-3412 (VllmConfig.validate_block_size)."""
    if dcp_size > 1 and (interleave > block_size or block_size % interleave):
        return (f"Block_size({block_size}) should be greater than or equal to and "
                f"divisible by cp_kv_cache_interleave_size ({interleave}).")
    return None
