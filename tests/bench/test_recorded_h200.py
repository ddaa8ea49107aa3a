"""The H200 run recorded in tests/fixtures/bench/h200-llama.json (Llama GQA 32/8, head 128,
bf16; vLLM 0.25.1's FA3 (_vllm_fa3_C, AOT schedule, 32 splits under graphs) and FlashInfer
0.6.13 with vLLM's tensor-core decode wrapper; torch 2.11): the file re-judged on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from selector.bench.measurements import load_measurements
from selector.bench.policy import decide, decide_for_deployment

RECORDED = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "bench" / "h200-llama.json"
# raw CUDA-event loops run in the same command (benchmarks/bench_rawloop.py), decode 128 x 4k
RAW_LOOPS_US = {"FLASH_ATTN": {"plain": 496.5, "graph": 494.5},
                "FLASHINFER": {"plain": 494.3, "graph": 493.9}}
READ_OVER_COPY = 1.06
"""A decode only reads the KV cache; the copy ceiling moves bytes read + written, so a
long-context decode reads up to ~5% faster than the copy's rate (4.45 vs 4.23 TB/s)."""


def median(backend: str, shape: str) -> float:
    for result in load_measurements(RECORDED).results:
        if result.backend == backend and result.shape_name == shape:
            assert result.summary is not None
            return result.summary.median
    raise KeyError((backend, shape))


def test_every_kernel_ran_and_matched_the_reference() -> None:
    measurements = load_measurements(RECORDED)
    assert measurements.passed and len(measurements.results) == 22
    assert all(r.check is not None and r.check.passed for r in measurements.results)
    assert measurements.device.name == "NVIDIA H200"
    ceilings = measurements.ceilings
    assert ceilings.copy_tbps == pytest.approx(4.23, abs=0.05)
    assert ceilings.matmul_tflops == pytest.approx(781, abs=10)
    for result in measurements.results:
        achieved = result.achieved(ceilings)
        assert achieved is not None and achieved.fraction_of_roofline is not None
        assert achieved.fraction_of_roofline <= READ_OVER_COPY
        assert result.timing_mode == ("graph" if result.shape["kind"] == "decode" else "eager")


@pytest.mark.parametrize("backend", ["FLASH_ATTN", "FLASHINFER"])
def test_decode_128x4k_within_5_percent_of_the_raw_loops(backend: str) -> None:
    tool = median(backend, "decode 128x4k")
    for loop in ("plain", "graph"):
        assert tool / RAW_LOOPS_US[backend][loop] == pytest.approx(1.0, abs=0.05)


def test_whole_workload_keeps_vllms_choice() -> None:
    decision = decide_for_deployment(load_measurements(RECORDED), policy="fastest")
    assert decision.current == decision.chosen == "FLASH_ATTN"
    assert decision.speedup == pytest.approx(1.0)
    totals = {s.backend: s.total_us for s in decision.scores}
    assert totals["FLASHINFER"] / totals["FLASH_ATTN"] == pytest.approx(1.01, abs=0.01)


def test_batch_one_long_context_is_a_tie_with_vllms_fa3() -> None:
    """With vLLM's own call (FA3's ahead-of-time schedule and splits) batch-1 decode is
    no longer a FlashInfer win (the FA4 num_splits=1 call made it look > 4x slower)."""
    measurements = load_measurements(RECORDED)
    decision = decide(measurements, current="FLASH_ATTN", valid=["FLASH_ATTN", "FLASHINFER"],
                      shapes=["decode 1x4k", "decode 1x16k"])
    assert decision.chosen == "FLASH_ATTN" and not decision.significant
    assert median("FLASH_ATTN", "decode 1x16k") == pytest.approx(
        median("FLASHINFER", "decode 1x16k"), rel=0.05)
