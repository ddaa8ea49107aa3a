"""One rank's share of a shard check: its cache, its kernel calls, its part of the merge.

Used by the one-device run (every rank in turn) and by the one-process-per-rank run.
Every rank builds the same whole-model data from the seed (on the CPU, then moves it),
so no data has to be sent between processes; each keeps only its shard.

torch is passed in; this module never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from selector.parallel.kernels import LseAttention, PagedCall
from selector.parallel.lse import LseBase, merge_two, to_natural
from selector.parallel.plan import ShardPlan
from selector.parallel.workload import ShardWorkload, dcp_slot
from selector.smoke.batch import BatchRequest, BatchSpec
from selector.smoke.plan import SmokePlan
from selector.smoke.reference import reference_attention
from selector.smoke.tensors import PagedKvCache, RequestData, allocate_cache, torch_dtype

__all__ = ["ModelData", "RankWork", "make_model_data", "reference_output"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any

QUERY_SCALE = 2.0
"""Queries are drawn with this standard deviation so the softmax is peaked enough that the
ranks' LSEs differ: a merge in the wrong log base then moves the output well past the
tolerance (a flat softmax would let it through)."""


@dataclass
class ModelData:
    """Whole-model Q/K/V per request (all heads), on the check's device."""

    queries: list[Tensor]
    keys: list[Tensor]
    values: list[Tensor]


def make_model_data(torch: Torch, plan: ShardPlan, workload: ShardWorkload, seed: int,
                    device: Any) -> ModelData:
    generator = torch.Generator().manual_seed(seed)
    dtype = torch_dtype(torch, plan.dtype)

    def noise(*shape: int, scale: float = 1.0) -> Tensor:
        return (torch.randn(shape, generator=generator) * scale).to(dtype).to(device)

    data = ModelData([], [], [])
    for request in workload.requests:
        data.queries.append(noise(request.query_len, plan.num_heads, plan.head_size,
                                  scale=QUERY_SCALE))
        data.keys.append(noise(request.seq_len, plan.num_kv_heads, plan.head_size))
        data.values.append(noise(request.seq_len, plan.num_kv_heads, plan.head_size))
    return data


