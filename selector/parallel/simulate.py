"""``run_shard_check``: every rank's share in turn on one device, merged, against the
whole-cache reference.

* DCP N: DCP group 0 (TP ranks 0 .. N-1). Each rank holds its interleaved token share
  and attends with the group's gathered query heads; the partial outputs are combined
  with the LSE base the backend's data declares (vLLM's all-gather + correction +
  reduce), then merged with the new tokens' pass where the backend makes one; the
  result is compared with the reference's heads of that group.
* TP N (no DCP): each rank's head shard (KV heads replicated when N exceeds them) over
  the whole cache; the ranks' outputs side by side are compared with the all-heads
  reference.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from selector.errors import CannotRunHereError
from selector.parallel.kernels import LseAttention, load_lse_attention
from selector.parallel.lse import LseBase, correct_partial
from selector.parallel.plan import ShardOptions, ShardPlan
from selector.parallel.ranks import ModelData, RankWork, make_model_data, reference_output
from selector.parallel.report import RankResult, ShardCheck, ShardPlanReport, ShardReport
from selector.parallel.workload import ShardWorkload, shard_workload
from selector.smoke.reference import compare, tolerance_for

__all__ = ["PlanSetup", "heads_label", "import_torch", "merge_base", "run_shard_check",
           "time_call"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any
Progress = Callable[[str], None]


def import_torch(options: ShardOptions) -> tuple[Torch, Any]:
    """torch and the device the check runs on; CannotRunHereError when unusable."""
    try:
        torch = importlib.import_module("torch")
    except ImportError as error:
        raise CannotRunHereError(f"the shard check needs PyTorch ({error})") from None
    name = options.device or ("cpu" if options.kernels == "torch" else "cuda")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise CannotRunHereError(
            f"the shard check with the real kernels needs a CUDA GPU; torch "
            f"{torch.__version__} sees none (the torch stand-in runs on the CPU: "
            "--kernels torch)")
    return torch, torch.device(name)


def merge_base(plan: ShardPlan, options: ShardOptions) -> LseBase:
    """The base the merge reads the LSEs in: the backend data's unless a mix-up is asked."""
    chosen = options.merge_lse_base
    if chosen is None:
        return plan.lse_base
    if chosen == "swapped":
        return "2" if plan.lse_base == "e" else "e"
    return chosen


