"""``run_smoke``: run each plan's real kernels on a paged KV cache and prove the outputs.

Per plan (attention group): build a mixed batch, allocate one paged cache per layer in
the plan's layout and kernel block size, write K/V through ``slot_mapping``, check the
invariants on what the kernel will read, run the kernel for every layer (FlashInfer is
planned once), compare with a float32 reference, compare with earlier plans of the same
shape (parity), replay the decode path from a CUDA graph when the plan's mode captures
full graphs, and time the kernels.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from selector.errors import CannotRunHereError
from selector.smoke.batch import BatchSpec
from selector.smoke.environment import (
    FlashAttentionImpl,
    find_flash_attention,
    import_flashinfer,
    import_torch_cuda,
    package_version,
)
from selector.smoke.graphs import check_decode_graph
from selector.smoke.invariants import (
    LayerBinding,
    MetadataIdentity,
    Violation,
    check_bindings,
    check_length_views,
    check_metadata,
)
from selector.smoke.metrics import attention_flops, kv_read_bytes
from selector.smoke.plan import SmokeOptions, SmokePlan
from selector.smoke.reference import compare, reference_attention, tolerance_for
from selector.smoke.report import (
    CheckResult,
    GroupReport,
    SmokeChecksFailed,
    SmokeReport,
    TimingResult,
)
from selector.smoke.steps import (
    FlashAttentionStep,
    FlashInferStep,
    FlashInferWrappers,
    TimedLaunch,
)
from selector.smoke.tensors import PagedKvCache, allocate_cache, fill_cache, make_request_data
from selector.smoke.timing import time_kernel
from selector.smoke.workload import mixed_batch

__all__ = ["Progress", "run_smoke"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any
Progress = Callable[[str], None]
"""Receives a short description of the stage the run has reached (e.g. a JIT compile)."""


@dataclass
class _Libraries:
    flash_attention: FlashAttentionImpl | None = None
    flash_attention_notes: list[str] = field(default_factory=list)
    flashinfer: Any = None


def _load_libraries(plans: Sequence[SmokePlan], options: SmokeOptions,
                    notify: Progress) -> _Libraries:
    """Import what the plans need, up front, so a missing library fails before any work."""
    libraries = _Libraries()
    for plan in plans:
        if plan.kv_cache_dtype not in ("auto", plan.dtype):
            raise CannotRunHereError(
                f"plan '{plan.name}': the smoke check runs KV caches in the model dtype only; "
                f"kv_cache_dtype '{plan.kv_cache_dtype}' is not smoke-tested yet")
    fa_plans = [plan for plan in plans if plan.backend == "FLASH_ATTN"]
    if fa_plans:
        if options.persistent_kernel_cache:
            os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")
        requested = fa_plans[0].fa_version
        notify("importing FlashAttention")
        libraries.flash_attention, libraries.flash_attention_notes = find_flash_attention(
            requested, strict=options.strict_fa_version)
        for plan in fa_plans:
            multiple = libraries.flash_attention.min_block_multiple
            if plan.kernel_block_size % multiple:
                raise CannotRunHereError(
                    f"plan '{plan.name}': {libraries.flash_attention.label} needs a page size "
                    f"that is a multiple of {multiple}, the plan has {plan.kernel_block_size}")
    if any(plan.backend == "FLASHINFER" for plan in plans):
        notify("importing FlashInfer")
        libraries.flashinfer = import_flashinfer()
    return libraries


def _describe(batch: BatchSpec) -> str:
    parts = [f"{r.id} {r.context_len}+{r.query_len}" for r in batch.requests]
    return f"{len(batch.requests)} requests [{', '.join(parts)}] (cached+new), " \
           f"{batch.num_tokens} tokens"


def _first(violations: list[Violation]) -> str:
    extra = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
    return violations[0].render() + extra


@dataclass
class _Layer:
    name: str
    cache: PagedKvCache
    queries: Tensor
    reference: Tensor


class _GroupRun:
    """State of one plan's run; each method adds its items to ``report``."""

    def __init__(self, torch: Torch, plan: SmokePlan, options: SmokeOptions, *,
                 libraries: _Libraries, device: Any, progress: Progress) -> None:
        self.torch, self.plan, self.options = torch, plan, options
        self.libraries, self.device, self.progress = libraries, device, progress
        self.report = GroupReport(plan)
        self.workload = mixed_batch(plan.kernel_block_size, options.seed)
        self.batch = self.workload.batch
        self.atol, self.rtol = tolerance_for(plan.dtype)
        self.step: FlashAttentionStep | FlashInferStep
        self.layers: list[_Layer] = []
        self.outputs: list[Tensor] = []

    def _reference(self, batch: BatchSpec, data: Any) -> Tensor:
        plan = self.plan
        return reference_attention(
            self.torch, batch, data, num_q_heads=plan.num_q_heads,
            num_kv_heads=plan.num_kv_heads, head_size=plan.head_size,
            sliding_window=plan.sliding_window, logits_soft_cap=plan.logits_soft_cap)

    def prepare(self) -> None:
        torch, plan, report = self.torch, self.plan, self.report
        report.shapes = (f"{_describe(self.batch)}; q/kv heads {plan.num_q_heads}/"
                         f"{plan.num_kv_heads}, head {plan.head_size}, {plan.dtype}, page "
                         f"{plan.kernel_block_size} {plan.kv_layout}")
        if plan.backend == "FLASH_ATTN":
            implementation = self.libraries.flash_attention
            assert implementation is not None
            report.implementation = implementation.label
            report.notes.extend(self.libraries.flash_attention_notes)
            self.step = FlashAttentionStep(torch, implementation, plan, self.batch, self.device)
        else:
            flashinfer = self.libraries.flashinfer
            wrappers = FlashInferWrappers(torch, flashinfer, plan, self.device,
                                          self.options.flashinfer_prefill_backend)
            self.step = FlashInferStep(torch, wrappers, plan, self.batch, self.device)
            report.implementation = f"FlashInfer {package_version('flashinfer-python')}"
        names = plan.layer_names or [f"{plan.name}.layer{i}" for i in range(self.options.layers)]
        for index, name in enumerate(names[: self.options.layers]):
            seed = self.options.seed * 1000 + index
            data_generator = torch.Generator(device=self.device).manual_seed(seed)
            noise_generator = torch.Generator(device=self.device).manual_seed(seed + 500)
            data = make_request_data(torch, self.batch, plan, self.device, data_generator)
            cache = allocate_cache(torch, plan, self.workload.num_pages, self.device,
                                   noise_generator)
            fill_cache(torch, cache, self.batch, data, self.step.slot_mapping,
                       token_order=self.step.token_order)
            self.layers.append(_Layer(name, cache, data.flat_queries(torch),
                                      self._reference(self.batch, data)))

    def check_bindings(self) -> None:
        plan = self.plan
        identity = MetadataIdentity(plan.backend, self.batch.block_size, plan.kv_layout,
                                    plan.num_kv_heads, plan.head_size, plan.kv_cache_dtype)
        bindings = [LayerBinding(
            layer_name=layer.name, metadata_key=plan.name, backend=plan.backend,
            block_size=layer.cache.block_size, kv_layout=layer.cache.layout,
            num_kv_heads=int(layer.cache.key.shape[2]), head_size=int(layer.cache.key.shape[3]),
            kv_cache_dtype=plan.kv_cache_dtype, num_q_heads=int(layer.queries.shape[1]))
            for layer in self.layers]
        violations = check_bindings(bindings, {plan.name: identity})
        self.report.checks.append(CheckResult(
            f"invariants 1-2: {len(bindings)} layers share one metadata",
            not violations, _first(violations) if violations else ""))

    def guard(self, label: str) -> bool:
        """Invariants 3-7 and 9 on what the kernel is about to read; record only failures."""
        step = self.step
        seen = step.device_metadata()
        violations = check_metadata(self.batch, seen,
                                     cache_block_size=self.layers[0].cache.block_size)
        violations += check_length_views(
            seen.common.request_ids, step.device_seq_lens(), seen.common.seq_lens,
            needs_exact=isinstance(step, FlashInferStep))
        if violations:
            self.report.checks.append(CheckResult(f"invariants before {label}", False,
                                                  _first(violations)))
        return not violations

    def run_layers(self) -> bool:
        torch, step, report = self.torch, self.step, self.report
        if not self.guard("planning"):
            return False
        try:
            if isinstance(step, FlashInferStep):
                self.progress(f"{self.plan.name}: planning FlashInfer decode + prefill "
                              "(a first use JIT-compiles: decode ~10 s, prefill ~90 s)")
                step.plan_kernels()
                report.implementation += f", prefill {step.wrappers.prefill_backend}"
                self.progress(f"{self.plan.name}: running FlashInfer for each layer")
            else:
                self.progress(f"{self.plan.name}: running {report.implementation} "
                              "(a new shape compiles in ~5 s)")
            for layer in self.layers:
                if not self.guard(f"layer {layer.name}"):
                    return False
                output = step.run(layer.queries, layer.cache)
                torch.cuda.synchronize()
                comparison = compare(torch, output, layer.reference, atol=self.atol,
                                     rtol=self.rtol)
                self.outputs.append(output)
                report.checks.append(CheckResult(
                    f"{layer.name} vs fp32 reference", comparison.passed,
                    "" if comparison.passed else
                    f"worst token row {comparison.worst_token}, {comparison.nan_count} non-finite",
                    comparison.max_abs, comparison.max_rel))
        except Exception as error:
            report.checks.append(CheckResult("kernel call", False,
                                             f"{type(error).__name__}: {error}"[:400]))
            return False
        report.checks.append(CheckResult(
            f"invariants 3-7, 9 before each of {len(self.layers)} kernel calls", True))
        return True

    def decode_only_launch(self) -> TimedLaunch | None:
        """FlashAttention's decode path alone (the sub-batch a decode graph would run)."""
        step = self.step
        if not isinstance(step, FlashAttentionStep):
            return None
        decodes = [r for r in self.batch.requests if r.query_len == 1]
        if not decodes:
            return None
        starts = step.metadata.cu_seqlens_q
        rows = [starts[i] for i, r in enumerate(self.batch.requests) if r.query_len == 1]
        sub_batch = BatchSpec(block_size=self.batch.block_size, requests=decodes)
        sub_step = FlashAttentionStep(self.torch, step.implementation, self.plan, sub_batch,
                                      self.device)
        layer = self.layers[0]
        index = self.torch.tensor(rows, device=self.device, dtype=self.torch.long)
        queries = layer.queries[index].contiguous()
        output = sub_step.run(queries, layer.cache)
        comparison = compare(self.torch, output, layer.reference[index], atol=self.atol,
                             rtol=self.rtol)
        self.report.checks.append(CheckResult(
            f"decode-only call ({len(decodes)} requests) vs reference", comparison.passed, "",
            comparison.max_abs, comparison.max_rel))
        return TimedLaunch(f"decode only ({len(decodes)} requests)",
                           lambda: sub_step.run(queries, layer.cache), sub_batch, "decode")

    def check_parity(self, store: dict[tuple[Any, ...], tuple[str, list[Tensor]]]) -> None:
        key = self.plan.parity_key()
        label = f"{self.plan.name} ({self.report.implementation})"
        if key not in store:
            store[key] = (label, self.outputs)
            return
        other_label, other_outputs = store[key]
        worst = None
        for mine, theirs in zip(self.outputs, other_outputs, strict=False):
            comparison = compare(self.torch, mine, theirs, atol=2 * self.atol,
                                 rtol=2 * self.rtol)
            if worst is None or not comparison.passed or comparison.max_abs > worst.max_abs:
                worst = comparison
                if not comparison.passed:
                    break
        if worst is not None:
            self.report.checks.append(CheckResult(f"parity vs {other_label}", worst.passed, "",
                                                  worst.max_abs, worst.max_rel))

    def check_graph(self) -> None:
        if not self.plan.uses_full_graph:
            return
        self.report.checks.extend(check_decode_graph(
            self.torch, self.plan, self.options, self.device,
            flash_attention=self.libraries.flash_attention,
            flashinfer=self.libraries.flashinfer, progress=self.progress))

    def measure(self, extra: TimedLaunch | None) -> None:
        if not self.options.measure or not self.guard("timing"):
            return
        plan, layer = self.plan, self.layers[0]
        launches = self.step.timed_launches(layer.queries, layer.cache)
        if extra is not None:
            launches.append(extra)
        self.progress(f"{plan.name}: timing {len(launches)} launches")
        for launch in launches:
            timing = time_kernel(self.torch, launch.launch, warmup=self.options.warmup,
                                 repeats=self.options.repeats)
            seconds = timing.median_us * 1e-6
            bandwidth = tflops = None
            if launch.kind == "decode":
                bandwidth = kv_read_bytes(launch.batch, num_kv_heads=plan.num_kv_heads,
                                          head_size=plan.head_size, dtype=plan.dtype,
                                          sliding_window=plan.sliding_window) / seconds / 1e12
            else:
                tflops = attention_flops(launch.batch, num_q_heads=plan.num_q_heads,
                                         head_size=plan.head_size,
                                         sliding_window=plan.sliding_window) / seconds / 1e12
            self.report.timings.append(TimingResult(launch.name, timing.median_us,
                                                    timing.min_us, timing.repeats,
                                                    bandwidth, tflops))


