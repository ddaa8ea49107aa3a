"""Smoke-check measurements on a GPU (run on the H200 machine).

1. Decode KV-read bandwidth, batch 128 x 4096 context, GQA 32/8, head 128, page 16, bf16:
   the tool's timing (``selector.smoke.timing.time_kernel``, median of per-launch CUDA
   events) against a raw CUDA-event loop calling the library directly, for FA4 and
   FlashInfer.
2. Causal prefill 4 x 4096 TFLOP/s, the same two ways.
3. Smoke verdict wall time with a warm JIT cache: ``attn-select smoke-plan`` on
   ``examples/smoke-plan-h200.json`` in a fresh process, twice (the first warms caches).

Usage: python benchmarks/smoke_bench.py [--skip-verdict]
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")

from selector.catalog import load_catalog  # noqa: E402
from selector.smoke.batch import BatchSpec  # noqa: E402
from selector.smoke.environment import import_flashinfer  # noqa: E402
from selector.smoke.metrics import attention_flops, kv_read_bytes  # noqa: E402
from selector.smoke.plan import SmokePlan, bind_plan  # noqa: E402
from selector.smoke.providers import choose_provider  # noqa: E402
from selector.smoke.steps import FlashAttentionStep, FlashInferStep, FlashInferWrappers  # noqa: E402
from selector.smoke.tensors import allocate_cache, fill_cache, make_request_data  # noqa: E402
from selector.smoke.timing import time_kernel, time_loop  # noqa: E402
from selector.smoke.workload import Workload, assign_pages, uniform_decode_batch  # noqa: E402

REPEATS = 50
CLI = (
    "import sys, typer; from selector.cli.smoke import register; app = typer.Typer(); "
    "register(app); app.callback()(lambda: None); app(sys.argv[1:])"
)


def prefill_workload(block: int, requests: int, length: int) -> Workload:
    import random

    shapes = [(f"p{i}", 0, length) for i in range(requests)]
    return assign_pages(shapes, block, random.Random(0), spare_factor=1)


def measure(torch: Any, plan: SmokePlan, workload: Workload, kind: str) -> list[str]:
    device = torch.device("cuda")
    batch: BatchSpec = workload.batch
    generator = torch.Generator(device=device).manual_seed(0)
    data = make_request_data(torch, batch, plan, device, generator)
    cache = allocate_cache(torch, plan, workload.num_pages, device, generator)
    queries = data.flat_queries(torch)
    scale = 1.0 / math.sqrt(plan.head_size)
    if plan.backend == "FLASH_ATTN":
        provider = choose_provider(plan, torch).provider
        step: Any = FlashAttentionStep(torch, provider, plan, batch, device)
        fill_cache(torch, cache, batch, data, step.slot_mapping)
        tool_launch = step.timed_launches(queries, cache)[0].launch
        call = step.calls["attention"]
        from selector.smoke.providers import materialize

        arguments = materialize(call.arguments(), {
            **step._tensors(), "query": queries, "key_cache": cache.key,
            "value_cache": cache.value, "out": torch.empty_like(queries), "sinks": None}, torch)

        def raw() -> object:  # the provider's entry point with the arguments prepared once
            return provider.call(call.entry_point, arguments)
        label = provider.label
        del scale
    else:
        flashinfer = import_flashinfer()
        wrappers = FlashInferWrappers(torch, flashinfer, plan, device)
        step = FlashInferStep(torch, wrappers, plan, batch, device)
        step.plan_kernels()
        fill_cache(torch, cache, batch, data, step.slot_mapping, token_order=step.token_order)
        launches = step.timed_launches(queries, cache)
        tool_launch = launches[0].launch
        out = torch.empty_like(queries)
        wrapper = wrappers.decode if kind == "decode" else wrappers.prefill

        def raw() -> object:
            return wrapper.run(queries, cache.storage, out=out)
        kernel = "decode" if kind == "decode" else wrappers.prefill_backend
        label = f"FlashInfer {flashinfer.__version__} ({kernel})"
    raw_before = time_loop(torch, raw, warmup=5, repeats=REPEATS)
    tool = time_kernel(torch, tool_launch, warmup=5, repeats=REPEATS)
    raw_after = time_loop(torch, raw, warmup=5, repeats=REPEATS)
    raw_us = min(raw_before, raw_after)
    host_us = host_time(torch, raw)
    graph_us = graph_loop(torch, raw)
    if kind == "decode":
        work = kv_read_bytes(batch, num_kv_heads=plan.num_kv_heads, head_size=plan.head_size,
                             dtype=plan.dtype)
        unit, scale_to = "TB/s", 1e12
    else:
        work = attention_flops(batch, num_q_heads=plan.num_q_heads, head_size=plan.head_size,
                               sliding_window=None)
        unit, scale_to = "TFLOP/s", 1e12
    tool_rate = work / (tool.median_us * 1e-6) / scale_to
    raw_rate = work / (raw_us * 1e-6) / scale_to
    graph_rate = work / (graph_us * 1e-6) / scale_to if graph_us else float("nan")
    return [f"{kind:7s} {label:40s} tool {tool.median_us:7.1f} us {tool_rate:7.2f} {unit} | "
            f"raw loop {raw_before:7.1f}/{raw_after:7.1f} us {raw_rate:7.2f} {unit} | "
            f"tool/raw {tool_rate / raw_rate:5.3f} | graph loop {graph_us:7.1f} us "
            f"{graph_rate:7.2f} {unit} tool/graph {tool_rate / graph_rate:5.3f} | "
            f"host {host_us:7.1f} us/launch"]


def host_time(torch: Any, launch: Any, count: int = 20) -> float:
    """Host microseconds to enqueue one launch (no synchronisation inside the loop)."""
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(count):
        launch()
    elapsed = time.perf_counter() - started
    torch.cuda.synchronize()
    return elapsed / count * 1e6


def graph_loop(torch: Any, launch: Any, per_graph: int = 10, replays: int = 5) -> float:
    """GPU microseconds per launch with host overhead removed: launches replayed from a graph."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            launch()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(per_graph):
                launch()
        graph.replay()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        return 1000.0 * float(start.elapsed_time(end)) / (per_graph * replays)
    except Exception as error:
        print(f"graph loop unavailable: {type(error).__name__}: {error}"[:200], flush=True)
        return 0.0


