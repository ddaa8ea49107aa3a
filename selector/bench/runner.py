"""``run_bench``: every runnable valid backend of every attention group, on every shape of
the workload, on this machine's GPU.

Per group and shape: the batch on random non-contiguous pages; per-request Q/K/V and the
float32 reference computed once; per backend the step's metadata built on the CPU and
handed to the kernel (timed separately: the Builder cost per step), one paged cache in
the backend's shape and layout written through ``slot_mapping``, the kernel's output
compared with the reference once, then the kernel timed (:mod:`selector.bench.timing`).
The card's copy bandwidth and bf16 matmul rate are measured first, in the same run.

torch and the kernel libraries are imported inside :func:`device_environment` only.
"""

from __future__ import annotations

import datetime
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from selector import __version__
from selector.bench.measurements import (
    BenchResult,
    CheckInfo,
    DeploymentInfo,
    DeviceInfo,
    Measurements,
    PeakMeasurement,
)
from selector.bench.roofline import copy_bytes, gemm_flops, shape_work
from selector.bench.targets import BenchGroup, BenchTargets
from selector.bench.timing import Clock, CudaClock, time_samples
from selector.bench.workload import BenchSettings, BenchWorkload, Shape
from selector.catalog import Catalog
from selector.errors import CannotRunHereError
from selector.platforms import DEFAULT_PLATFORM, platform_module
from selector.smoke.environment import INSTALL_HINT, import_flashinfer, package_version
from selector.smoke.flashinfer_jit import release_planned_variants
from selector.smoke.plan import SmokePlan
from selector.smoke.providers import Provider, choose_provider
from selector.smoke.reference import compare, reference_attention, tolerance_for
from selector.smoke.runner import StageClock
from selector.smoke.steps import FlashAttentionStep, FlashInferStep, FlashInferWrappers
from selector.smoke.tensors import allocate_cache, fill_cache, make_request_data

__all__ = ["BenchEnvironment", "catalog_entry", "device_environment", "run_bench", "use_graph"]

Tensor: TypeAlias = Any
Progress = Callable[[str], None]

FLUSH_BYTES = 256 * 1024 * 1024
COPY_BYTES = 1 << 30
GEMM_SIZE = 8192


@dataclass
class BenchEnvironment:
    """What the run uses: torch, the device, a clock and the kernel libraries found."""

    torch: Any
    device: Any
    clock: Clock
    device_info: DeviceInfo
    flash_attention: Provider | None = None
    """The FLASH_ATTN provider the contract chose (vLLM's own kernels first)."""
    flashinfer: Any = None
    skipped: dict[str, str] = field(default_factory=dict)
    """Backends that cannot run here, and why."""
    software: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    flush_bytes: int = FLUSH_BYTES
    copy_bytes: int = COPY_BYTES
    gemm_size: int = GEMM_SIZE

    def runnable(self, plan: SmokePlan) -> str | None:
        """None when ``plan`` can run here, else why not."""
        if plan.backend in self.skipped:
            return self.skipped[plan.backend]
        if plan.kv_cache_dtype not in ("auto", plan.dtype) and not plan.fp8_kv:
            return f"kv_cache_dtype {plan.kv_cache_dtype} is not benchmarked"
        if plan.backend not in ("FLASH_ATTN", "FLASHINFER"):
            return f"{plan.backend} has no bench runner"
        if plan.backend == "FLASH_ATTN" and self.flash_attention is not None:
            multiple = self.flash_attention.spec.min_block_multiple
            if plan.kernel_block_size % multiple:
                return (f"{self.flash_attention.label} needs a page size that is a multiple of "
                        f"{multiple}, the plan has {plan.kernel_block_size}")
        return None


def catalog_entry(gpu_name: str, fallback: str | None, catalog: Catalog) -> Any:
    """The catalog's device of the GPU torch names (the longest name or alias that is a
    whole word of it), else the deployment's device ``fallback``."""
    best = None
    text = gpu_name.upper()
    for device in catalog.devices:
        for name in (device.name, *device.aliases):
            # whole words only: "NVIDIA H20" must not match "NVIDIA H200"
            pattern = rf"(?<![A-Z0-9]){re.escape(name.upper())}(?![A-Z0-9])"
            if re.search(pattern, text) and (best is None or len(name) > best[0]):
                best = (len(name), device)
    if best is not None:
        return best[1]
    if fallback:
        try:
            return catalog.device(fallback)
        except Exception:
            return None
    return None


