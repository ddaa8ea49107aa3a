"""``smoke --dry-run`` for the shard check: what each rank stores, reads and calls, and how
the parts are merged (pure: no torch, no GPU)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from selector.parallel.kernels import ADAPTERS
from selector.parallel.plan import ShardPlan
from selector.parallel.workload import shard_workload

__all__ = ["shard_dry_run"]


def _rank(plan: ShardPlan, rank: int, requests: Sequence[Any],
          workload: Any) -> dict[str, Any]:
    shard = plan.shard(rank)
    entry: dict[str, Any] = {"rank": rank, "own_q_heads": list(shard.q_heads),
                             "kv_heads": list(shard.kv_heads)}
    if not plan.uses_dcp:
        entry["kv_lens"] = [r.seq_len for r in requests]
        return entry
    sequence = plan.dcp_decode_kv == "sequence"
    entry["attends_with_q_heads"] = plan.group_q_heads()
    entry["kv_tokens_stored"] = [workload.local_len(r.seq_len, rank) for r in requests]
    entry["kv_lens_read"] = [workload.local_len(
        r.seq_len if sequence and r.query_len == 1 else r.context_len, rank) for r in requests]
    return entry


def shard_dry_run(plans: Sequence[ShardPlan], seed: int = 0) -> dict[str, Any]:
    """Per plan: the split, the batch, each rank's heads and KV lengths, the calls, the merge."""
    out = []
    for plan in plans:
        workload = shard_workload(plan.kernel_block_size, plan.decode_context_parallel_size,
                                  plan.cp_kv_cache_interleave_size, seed)
        requests = workload.requests
        calls = ADAPTERS[plan.backend].CALLS
        entry: dict[str, Any] = {
            "plan": plan.model_dump(mode="json", exclude_defaults=True,
                                    exclude={"kernel_calls"}),  # a path of this machine
            "split": plan.describe(),
            "batch": [{"id": r.id, "context_len": r.context_len, "query_len": r.query_len,
                       "block_ids": list(r.block_ids)} for r in requests],
            "ranks": [_rank(plan, rank, requests, workload)
                      for rank in range(plan.world_size)],
        }
        if plan.uses_dcp:
            entry["calls"] = {"context": calls["paged"].replace("<causal>", "False"),
                              "new_tokens": calls["ragged"]}
            entry["merge"] = {
                "lse_base": plan.lse_base, "dcp_decode_kv": plan.dcp_decode_kv,
                "combine": "all-gather LSEs, rescale each rank's output by "
                           f"{'exp' if plan.lse_base == 'e' else 'exp2'}(lse_r - lse), "
                           "reduce-scatter over heads (cp_lse_ag_out_rs)",
                "second_pass": "merge_attn_states with the new tokens' pass (natural log)"}
        else:
            entry["calls"] = {"heads": calls["paged"].replace("<causal>", "True")}
        out.append(entry)
    return {"shards": out}