def reference_output(torch: Torch, plan: ShardPlan, workload: ShardWorkload,
                     data: ModelData) -> Tensor:
    """The float32 whole-cache, all-heads reference (the smoke's own reference code)."""
    batch = BatchSpec(block_size=workload.block_size, requests=[
        BatchRequest(id=r.id, context_len=r.context_len, query_len=r.query_len,
                     block_ids=list(range(1, -(-r.seq_len // workload.block_size) + 1)))
        for r in workload.requests])
    return reference_attention(
        torch, batch, RequestData(data.queries, data.keys, data.values),
        num_q_heads=plan.num_heads, num_kv_heads=plan.num_kv_heads,
        head_size=plan.head_size, sliding_window=plan.sliding_window,
        logits_soft_cap=plan.logits_soft_cap)


class RankWork:
    """Rank ``rank``'s cache and calls. Under DCP the rank serves DCP group 0's gathered
    query heads over its token share; without DCP its own TP head shard over every token."""

    def __init__(self, torch: Torch, plan: ShardPlan, workload: ShardWorkload,
                 data: ModelData, kernel: LseAttention, rank: int, device: Any) -> None:
        self.torch, self.plan, self.workload = torch, plan, workload
        self.kernel, self.rank, self.device = kernel, rank, device
        shard = plan.shard(rank)
        self.shard = shard
        self.own_q_heads = list(shard.q_heads)
        self.q_heads = plan.group_q_heads() if plan.uses_dcp else self.own_q_heads
        self.kv_heads = list(shard.kv_heads)
        q_index = torch.tensor(self.q_heads, device=device, dtype=torch.long)
        self.queries = torch.cat(data.queries)[:, q_index].contiguous()
        own = torch.tensor(self.own_q_heads, device=device, dtype=torch.long)
        self.own_queries = torch.cat(data.queries)[:, own].contiguous()
        kv_index = torch.tensor(self.kv_heads, device=device, dtype=torch.long)
        self.keys = [k[:, kv_index] for k in data.keys]
        self.values = [v[:, kv_index] for v in data.values]
        smoke_plan = SmokePlan(backend=plan.backend, engine=plan.engine,
                               kernel_calls=plan.kernel_calls,
                               kernel_block_size=plan.kernel_block_size,
                               kv_layout=plan.kv_layout, num_q_heads=len(self.q_heads),
                               num_kv_heads=len(self.kv_heads), head_size=plan.head_size,
                               dtype=plan.dtype)
        noise = torch.Generator(device=device).manual_seed(7919 + rank)
        self.cache: PagedKvCache = allocate_cache(torch, smoke_plan, workload.num_pages,
                                                  device, noise)
        self.kv_tokens = self._fill()

    def _fill(self) -> int:
        """Write every token this rank owns through its slot (vLLM's slot mapping)."""
        torch, workload = self.torch, self.workload
        slots, keys, values = [], [], []
        for request, k, v in zip(workload.requests, self.keys, self.values, strict=True):
            for position in range(request.seq_len):
                slot = dcp_slot(position, request.block_ids, workload.block_size,
                                workload.dcp_size, self.rank if self.plan.uses_dcp else 0,
                                workload.interleave)
                if slot is not None:
                    slots.append(slot)
                    keys.append(k[position])
                    values.append(v[position])
        if slots:
            self.cache.write(torch, torch.tensor(slots, device=self.device, dtype=torch.long),
                             torch.stack(keys), torch.stack(values))
        return len(slots)

    def _reads_sequence(self, query_len: int) -> bool:
        return self.plan.dcp_decode_kv == "sequence" and query_len == 1

    def needs_query_part(self) -> list[bool]:
        """Per request: does it attend to its new tokens in a second, causal pass (DCP)?"""
        return [not self._reads_sequence(r.query_len) for r in self.workload.requests]

    def _rank_local_table(self, length: int, request_index: int) -> list[int]:
        pages = -(-length // self.workload.block_size)
        return list(self.workload.requests[request_index].block_ids[:pages])

    def tp_call(self) -> tuple[Tensor, Tensor]:
        """Without DCP: the rank's heads, causal over the whole cache."""
        workload, plan = self.workload, self.plan
        lengths = [r.seq_len for r in workload.requests]
        call = PagedCall(workload.cu_seqlens_q, lengths,
                         [self._rank_local_table(n, i) for i, n in enumerate(lengths)],
                         workload.block_size, causal=True,
                         window_left=None if plan.sliding_window is None
                         else plan.sliding_window - 1,
                         softcap=plan.logits_soft_cap)
        return self.kernel.paged(self.queries, self.cache, call)

    def context_call(self) -> tuple[Tensor, Tensor]:
        """DCP: the gathered heads over this rank's token share, non-causal; rows of
        requests with no token here get LSE -inf (mask_dcp_empty_shards_)."""
        torch, workload = self.torch, self.workload
        lengths = [workload.local_len(r.seq_len if self._reads_sequence(r.query_len)
                                      else r.context_len, self.rank)
                   for r in workload.requests]
        call = PagedCall(workload.cu_seqlens_q, lengths,
                         [self._rank_local_table(n, i) for i, n in enumerate(lengths)],
                         workload.block_size, causal=False, softcap=self.plan.logits_soft_cap)
        out, lse = self.kernel.paged(self.queries, self.cache, call)
        starts = workload.cu_seqlens_q
        empty = torch.zeros(workload.num_tokens, dtype=torch.bool, device=self.device)
        for index, length in enumerate(lengths):
            if length == 0:
                empty[starts[index]:starts[index + 1]] = True
        lse = lse.float().masked_fill(empty[:, None], float("-inf"))
        return out, lse

    def query_call(self) -> tuple[Tensor, Tensor]:
        """DCP: this rank's own heads, the new tokens attending to themselves (causal)."""
        torch, workload = self.torch, self.workload
        keys = torch.cat([k[r.context_len:] for r, k in zip(workload.requests, self.keys,
                                                             strict=True)])
        values = torch.cat([v[r.context_len:] for r, v in zip(workload.requests,
                                                               self.values, strict=True)])
        return self.kernel.ragged(self.own_queries, keys, values, workload.cu_seqlens_q,
                                  softcap=self.plan.logits_soft_cap)

    def own_rows(self, context: Tensor) -> Tensor:
        """This rank's heads of a tensor over DCP group 0's gathered heads."""
        local = self.rank * len(self.own_q_heads)
        return context[:, local:local + len(self.own_q_heads)]

    def finish(self, context_out: Tensor, context_lse: Tensor, base: LseBase, *,
               own_heads_only: bool = False) -> Tensor:
        """DCP: merge this rank's heads of the combined context part with its new-token
        part (natural log, merge_attn_states) where the backend makes that second pass.
        ``context_*`` cover the group's gathered heads, or this rank's own heads only
        (after a reduce-scatter) with ``own_heads_only``."""
        torch = self.torch
        if not own_heads_only:
            context_out, context_lse = self.own_rows(context_out), self.own_rows(context_lse)
        out = context_out.float()
        lse = to_natural(context_lse, base)
        needs = self.needs_query_part()
        if not any(needs):
            return out
        query_out, query_lse = self.query_call()
        merged = merge_two(torch, out, lse, query_out, to_natural(query_lse.float(), base))
        rows = torch.zeros(self.workload.num_tokens, dtype=torch.bool, device=self.device)
        starts = self.workload.cu_seqlens_q
        for index, need in enumerate(needs):
            if need:
                rows[starts[index]:starts[index + 1]] = True
        return torch.where(rows[:, None, None], merged, out)