def device_environment(plans: Sequence[SmokePlan], notify: Progress, catalog: Catalog,
                       deployment_device: str | None = None) -> BenchEnvironment:
    """Import torch (with a GPU of the plans' platform, through its module:
    :mod:`selector.platforms`) and the libraries the plans need; a missing library skips
    its backend, and :class:`CannotRunHereError` (exit 4) is raised when nothing can run."""
    platform = plans[0].platform if plans else DEFAULT_PLATFORM
    module = platform_module(platform)
    notify(f"importing torch and initialising the {platform} device")
    torch = module.probe_torch("the benchmark")
    device, _ = module.open_device(torch)
    properties = torch.cuda.get_device_properties(device)  # HIP's too on a ROCm torch
    probe = catalog.platform(platform).torch_probe  # torch.version.cuda; ROCm: .hip
    entry = catalog_entry(str(properties.name), deployment_device, catalog)
    info = DeviceInfo(
        name=str(properties.name), capability=f"{properties.major}.{properties.minor}",
        sm_count=int(properties.multi_processor_count),
        l2_bytes=int(getattr(properties, "L2_cache_size", 0)) or None,
        memory_bytes=int(properties.total_memory),
        catalog_name=entry.name if entry is not None else None,
        catalog_tbps=entry.hbm_bandwidth_tbs if entry is not None else None,
        catalog_tflops=entry.bf16_dense_tflops if entry is not None else None,
        notes=["clocks as found (not fixed); spread and outliers are reported"])
    if deployment_device and entry is not None and entry.name != deployment_device:
        info.notes.append(f"the deployment targets {deployment_device}; this card is "
                          f"{entry.name}")
    environment = BenchEnvironment(torch, device, CudaClock(torch), info,
                                   software={"torch": str(torch.__version__),
                                             probe: str(getattr(torch.version, probe))})
    backends = {plan.backend for plan in plans}
    if "FLASH_ATTN" in backends:
        os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")
        notify("loading the FLASH_ATTN kernel provider")
        first = next(p for p in plans if p.backend == "FLASH_ATTN")
        try:
            choice = choose_provider(first, torch)
        except CannotRunHereError as error:
            environment.skipped["FLASH_ATTN"] = str(error)
        else:
            environment.flash_attention = choice.provider
            if choice.substitution:
                environment.notes.append(f"SUBSTITUTED: {choice.substitution}")
            environment.software["flash-attention"] = choice.provider.label
    if "FLASHINFER" in backends:
        notify("importing FlashInfer")
        try:
            environment.flashinfer = import_flashinfer()
        except CannotRunHereError as error:
            environment.skipped["FLASHINFER"] = str(error)
        else:
            environment.software["flashinfer"] = package_version("flashinfer-python")
    if all(environment.runnable(plan) is not None for plan in plans):
        reasons = "; ".join(f"{plan.backend}: {environment.runnable(plan)}" for plan in plans)
        raise CannotRunHereError(f"no backend of this deployment can run here ({reasons}); "
                                 f"install the GPU extra: {INSTALL_HINT}")
    return environment


def use_graph(plan: SmokePlan, shape: Shape, setting: str) -> bool:
    """Whether vLLM would replay this shape's attention from a full CUDA graph."""
    if setting != "auto":
        return setting == "on"
    if plan.cudagraph_mode == "FULL":
        return True
    return plan.cudagraph_mode in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY") and \
        shape.kind == "decode"


def _measure_peaks(env: BenchEnvironment, settings: BenchSettings, notify: Progress
                   ) -> tuple[PeakMeasurement | None, PeakMeasurement | None, list[str]]:
    torch, device, notes = env.torch, env.device, []
    peak_settings = settings.model_copy(update={"min_repeats": 10, "max_repeats": 50,
                                                "warmup": 3, "target_ci": 0.005})
    copy = matmul = None
    notify("measuring the card's copy bandwidth and bf16 matmul rate")
    try:
        elements = env.copy_bytes // 2
        buffers = [torch.randn(elements, device=device, dtype=torch.float32).to(torch.bfloat16)]
        buffers.append(torch.empty_like(buffers[0]))
        timed = time_samples(env.clock, lambda: buffers[1].copy_(buffers[0]),
                             settings=peak_settings, graph=False, flush=None)
        copy = PeakMeasurement(what=f"device copy of {env.copy_bytes / 2**30:g} GiB "
                                    "(bytes read + written)",
                               work=copy_bytes(elements, 2), unit="TB/s",
                               samples_us=timed.samples_us)
        buffers.clear()
    except Exception as error:
        notes.append(f"copy bandwidth not measured: {type(error).__name__}: {error}"[:200])
    try:
        size = env.gemm_size
        matrices = [torch.randn(size, size, device=device, dtype=torch.bfloat16)
                    for _ in range(3)]
        timed = time_samples(env.clock,
                             lambda: torch.matmul(matrices[0], matrices[1], out=matrices[2]),
                             settings=peak_settings, graph=False, flush=None)
        matmul = PeakMeasurement(what=f"bf16 GEMM {size}x{size}x{size} (random data)",
                                 work=gemm_flops(size, size, size), unit="TFLOP/s",
                                 samples_us=timed.samples_us)
        matrices.clear()
    except Exception as error:
        notes.append(f"matmul rate not measured: {type(error).__name__}: {error}"[:200])
    _free(torch)
    return copy, matmul, notes


