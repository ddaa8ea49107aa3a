"""``run_smoke``: run each plan's real kernels on a paged KV cache and prove the outputs.

Per plan (attention group): build a mixed batch, allocate one paged cache per layer in
the plan's layout and kernel block size, write K/V through ``slot_mapping``, check the
invariants on what the kernel will read, run the kernel for every layer (FlashInfer is
planned once), compare with a float32 reference, compare with earlier plans of the same
shape (parity), replay the decode path from a CUDA graph when the plan's mode captures
full graphs, and time the kernels.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from selector.errors import CannotRunHereError
from selector.platforms import DEFAULT_PLATFORM, platform_module
from selector.smoke.backend_classes import VllmBackendStep, VllmRuntime, load_vllm
from selector.smoke.batch import BatchSpec
from selector.smoke.bytecode import uncached_bytecode_note
from selector.smoke.contract import ProviderSpec, load_contract
from selector.smoke.environment import package_version
from selector.smoke.flashinfer_jit import release_planned_variants
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
from selector.smoke.providers import (
    KERNELS_DIR_VARIABLE,
    ProviderChoice,
    choose_provider,
    cross_check_provider,
    platform_providers,
)
from selector.smoke.reference import compare, reference_attention, tolerance_for
from selector.smoke.report import (
    CheckResult,
    GroupReport,
    SmokeChecksFailed,
    SmokeReport,
    SmokeSubstituted,
    TimingResult,
)
from selector.smoke.steps import (
    FlashAttentionStep,
    FlashInferStep,
    FlashInferWrappers,
    MlaDecodeStep,
    TimedLaunch,
)
from selector.smoke.tensors import PagedKvCache, allocate_cache, fill_cache, make_request_data
from selector.smoke.timing import time_kernel
from selector.smoke.workload import long_context_for, mixed_batch, mla_decode_batch

RUNNABLE_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "FLASHMLA", "FLASH_ATTN_MLA", "TRITON_ATTN",
                     "TRITON_MLA")
"""Backends with a kernel runner; each is called as its engine's kernel call contract says
(TRITON_ATTN and TRITON_MLA only through vLLM's backend classes: vLLM importable)."""
RUNNABLE_BACKENDS_WHY = {
    "CUTLASS_MLA": "CUTLASS_MLA's kernels are Blackwell-only (SM100)",
    "FLASHINFER_MLA": "FlashInfer's MLA decode here is trtllm-gen, Blackwell-only (SM100)",
    "TRITON_FLASHINFER": "composite backends are smoke-tested through their child backends",
    "TRITON_FLASH_ATTN": "composite backends are smoke-tested through their child backends",
}

__all__ = [
    "RUNNABLE_BACKENDS",
    "Progress",
    "SmokeMachine",
    "StageClock",
    "platform_machine",
    "run_smoke",
]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any
Progress = Callable[[str], None]
"""Receives a short description of the stage the run has reached (e.g. a JIT compile)."""


@dataclass
class _Libraries:
    providers: dict[str, ProviderChoice] = field(default_factory=dict)
    """The provider chosen for each plan (by plan name)."""
    flashinfer: Any = None
    vllm: VllmRuntime | None = None
    """vLLM's modules, when a plan runs through vLLM's backend classes."""
    cross_checks: dict[str, ProviderSpec] = field(default_factory=dict)
    """Plans (by name) whose outputs vLLM's backend classes check beside their provider."""


def _check_runnable(plans: Sequence[SmokePlan], machine: SmokeMachine | None) -> None:
    """Refuse (exit 4, naming why) a plan the smoke check cannot run, before any import
    (a plan of another platform than the machine's, without one the default platform's,
    whose GPUs the smoke's kernel runners are written for: that platform's GPU first, by its
    module's probe)."""
    here = machine.platform if machine is not None else DEFAULT_PLATFORM
    for plan in plans:
        if plan.platform != here:
            platform_module(plan.platform).probe_torch(
                f"the smoke check of plan '{plan.name}' ({plan.backend}, a {plan.platform} "
                "deployment)")
        if plan.kv_cache_dtype not in ("auto", plan.dtype) and not plan.fp8_kv:
            raise CannotRunHereError(
                f"plan '{plan.name}': kv_cache_dtype '{plan.kv_cache_dtype}' is not "
                f"smoke-tested (the smoke check runs the model dtype and fp8/fp8_e4m3)")
        if plan.backend not in RUNNABLE_BACKENDS:
            raise CannotRunHereError(
                f"plan '{plan.name}': {plan.backend} cannot be smoke-tested here: "
                f"{RUNNABLE_BACKENDS_WHY.get(plan.backend, 'no kernel runner for it yet')}")
        contract = load_contract(plan.kernel_calls)
        contract.backend(plan.backend)
        specs = platform_providers(plan)
        missing = [spec for spec in specs if spec.kind == "backend_classes" and spec.module
                   and importlib.util.find_spec(spec.module) is None]
        if specs and len(missing) == len(specs):
            raise CannotRunHereError(
                f"plan '{plan.name}': {plan.backend} runs only through vLLM's own backend "
                f"classes ({', '.join(s.id for s in missing)}), and the vllm package is not "
                "importable here; run the smoke where vLLM is installed (its image)")


def _load_libraries(machine: SmokeMachine, plans: Sequence[SmokePlan], options: SmokeOptions,
                    notify: Progress) -> _Libraries:
    """Choose each plan's kernel provider up front, so a missing library fails before any
    work; only the providers the plans need are imported."""
    libraries = _Libraries(flashinfer=machine.flashinfer)
    vllm_runtime: VllmRuntime | None = None
    if any(plan.backend == "FLASH_ATTN" for plan in plans) and options.persistent_kernel_cache:
        os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")
    for plan in plans:
        notify(f"{plan.name}: loading the {plan.backend} kernel provider")
        choice = machine.choose(plan)
        libraries.providers[plan.name] = choice
        cross_check = cross_check_provider(plan, choice.provider.spec)
        if cross_check is not None:
            libraries.cross_checks[plan.name] = cross_check
        if (choice.provider.spec.kind == "backend_classes" or cross_check is not None) \
                and libraries.vllm is None:
            libraries.vllm = vllm_runtime = vllm_runtime or load_vllm()
        if choice.provider.spec.id == "flashinfer" and libraries.flashinfer is None:
            libraries.flashinfer = importlib.import_module("flashinfer")
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
    sinks: Tensor | None = None


def sinks_dtype(torch: Torch, plan: SmokePlan) -> Any:
    """Sinks as the layer holds them: a parameter in the model dtype (gpt_oss.py), which
    FlashInfer's wrapper converts to float32 itself."""
    return getattr(torch, plan.dtype)


class _GroupRun:
    """State of one plan's run; each method adds its items to ``report``."""

    def __init__(self, torch: Torch, plan: SmokePlan, options: SmokeOptions, *,
                 libraries: _Libraries, device: Any, progress: Progress) -> None:
        self.torch, self.plan, self.options = torch, plan, options
        self.libraries, self.device, self.progress = libraries, device, progress
        self.synchronize: Callable[[], None] = (torch.cuda.synchronize
                                                if getattr(device, "type", "") == "cuda"
                                                else lambda: None)
        self.report = GroupReport(plan)
        long_context = long_context_for(plan)
        self.workload = (mla_decode_batch(plan.kernel_block_size, options.seed, long_context)
                         if plan.is_mla else
                         mixed_batch(plan.kernel_block_size, options.seed,
                                     long_context=long_context))
        self.batch = self.workload.batch
        self.atol, self.rtol = tolerance_for(plan.dtype, fp8=plan.fp8_kv)
        self.step: FlashAttentionStep | FlashInferStep | MlaDecodeStep | VllmBackendStep
        self.layers: list[_Layer] = []
        self.layer_names: list[str] = []
        self.outputs: list[Tensor] = []

    def _reference(self, batch: BatchSpec, data: Any, sinks: Tensor | None) -> Tensor:
        plan = self.plan
        return reference_attention(
            self.torch, batch, data, num_q_heads=plan.num_q_heads,
            num_kv_heads=plan.num_kv_heads, head_size=plan.head_size,
            sliding_window=plan.sliding_window, logits_soft_cap=plan.logits_soft_cap,
            scale=plan.scale, sinks=sinks)

    def prepare(self) -> None:
        torch, plan, report = self.torch, self.plan, self.report
        report.shapes = (f"{_describe(self.batch)}; q/kv heads {plan.num_q_heads}/"
                         f"{plan.num_kv_heads}, head {plan.head_size}, {plan.dtype}, page "
                         f"{plan.kernel_block_size} {plan.kv_layout}")
        choice = self.libraries.providers[plan.name]
        report.implementation = choice.provider.label
        report.provider = choice.provider.spec.id
        if choice.substitution:
            report.substitution = choice.substitution
        names = plan.layer_names or [f"{plan.name}.layer{i}" for i in range(self.options.layers)]
        names = names[: self.options.layers]
        if choice.provider.spec.kind == "backend_classes":
            assert self.libraries.vllm is not None
            self.step = VllmBackendStep(torch, self.libraries.vllm, choice.provider.spec, plan,
                                        self.batch, self.device, names)
            report.implementation += f" ({self.step.backend.__name__})"
        elif plan.is_mla:
            self.step = MlaDecodeStep(torch, choice.provider, plan, self.batch, self.device)
        elif plan.backend == "FLASHINFER":
            wrappers = FlashInferWrappers(torch, self.libraries.flashinfer, plan, self.device)
            self.step = FlashInferStep(torch, wrappers, plan, self.batch, self.device)
        else:
            self.step = FlashAttentionStep(torch, choice.provider, plan, self.batch,
                                           self.device)
        report.notes.extend(getattr(self.step, "notes", []))
        report.notes.extend(load_contract(plan.kernel_calls).backend(plan.backend).notes)
        self.layer_names = names
        for index, name in enumerate(names):
            data, cache, sinks = self._layer_data(self.step, index)
            self.layers.append(_Layer(name, cache, data.flat_queries(torch),
                                      self._reference(self.batch, data, sinks), sinks))

    def _layer_data(self, step: Any, index: int) -> tuple[Any, PagedKvCache, Tensor | None]:
        """Layer ``index``'s data (its own seed), its cache allocated for ``step`` and
        written as the step's backend sees it, and its sinks."""
        torch, plan = self.torch, self.plan
        seed = self.options.seed * 1000 + index
        data_generator = torch.Generator(device=self.device).manual_seed(seed)
        noise_generator = torch.Generator(device=self.device).manual_seed(seed + 500)
        data = make_request_data(torch, self.batch, plan, self.device, data_generator)
        if isinstance(step, VllmBackendStep):
            cache = step.allocate_cache(self.workload.num_pages, noise_generator)
        else:
            cache = allocate_cache(torch, plan, self.workload.num_pages, self.device,
                                   noise_generator)
        writes_new = isinstance(step, VllmBackendStep) and step.writes_new_tokens
        fill_cache(torch, cache, self.batch, data, step.slot_mapping,
                   token_order=step.token_order, new_tokens=not writes_new)
        if writes_new:
            assert isinstance(step, VllmBackendStep)
            step.stage_new_tokens(cache, *data.new_tokens(torch, self.batch))
        sinks = (torch.randn(plan.num_q_heads, generator=data_generator, device=self.device,
                             dtype=torch.float32) * 2.0).to(
                     sinks_dtype(torch, plan)) if plan.has_sinks else None
        return data, cache, sinks

    def cross_check(self) -> None:
        """Run the same layers and data through vLLM's backend classes (the contract's
        ``cross_checks``) and compare with the reference and with this plan's provider."""
        spec = self.libraries.cross_checks.get(self.plan.name)
        if spec is None or not self.outputs:
            return
        assert self.libraries.vllm is not None
        torch, plan, report = self.torch, self.plan, self.report
        self.progress(f"{plan.name}: the same layers through vLLM's backend classes")
        try:
            step = VllmBackendStep(torch, self.libraries.vllm, spec, plan, self.batch,
                                   self.device, self.layer_names)
        except (ImportError, CannotRunHereError) as error:
            report.notes.append(f"vLLM's backend classes were not run beside "
                                f"{report.implementation}: {type(error).__name__}: {error}"[:300])
            return
        label = f"vLLM {self.libraries.vllm.version} backend classes ({step.backend.__name__})"
        report.cross_checks.append(label)
        report.notes.extend(note for note in step.notes if note not in report.notes)
        for index, (layer, theirs) in enumerate(zip(self.layers, self.outputs, strict=False)):
            _, cache, _ = self._layer_data(step, index)
            try:
                output = step.run(layer.queries, cache, layer.sinks)
                self.synchronize()
            except Exception as error:
                report.checks.append(CheckResult(f"{layer.name} via {label}", False,
                                                 f"{type(error).__name__}: {error}"[:400]))
                return
            for what, truth, scale in (("fp32 reference", layer.reference, 1),
                                       (report.implementation, theirs, 2)):
                comparison = compare(torch, output, truth, atol=scale * self.atol,
                                     rtol=scale * self.rtol)
                report.checks.append(CheckResult(
                    f"{layer.name} via {label} vs {what}", comparison.passed,
                    "" if comparison.passed else
                    f"worst token row {comparison.worst_token}, {comparison.nan_count} non-finite",
                    comparison.max_abs, comparison.max_rel))

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
                              "(a first use JIT-compiles the kernel variants they run)")
                step.plan_kernels()
                report.notes.extend(note for note in step.notes if note not in report.notes)
                report.implementation += f", prefill {step.wrappers.prefill_backend}"
                self.progress(f"{self.plan.name}: running FlashInfer for each layer")
            else:
                self.progress(f"{self.plan.name}: running {report.implementation}")
            for layer in self.layers:
                if not self.guard(f"layer {layer.name}"):
                    return False
                output = step.run(layer.queries, layer.cache, layer.sinks)
                self.synchronize()
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
        sub_step = FlashAttentionStep(self.torch, step.provider, self.plan, sub_batch,
                                      self.device)
        layer = self.layers[0]
        index = self.torch.tensor(rows, device=self.device, dtype=self.torch.long)
        queries = layer.queries[index].contiguous()
        output = sub_step.run(queries, layer.cache, layer.sinks)
        comparison = compare(self.torch, output, layer.reference[index], atol=self.atol,
                             rtol=self.rtol)
        self.report.checks.append(CheckResult(
            f"decode-only call ({len(decodes)} requests) vs reference", comparison.passed, "",
            comparison.max_abs, comparison.max_rel))
        return TimedLaunch(f"decode only ({len(decodes)} requests)",
                           lambda: sub_step.run(queries, layer.cache, layer.sinks), sub_batch,
                           "decode")

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
        if not self.plan.uses_full_graph or self.plan.is_mla:
            return
        choice = self.libraries.providers[self.plan.name]
        vllm = None
        if isinstance(self.step, VllmBackendStep):
            assert self.libraries.vllm is not None
            vllm = (self.libraries.vllm, choice.provider.spec)
        self.report.checks.extend(check_decode_graph(
            self.torch, self.plan, self.options, self.device, provider=choice.provider,
            flashinfer=self.libraries.flashinfer, vllm=vllm, progress=self.progress))

    def measure(self, extra: TimedLaunch | None) -> None:
        if not self.options.measure or not self.guard("timing"):
            return
        plan, layer = self.plan, self.layers[0]
        launches = self.step.timed_launches(layer.queries, layer.cache, layer.sinks)
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
                                          head_size=plan.head_size,
                                          dtype="float8" if plan.fp8_kv else plan.dtype,
                                          sliding_window=plan.sliding_window) / seconds / 1e12
            else:
                tflops = attention_flops(launch.batch, num_q_heads=plan.num_q_heads,
                                         head_size=plan.head_size,
                                         sliding_window=plan.sliding_window) / seconds / 1e12
            self.report.timings.append(TimingResult(launch.name, timing.median_us,
                                                    timing.min_us, timing.repeats,
                                                    bandwidth, tflops))


