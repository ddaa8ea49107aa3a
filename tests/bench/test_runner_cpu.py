"""The whole bench pipeline on the CPU with the kernel doubles (skipped without torch):
targets -> data and reference -> builder timing -> cache -> output check -> timing ->
measurements file -> policy, table and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from cpu_env import cpu_environment
from rich.console import Console

from selector.bench.measurements import load_measurements
from selector.bench.plot import render_svg
from selector.bench.policy import decide_for_deployment
from selector.bench.render import render_bench, render_decision
from selector.bench.runner import run_bench, use_graph
from selector.bench.targets import BenchGroup, BenchTargets
from selector.bench.workload import parse_workload
from selector.catalog import load_catalog
from selector.smoke.plan import bind_plan

CATALOG = load_catalog()

SMALL = {"num_q_heads": 8, "num_kv_heads": 2, "head_size": 32, "dtype": "bfloat16",
         "kernel_block_size": 16, "cudagraph_mode": "FULL_AND_PIECEWISE"}
WORKLOAD = parse_workload({
    "decode": {"batch_sizes": [1, 3], "context_lengths": [40]},
    "prefill": {"lengths": [50]},
    "mixed": {"decodes": 2, "decode_context": 37, "prefill_lengths": [20]},
    "settings": {"min_repeats": 3, "max_repeats": 6, "warmup": 1, "builder_repeats": 2}})


def targets(**plan_changes: object) -> BenchTargets:
    plans = (bind_plan(CATALOG, **{"name": "g FLASH_ATTN", "backend": "FLASH_ATTN",
                                       **SMALL, **plan_changes}),
             bind_plan(CATALOG, **{"name": "g FLASHINFER", "backend": "FLASHINFER",
                                       "kv_layout": "HND", **SMALL, **plan_changes}))
    group = BenchGroup(name="g", layers=1, selected="FLASH_ATTN",
                       valid=("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"), plans=plans,
                       unmeasured={"TRITON_ATTN": "no kernel runner"})
    return BenchTargets(source="g.yaml", engine="vllm==0.33.0", device="H200", mode="auto",
                        groups=(group,))


def test_pipeline_on_cpu(tmp_path: Path) -> None:
    measurements = run_bench(targets(), WORKLOAD, environment=cpu_environment(), catalog=load_catalog())
    assert measurements.passed, measurements.failures()
    assert len(measurements.results) == 2 * 4
    for result in measurements.results:
        assert result.check is not None and result.check.passed
        assert result.check.max_abs is not None and result.check.max_abs < 0.05
        assert len(result.samples_us) >= 3 and len(result.builder_us) == 2
        assert result.work["flops"] > 0 and result.l2_flush
    decode = [r for r in measurements.results if r.shape["kind"] == "decode"]
    # FULL_AND_PIECEWISE replays decodes from a graph; the CPU double cannot: said so
    assert all(any("CUDA-graph capture failed" in n for n in r.notes) for r in decode)
    assert measurements.copy_peak is not None and measurements.matmul_peak is not None
    assert measurements.deployment.groups[0].unmeasured == {"TRITON_ATTN": "no kernel runner"}
    path = tmp_path / "bench.json"
    path.write_text(measurements.dumps())
    again = load_measurements(path)
    assert json.loads(again.dumps()) == json.loads(measurements.dumps())
    decision = decide_for_deployment(again, policy="fastest")
    assert decision.chosen in ("FLASH_ATTN", "FLASHINFER")
    console = Console(width=200, record=True)
    console.print(render_bench(again))
    console.print(render_decision(decision))
    text = console.export_text()
    assert "mixed 2x37+20" in text and "--attention-backend" in text
    assert render_svg(again).startswith("<svg")


def test_a_missing_library_skips_its_backend_only() -> None:
    measurements = run_bench(targets(), WORKLOAD,
                             environment=cpu_environment(flashinfer=False), catalog=load_catalog())
    assert measurements.backends() == ["FLASH_ATTN"]
    assert "flashinfer-python" in measurements.deployment.groups[0].unmeasured["FLASHINFER"]


def test_a_kernel_error_is_recorded_not_raised() -> None:
    environment = cpu_environment()

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("kernel exploded")

    import dataclasses

    assert environment.flash_attention is not None
    environment.flash_attention = dataclasses.replace(
        environment.flash_attention, entries={"flash_attn_varlen_func": broken,
                                              "get_scheduler_metadata": broken})
    measurements = run_bench(targets(), WORKLOAD, environment=environment, catalog=load_catalog())
    assert not measurements.passed
    failures = [r for r in measurements.results if not r.ok]
    assert {r.backend for r in failures} == {"FLASH_ATTN"}
    assert "kernel exploded" in (failures[0].error or "")


def test_graph_mode_follows_the_plans_cudagraph_mode() -> None:
    shapes = {s.kind: s for s in WORKLOAD.shapes()}
    plan = targets().plans[0]
    assert use_graph(plan, shapes["decode"], "auto")
    assert not use_graph(plan, shapes["prefill"], "auto")
    assert not use_graph(plan, shapes["mixed"], "auto")
    full = plan.model_copy(update={"cudagraph_mode": "FULL"})
    assert use_graph(full, shapes["mixed"], "auto")
    assert not use_graph(plan.model_copy(update={"cudagraph_mode": "PIECEWISE"}),
                         shapes["decode"], "auto")
    assert use_graph(plan, shapes["prefill"], "on") and not use_graph(plan, shapes["decode"],
                                                                       "off")
