"""One rank of a process-per-rank shard check (``python -m selector.parallel.worker``).

Started by :func:`selector.parallel.distributed.run_distributed`, one process per rank,
joined with ``torch.distributed`` (NCCL on GPUs, one GPU per rank; gloo on the CPU).
Each rank builds the whole-model data from the seed, keeps its shard, runs its kernels
and then talks to the others as vLLM does:

* DCP: all-gather the LSEs, rescale its own partial output (``correct_partial``), then
  reduce-scatter the outputs over heads (``cp_lse_ag_out_rs``; gloo has no
  reduce-scatter, so there it all-reduces and keeps its heads, ``cp_lse_ag_out_ar``),
  and merge with its new tokens' pass;
* TP: nothing to combine (each rank's heads are final).

Then every rank's final heads are gathered to rank 0, which compares them with the
reference and writes the report (JSON) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TypeAlias

from selector.parallel.lse import LseBase, correct_partial
from selector.parallel.plan import ShardOptions, ShardPlan
from selector.parallel.ranks import RankWork
from selector.parallel.report import RankResult, ShardPlanReport, ShardReport
from selector.parallel.simulate import PlanSetup, heads_label, time_call

__all__ = ["main"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any


def _combine(torch: Torch, dist: Any, work: RankWork, out: Tensor, lse: Tensor,
             base: LseBase, gloo: bool) -> tuple[Tensor, Tensor]:
    """vLLM's DCP combine across the process group: this rank's heads and their LSE."""
    world = dist.get_world_size()
    gathered = [torch.empty_like(lse) for _ in range(world)]
    dist.all_gather(gathered, lse.contiguous())
    lses = torch.stack(gathered)
    scaled, combined = correct_partial(torch, out, lses, work.rank, base)
    width = len(work.own_q_heads)
    if gloo:
        dist.all_reduce(scaled)
        mine = scaled[:, work.rank * width:(work.rank + 1) * width]
    else:
        chunks = [scaled[:, r * width:(r + 1) * width].contiguous() for r in range(world)]
        mine = torch.empty_like(chunks[work.rank])
        dist.reduce_scatter(mine, chunks)
    return mine, combined[:, work.rank * width:(work.rank + 1) * width]


def _sync(torch: Torch, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _run_plan(torch: Torch, dist: Any, plan: ShardPlan, options: ShardOptions, rank: int,
              device: Any, gloo: bool) -> ShardPlanReport | None:
    world = dist.get_world_size()
    setup = PlanSetup(torch, plan, options, device)
    work = RankWork(torch, plan, setup.workload, setup.data, setup.kernel, rank, device)
    collective_us = None
    if plan.uses_dcp:
        out, lse = work.context_call()
        kernel_us = time_call(torch, device, work.context_call, options.repeats)
        mine, mine_lse = _combine(torch, dist, work, out, lse, setup.merge_base, gloo)
        collective_us = time_call(
            torch, device, lambda: _combine(torch, dist, work, out, lse, setup.merge_base,
                                            gloo), options.repeats)
        final = work.finish(mine, mine_lse, setup.merge_base, own_heads_only=True)
    else:
        final, _ = work.tp_call()
        kernel_us = time_call(torch, device, work.tp_call, options.repeats)
    final = final.float().contiguous()
    pieces = [torch.empty_like(final) for _ in range(world)]
    dist.all_gather(pieces, final)
    _sync(torch, device)
    # (all_gather_object would need numpy: a small float tensor carries the figures)
    figures = torch.tensor([kernel_us, float(work.kv_tokens)], dtype=torch.float64,
                           device=device)
    gathered = [torch.empty_like(figures) for _ in range(world)]
    dist.all_gather(gathered, figures)
    if rank != 0:
        return None
    report = setup.report(processes=world)
    for other, values in enumerate(gathered):
        shard = plan.shard(other)
        report.ranks.append(RankResult(other, heads_label(shard.q_heads),
                                       heads_label(shard.kv_heads),
                                       int(values[1].item()), float(values[0].item())))
    report.collective_us = collective_us
    name = ("ranks' partial outputs combined over the process group vs whole-cache reference"
            if plan.uses_dcp else "ranks' head shards gathered vs reference")
    report.checks.append(setup.compare(torch.cat(pieces, dim=1), name))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m selector.parallel.worker")
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--rank", required=True, type=int)
    parser.add_argument("--world", required=True, type=int)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    spec = json.loads(args.spec.read_text(encoding="utf-8"))
    plans = [ShardPlan.model_validate(p) for p in spec["plans"]]
    options = ShardOptions.model_validate(spec["options"])
    import torch
    import torch.distributed as dist

    gloo = options.kernels == "torch" and (options.device or "cpu") == "cpu"
    if gloo:
        device = torch.device("cpu")
    else:
        torch.cuda.set_device(args.rank)
        device = torch.device("cuda", args.rank)
    options = options.model_copy(update={"device": str(device)})
    dist.init_process_group("gloo" if gloo else "nccl", rank=args.rank,
                            world_size=args.world,
                            init_method=f"tcp://127.0.0.1:{args.port}")
    try:
        report = ShardReport(
            device=torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
            processes=args.world)
        for plan in plans:
            plan_report = _run_plan(torch, dist, plan, options, args.rank, device, gloo)
            if plan_report is not None:
                report.plans.append(plan_report)
        if args.rank == 0:
            args.out.write_text(json.dumps(report.to_json()), encoding="utf-8")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