def _free(torch: Any) -> None:
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_available():
        cuda.empty_cache()


@dataclass
class _ShapeData:
    data: Any
    queries: Tensor
    reference: Tensor


class _Bench:
    def __init__(self, env: BenchEnvironment, workload: BenchWorkload, notify: Progress) -> None:
        self.env = env
        self.settings = workload.settings
        self.workload = workload
        self.notify = notify
        torch = env.torch
        self.flush_buffer = (torch.empty(env.flush_bytes // 4, dtype=torch.int32,
                                         device=env.device)
                             if self.settings.flush_l2 else None)
        self.wrappers: dict[str, Any] = {}

    def flush(self) -> None:
        if self.flush_buffer is not None:
            self.flush_buffer.zero_()

    def shape_data(self, plan: SmokePlan, shape: Shape) -> _ShapeData:
        torch, device = self.env.torch, self.env.device
        batch = shape.batch(plan.kernel_block_size, self.settings.seed)
        generator = torch.Generator(device=device).manual_seed(self.settings.seed * 7 + 1)
        data = make_request_data(torch, batch, plan, device, generator)
        reference = reference_attention(
            torch, batch, data, num_q_heads=plan.num_q_heads, num_kv_heads=plan.num_kv_heads,
            head_size=plan.head_size, sliding_window=plan.sliding_window,
            logits_soft_cap=plan.logits_soft_cap, scale=plan.scale)
        return _ShapeData(data, data.flat_queries(torch), reference)

    def build_step(self, plan: SmokePlan, batch: Any) -> Any:
        env = self.env
        if plan.backend == "FLASH_ATTN":
            assert env.flash_attention is not None
            return FlashAttentionStep(env.torch, env.flash_attention, plan, batch, env.device)
        wrappers = self.wrappers.get(plan.name)
        if wrappers is None:
            wrappers = FlashInferWrappers(env.torch, env.flashinfer, plan, env.device)
            self.wrappers[plan.name] = wrappers
        step = FlashInferStep(env.torch, wrappers, plan, batch, env.device)
        step.plan_kernels()
        return step

    def implementation(self, plan: SmokePlan, step: Any) -> str:
        if plan.backend == "FLASH_ATTN":
            assert self.env.flash_attention is not None
            return self.env.flash_attention.label
        label = f"FlashInfer {self.env.software.get('flashinfer', '')}".strip()
        if step is not None and step.metadata.num_prefills:
            label += f", prefill {step.wrappers.prefill_backend}"
        return label

    def run_one(self, group: BenchGroup, plan: SmokePlan, shape: Shape,
                prepared: _ShapeData) -> BenchResult:
        env, settings, torch = self.env, self.settings, self.env.torch
        geometry = group.info().geometry.geometry()
        work = shape_work(shape.requests, geometry)
        result = BenchResult(group=group.name, backend=plan.backend,
                             plan=plan.model_dump(mode="json"), shape=shape.to_json(),
                             l2_flush=settings.flush_l2, work=work.to_json(),
                             working_set_bytes=work.bytes)
        paged = shape.paged(plan.kernel_block_size, settings.seed)
        batch = paged.batch
        try:
            builder: list[float] = []
            step: Any = None
            for attempt in range(settings.builder_repeats + 1):
                started = time.perf_counter()
                step = self.build_step(plan, batch)
                env.clock.synchronize()
                if attempt:  # the first build warms caches (FlashInfer JIT-compiles here)
                    builder.append((time.perf_counter() - started) * 1e6)
            result.builder_us = builder
            result.implementation = self.implementation(plan, step)
            generator = torch.Generator(device=env.device).manual_seed(settings.seed + 11)
            cache = allocate_cache(torch, plan, paged.num_pages, env.device, generator)
            fill_cache(torch, cache, batch, prepared.data, step.slot_mapping,
                       token_order=step.token_order)
            if plan.backend == "FLASH_ATTN":
                queries = prepared.queries
                expected = prepared.reference

                def launch() -> object:
                    return step.run(queries, cache)
            else:
                queries = prepared.queries[step.order].contiguous()
                expected = prepared.reference[step.order]
                out = torch.empty_like(queries)

                def launch() -> object:
                    return step.run_reordered(queries, cache, out)
            output = launch()
            env.clock.synchronize()
            atol, rtol = tolerance_for(plan.dtype)
            comparison = compare(torch, output, expected, atol=atol, rtol=rtol)
            result.check = CheckInfo(
                passed=comparison.passed, max_abs=comparison.max_abs,
                max_rel=comparison.max_rel,
                detail="" if comparison.passed else
                f"worst token row {comparison.worst_token}, {comparison.nan_count} non-finite")
            del output
            graph = use_graph(plan, shape, settings.graphs)
            timed = time_samples(env.clock, launch, settings=settings, graph=graph,
                                 flush=self.flush if settings.flush_l2 else None)
            result.samples_us = timed.samples_us
            result.timing_mode = "graph" if timed.mode == "graph" else "eager"
            result.notes.extend(timed.notes)
            result.notes.append(f"host enqueue {timed.host_us:.0f} us per launch")
            if hasattr(env.clock, "release"):
                env.clock.release()
        except Exception as error:
            result.error = f"{type(error).__name__}: {error}"[:400]
        return result

    def run(self, targets: BenchTargets, *, shapes: list[Shape]) -> tuple[list[BenchResult],
                                                                           dict[str, dict[str, str]]]:
        results: list[BenchResult] = []
        unmeasured: dict[str, dict[str, str]] = {}
        for group in targets.groups:
            skipped = dict(group.unmeasured)
            plans = []
            for plan in group.plans:
                why = self.env.runnable(plan)
                if why is None:
                    plans.append(plan)
                else:
                    skipped[plan.backend] = why
            unmeasured[group.name] = skipped
            if not plans:
                continue
            for shape in shapes:
                self.notify(f"{group.name}: {shape.name}: data and reference")
                try:
                    prepared = self.shape_data(plans[0], shape)
                except Exception as error:
                    for plan in plans:
                        results.append(BenchResult(
                            group=group.name, backend=plan.backend, shape=shape.to_json(),
                            plan=plan.model_dump(mode="json"),
                            error=f"preparing data: {type(error).__name__}: {error}"[:400]))
                    _free(self.env.torch)
                    continue
                for plan in plans:
                    self.notify(f"{group.name}: {shape.name}: {plan.backend}")
                    results.append(self.run_one(group, plan, shape, prepared))
                    _free(self.env.torch)
                del prepared
                _free(self.env.torch)
        return results, unmeasured