class _StageClock:
    """Forwards each stage to the progress sink and records how long each one took."""

    def __init__(self, sink: Progress) -> None:
        self.sink = sink
        self.stages: list[tuple[str, float]] = []
        self.current: str | None = None
        self.started = time.perf_counter()

    def __call__(self, stage: str) -> None:
        self._close()
        self.current = stage
        self.sink(stage)

    def _close(self) -> None:
        now = time.perf_counter()
        if self.current is not None:
            self.stages.append((self.current, now - self.started))
        self.started = now

    def finish(self) -> list[tuple[str, float]]:
        self._close()
        self.current = None
        return self.stages


def _software(torch: Torch, libraries: _Libraries) -> dict[str, str]:
    software = {"torch": str(torch.__version__), "cuda": str(torch.version.cuda)}
    if libraries.flashinfer is not None:
        software["flashinfer"] = package_version("flashinfer-python")
    if libraries.flash_attention is not None:
        software["flash-attention"] = libraries.flash_attention.label
    return software


def run_smoke(plans: Sequence[SmokePlan], options: SmokeOptions | None = None, *,
              progress: Progress | None = None, raise_on_failure: bool = True) -> SmokeReport:
    """Run every plan on this machine's GPU; return the report.

    Raises :class:`CannotRunHereError` (exit 4) before any work when torch, a GPU or a
    needed library is missing, and :class:`SmokeChecksFailed` (a SmokeFailedError, exit 3)
    carrying the report when an item failed and ``raise_on_failure`` is set.
    """
    started = time.perf_counter()
    options = options or SmokeOptions()
    notify = _StageClock(progress or (lambda _: None))
    notify("importing torch and initialising CUDA")
    torch = import_torch_cuda()
    torch.cuda.init()
    libraries = _load_libraries(plans, options, notify)
    device = torch.device("cuda")
    properties = torch.cuda.get_device_properties(device)
    report = SmokeReport(
        device=f"{properties.name} (sm_{properties.major}{properties.minor})",
        software=_software(torch, libraries))
    parity: dict[tuple[Any, ...], tuple[str, list[Tensor]]] = {}
    for plan in plans:
        notify(f"{plan.name}: preparing {plan.backend} batch and KV cache")
        group = _GroupRun(torch, plan, options, libraries=libraries, device=device,
                          progress=notify)
        report.groups.append(group.report)
        try:
            group.prepare()
        except Exception as error:
            group.report.checks.append(CheckResult("prepare batch and KV cache", False,
                                                   f"{type(error).__name__}: {error}"[:400]))
            continue
        group.check_bindings()
        if not group.run_layers():
            continue
        try:
            notify(f"{plan.name}: decode path and parity")
            extra = group.decode_only_launch()
            group.check_parity(parity)
            group.check_graph()
            group.measure(extra)
        except Exception as error:
            group.report.checks.append(CheckResult("decode path, parity, graph or timing",
                                                   False,
                                                   f"{type(error).__name__}: {error}"[:400]))
    report.stages = notify.finish()
    report.elapsed_s = time.perf_counter() - started
    if raise_on_failure and not report.passed:
        raise SmokeChecksFailed(report)
    return report