def verdict_times() -> list[str]:
    lines = []
    plan_file = REPO / "examples" / "smoke-plan-h200.json"
    for attempt in ("first (warms the FA4 disk cache)", "warm JIT cache", "warm JIT cache again"):
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", CLI, "smoke-plan", str(plan_file)],
                                cwd=REPO, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - started
        lines.append(f"verdict {attempt}: exit {result.returncode}, {elapsed:.1f} s wall")
        if attempt == "warm JIT cache again":
            lines.append(result.stdout)
        if result.returncode:
            lines.append(result.stderr[-3000:])
    return lines


def main() -> None:
    import torch

    base = {"num_q_heads": 32, "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16",
            "kernel_block_size": 16, "kv_layout": "NHD"}
    decode = uniform_decode_batch(16, 128, 4096)
    prefill = prefill_workload(16, 4, 4096)
    lines = [f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}"]
    catalog = load_catalog()
    for backend in ("FLASH_ATTN", "FLASHINFER"):
        plan = bind_plan(catalog, backend=backend, **base)
        for kind, workload in (("decode", decode), ("prefill", prefill)):
            try:
                lines += measure(torch, plan, workload, kind)
            except Exception as error:  # report and go on: one failure must not hide the rest
                lines.append(f"{kind} {backend}: {type(error).__name__}: {error}"[:400])
            print(lines[-1], flush=True)
            torch.cuda.empty_cache()
    if "--skip-verdict" not in sys.argv:
        lines += verdict_times()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
