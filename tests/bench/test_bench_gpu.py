"""The bench on a real GPU (marked ``gpu``; skipped without one): Llama GQA 32/8, head 128,
bf16, the two backends on small shapes, outputs checked, timings sane."""

from __future__ import annotations

from pathlib import Path

import pytest

from selector.bench.runner import run_bench
from selector.bench.workload import parse_workload
from selector.catalog import load_catalog
from selector.errors import CannotRunHereError
from selector.pipeline.bench import bench_targets

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]


def test_both_backends_measured_and_checked() -> None:
    targets = bench_targets(REPO / "tests" / "fixtures" / "smoke" / "llama-h200.yaml", catalog=load_catalog())
    workload = parse_workload({"decode": {"batch_sizes": [16], "context_lengths": [2048]},
                               "prefill": {"lengths": [1024]},
                               "settings": {"min_repeats": 10, "max_repeats": 40}})
    try:
        measurements = run_bench(targets, workload, catalog=load_catalog())
    except CannotRunHereError as error:
        pytest.fail(f"cannot run on this GPU machine: {error}")
    assert measurements.passed, measurements.failures()
    assert set(measurements.backends()) == {"FLASH_ATTN", "FLASHINFER"}
    ceilings = measurements.ceilings
    assert ceilings.copy_tbps and 0.5 < ceilings.copy_tbps < 20
    assert ceilings.matmul_tflops and 50 < ceilings.matmul_tflops < 5000
    for result in measurements.results:
        achieved = result.achieved(ceilings)
        assert achieved is not None and achieved.fraction_of_roofline is not None
        assert 0 < achieved.fraction_of_roofline <= 1.05  # nothing beats the hardware
        if result.shape["kind"] == "decode":
            assert result.timing_mode == "graph"
