"""The H200 run recorded in tests/fixtures/bench/h200-llama.json (Llama GQA 32/8, head 128,
bf16; FA4 4.0.0b36 and FlashInfer 0.6.13; torch 2.11): the file re-judged on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from selector.bench.measurements import load_measurements
from selector.bench.policy import decide, decide_for_deployment

RECORDED = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "bench" / "h200-llama.json"
# raw CUDA-event loops run in the same command (benchmarks/bench_rawloop.py), decode 128 x 4k
RAW_LOOPS_US = {"FLASH_ATTN": {"plain": 594.3, "graph": 614.6},
                "FLASHINFER": {"plain": 754.9, "graph": 762.5}}


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
    assert ceilings.copy_tbps == pytest.approx(4.25, abs=0.05)
    assert ceilings.matmul_tflops == pytest.approx(789, abs=10)
    for result in measurements.results:
        achieved = result.achieved(ceilings)
        assert achieved is not None and achieved.fraction_of_roofline is not None
        assert achieved.fraction_of_roofline <= 1.0
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
    assert totals["FLASHINFER"] / totals["FLASH_ATTN"] == pytest.approx(1.18, abs=0.02)


def test_batch_one_long_context_prefers_flashinfer() -> None:
    measurements = load_measurements(RECORDED)
    decision = decide(measurements, current="FLASH_ATTN", valid=["FLASH_ATTN", "FLASHINFER"],
                      shapes=["decode 1x4k", "decode 1x16k"])
    assert decision.chosen == "FLASHINFER" and decision.significant
    assert decision.flags == ("--attention-backend", "FLASHINFER")
    assert decision.speedup is not None and decision.speedup > 4
    priority = decide(measurements, current="FLASH_ATTN", valid=["FLASH_ATTN", "FLASHINFER"],
                      shapes=["decode 1x4k", "decode 1x16k"], policy="priority")
    assert priority.chosen == "FLASH_ATTN" and priority.fastest == "FLASHINFER"