def run_bench(targets: BenchTargets, workload: BenchWorkload, *, catalog: Catalog,
              progress: Progress | None = None,
              environment: BenchEnvironment | None = None) -> Measurements:
    """Measure every runnable valid backend of every group on every shape; never raises for
    a failing kernel (the result records it), raises :class:`CannotRunHereError` (exit 4)
    when nothing can run here."""
    started = time.perf_counter()
    notify = StageClock(progress or (lambda _: None))
    env = environment or device_environment(targets.plans, notify, catalog, targets.device)
    settings = workload.settings
    copy, matmul, notes = _measure_peaks(env, settings, notify)
    bench = _Bench(env, workload, notify)
    try:
        results, unmeasured = bench.run(targets, shapes=workload.shapes())
    finally:
        if env.flashinfer is not None:
            release_planned_variants(env.flashinfer)
    groups = []
    for group in targets.groups:
        info = group.info()
        info.unmeasured = unmeasured.get(group.name, info.unmeasured)
        groups.append(info)
    stages = [{"stage": name, "seconds": seconds} for name, seconds in notify.finish()]
    stages.append({"stage": "total", "seconds": time.perf_counter() - started})
    return Measurements(
        tool_version=__version__,
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        device=env.device_info, software=env.software, copy_peak=copy, matmul_peak=matmul,
        deployment=DeploymentInfo(source=targets.source, engine=targets.engine,
                                  device=targets.device, mode=targets.mode, groups=groups),
        workload=workload.model_dump(mode="json"), results=results, stages=stages,
        notes=[*env.notes, *notes])