class StageClock:
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
    if libraries.vllm is not None:
        software["vllm"] = libraries.vllm.version
    for name, choice in libraries.providers.items():
        software[f"provider {name}"] = choice.provider.label
    return software


@dataclass
class SmokeMachine:
    """Where the kernels run: torch, the device and how each plan's provider is chosen.

    :func:`platform_machine` is the real GPU of the plans' platform; tests pass a CPU
    machine with torch stand-ins of the kernels (timing and CUDA graphs are then off)."""

    torch: Any
    device: Any
    name: str
    choose: Callable[[SmokePlan], ProviderChoice]
    flashinfer: Any = None
    platform: str = DEFAULT_PLATFORM
    """The platform whose plans it runs (``schemas/platforms.yaml``)."""
    notes: list[str] = field(default_factory=list)
    """What slows every verdict on this machine (the report's notes)."""


def _importable(module: str) -> bool:
    """Whether ``module``'s package can be imported here (one already imported counts)."""
    package = module.split(".", maxsplit=1)[0]
    if package in sys.modules:
        return True
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _prefetch(plans: Sequence[SmokePlan]) -> threading.Thread:
    """Import the kernel packages the plans need in the background (overlaps the device's
    start): each plan's first provider that is a package, and the compiled extensions of
    the providers before it that load by path from ``$VLLM_KERNELS_DIR`` (vLLM's FA3,
    FlashMLA), which :func:`~selector.smoke.providers.choose_provider` then finds loaded."""
    modules: list[str] = []
    libraries: list[Path] = []
    folder = os.environ.get(KERNELS_DIR_VARIABLE)
    for plan in plans:
        for spec in platform_providers(plan):
            if spec.kind == "op_library" and folder and spec.library_file:
                libraries.append(Path(folder) / spec.library_file)
            elif spec.kind == "module" and spec.module and _importable(spec.module):
                modules.append(spec.module)
                break

    def work() -> None:
        for library in dict.fromkeys(libraries):
            if library.is_file():
                try:
                    importlib.import_module("torch").ops.load_library(str(library))
                except Exception:  # reported when the provider is chosen
                    continue
        for module in dict.fromkeys(modules):
            try:
                importlib.import_module(module)
            except Exception:  # reported when the provider is chosen
                continue

    thread = threading.Thread(target=work, name="attn-select-prefetch", daemon=True)
    thread.start()
    return thread