def time_call(torch: Torch, device: Any, call: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``call`` in microseconds (synchronising a GPU)."""
    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - start) * 1e6)
    times.sort()
    return times[len(times) // 2]


def heads_label(values: Sequence[int]) -> str:
    return f"{values[0]}-{values[-1]}" if len(values) > 1 else str(values[0])


class PlanSetup:
    """What every rank of one plan shares: the kernels, the batch, the data, the reference."""

    def __init__(self, torch: Torch, plan: ShardPlan, options: ShardOptions,
                 device: Any) -> None:
        self.torch, self.plan, self.options, self.device = torch, plan, options, device
        if plan.uses_dcp and plan.sliding_window is not None:
            raise CannotRunHereError(
                f"plan '{plan.name}': DCP with a sliding window is not shard-checked yet")
        self.kernel: LseAttention = load_lse_attention(
            torch, plan.backend, device, kernels=options.kernels, lse_base=plan.lse_base,
            kv_layout=plan.kv_layout, dtype=plan.dtype)
        self.merge_base: LseBase = merge_base(plan, options)
        self.workload: ShardWorkload = shard_workload(
            plan.kernel_block_size, plan.decode_context_parallel_size,
            plan.cp_kv_cache_interleave_size, options.seed)
        self.data: ModelData = make_model_data(torch, plan, self.workload, options.seed,
                                               device)
        self.reference = reference_output(torch, plan, self.workload, self.data)

    def report(self, processes: int) -> ShardPlanReport:
        plan = self.plan
        report = ShardPlanReport(plan.name, plan.backend, plan.describe(), self.kernel.label,
                                 self.workload.describe(), self.merge_base)
        kernel_base = getattr(self.kernel, "lse_base", None)
        if plan.uses_dcp and kernel_base != plan.lse_base:
            report.notes.append(f"the kernels return LSE base {kernel_base}, the backend "
                                f"data says {plan.lse_base}")
        if self.merge_base != plan.lse_base:
            report.notes.append(f"merging in base {self.merge_base} on purpose; the backend "
                                f"data says {plan.lse_base} (this check must FAIL)")
        if processes == 1 and plan.uses_dcp:
            report.notes.append("the all-gather and reduce ran as tensor operations on "
                                "one device (no collective)")
        return report

    def expected(self) -> Tensor:
        """The reference for what the check compares (DCP: group 0's heads)."""
        if not self.plan.uses_dcp:
            return self.reference
        index = self.torch.tensor(self.plan.group_q_heads(), device=self.device,
                                  dtype=self.torch.long)
        return self.reference[:, index]

    def rank_result(self, work: RankWork, kernel_us: float) -> RankResult:
        return RankResult(work.rank, heads_label(work.own_q_heads), heads_label(work.kv_heads),
                          work.kv_tokens, kernel_us)

    def compare(self, output: Tensor, name: str) -> ShardCheck:
        atol, rtol = tolerance_for(self.plan.dtype)
        result = compare(self.torch, output, self.expected(), atol=atol, rtol=rtol)
        detail = "" if result.passed else \
            f"worst token row {result.worst_token}, {result.nan_count} non-finite"
        return ShardCheck(name, result.passed, detail, result.max_abs)


def _run_plan(torch: Torch, plan: ShardPlan, options: ShardOptions, device: Any,
              progress: Progress) -> ShardPlanReport:
    progress(f"{plan.name}: preparing {plan.world_size} rank caches")
    setup = PlanSetup(torch, plan, options, device)
    report = setup.report(processes=1)
    works = [RankWork(torch, plan, setup.workload, setup.data, setup.kernel, rank, device)
             for rank in range(plan.world_size)]
    progress(f"{plan.name}: running {plan.world_size} ranks with {setup.kernel.label}")
    if not plan.uses_dcp:
        outputs = []
        for work in works:
            out, _ = work.tp_call()
            outputs.append(out)
            report.ranks.append(setup.rank_result(
                work, time_call(torch, device, work.tp_call, options.repeats)))
        report.checks.append(setup.compare(torch.cat(outputs, dim=1),
                                           "ranks' head shards side by side vs reference"))
        return report
    parts = []
    for work in works:
        parts.append(work.context_call())
        report.ranks.append(setup.rank_result(
            work, time_call(torch, device, work.context_call, options.repeats)))
    lses = torch.stack([lse for _, lse in parts])
    context = None
    lse = None
    for rank, (out, _) in enumerate(parts):
        scaled, lse = correct_partial(torch, out, lses, rank, setup.merge_base)
        context = scaled if context is None else context + scaled
    assert context is not None and lse is not None
    finals = [work.finish(context, lse, setup.merge_base) for work in works]
    report.checks.append(setup.compare(
        torch.cat(finals, dim=1),
        f"{plan.world_size} ranks' partial outputs merged by LSE vs whole-cache reference"))
    return report


def run_shard_check(plans: Sequence[ShardPlan], options: ShardOptions | None = None, *,
                    progress: Progress | None = None) -> ShardReport:
    """Run each plan's ranks in turn on one device; the report says PASS or FAIL per plan.

    Raises :class:`CannotRunHereError` (exit 4) when torch, the device or a kernel
    library is missing.
    """
    options = options or ShardOptions()
    notify = progress or (lambda _: None)
    torch, device = import_torch(options)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    report = ShardReport(device=name, processes=1)
    for plan in plans:
        try:
            report.plans.append(_run_plan(torch, plan, options, device, notify))
        except CannotRunHereError:
            raise
        except Exception as error:
            failed = ShardPlanReport(plan.name, plan.backend, plan.describe(), "-", "-",
                                     merge_base(plan, options))
            failed.checks.append(ShardCheck("kernel call", False,
                                            f"{type(error).__name__}: {error}"[:400]))
            report.plans.append(failed)
    return report