def platform_machine(plans: Sequence[SmokePlan], options: SmokeOptions,
                     notify: Progress) -> SmokeMachine:
    """This machine's GPU of the plans' platform, through its module
    (:mod:`selector.platforms`: the torch probe, the device, the kernel providers)."""
    platform = plans[0].platform if plans else DEFAULT_PLATFORM
    module = platform_module(platform)
    notify("importing torch")
    torch = module.probe_torch("the smoke check")
    notes = [note for note in [uncached_bytecode_note(torch)] if note]
    prefetch = _prefetch(plans)
    notify(f"initialising the {platform} device (kernel libraries import meanwhile)")
    device, name = module.open_device(torch)
    prefetch.join()
    return SmokeMachine(
        torch, device, name,
        lambda plan: choose_provider(plan, torch, strict=options.strict_fa_version),
        platform=platform, notes=notes)


def run_smoke(plans: Sequence[SmokePlan], options: SmokeOptions | None = None, *,
              progress: Progress | None = None, raise_on_failure: bool = True,
              machine: SmokeMachine | None = None) -> SmokeReport:
    """Run every plan on this machine's GPU (or ``machine``); return the report.

    Raises :class:`CannotRunHereError` (exit 4) before any work when torch, a GPU or a
    needed library is missing, :class:`SmokeChecksFailed` (exit 3) carrying the report
    when an item failed and :class:`SmokeSubstituted` (exit 5) when every item passed but
    a plan ran another kernel than it negotiated, when ``raise_on_failure`` is set.
    """
    started = time.perf_counter()
    options = options or SmokeOptions()
    notify = StageClock(progress or (lambda _: None))
    _check_runnable(plans, machine)
    if machine is None:
        machine = platform_machine(plans, options, notify)
    torch, device = machine.torch, machine.device
    libraries = _load_libraries(machine, plans, options, notify)
    report = SmokeReport(device=machine.name, software=_software(torch, libraries),
                         notes=list(machine.notes))
    parity: dict[tuple[Any, ...], tuple[str, list[Tensor]]] = {}
    try:
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
                group.cross_check()
                notify(f"{plan.name}: decode path and parity")
                extra = group.decode_only_launch()
                group.check_parity(parity)
                group.check_graph()
                group.measure(extra)
            except Exception as error:
                group.report.checks.append(CheckResult("decode path, parity, graph or timing",
                                                       False,
                                                       f"{type(error).__name__}: {error}"[:400]))
    finally:
        if libraries.flashinfer is not None:
            release_planned_variants(libraries.flashinfer)
    report.stages = notify.finish()
    report.elapsed_s = time.perf_counter() - started
    if raise_on_failure and not report.passed:
        raise SmokeChecksFailed(report)
    if raise_on_failure and report.status == "SUBSTITUTED":
        raise SmokeSubstituted(report)
    return report
