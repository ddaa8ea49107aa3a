"""Statistics of timing samples and the roofline arithmetic (pure Python)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from selector.bench.roofline import (
    Ceilings,
    Geometry,
    achieved,
    copy_bytes,
    gemm_flops,
    shape_work,
    visible_pairs,
)
from selector.bench.stats import differ, noise_label, summarize
from selector.smoke.metrics import attention_flops, kv_read_bytes
from selector.smoke.workload import uniform_decode_batch

LLAMA = Geometry(32, 8, 128, "bfloat16")


def test_quartiles_match_numpy_type_7() -> None:
    summary = summarize([4.0, 1.0, 3.0, 2.0])
    assert (summary.q1, summary.median, summary.q3) == (1.75, 2.5, 3.25)
    one = summarize([7.0])
    assert (one.q1, one.median, one.q3, one.iqr) == (7.0, 7.0, 7.0, 0.0)
    with pytest.raises(ValueError):
        summarize([])


def test_summary_median_iqr_and_outliers() -> None:
    samples = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 180.0, 100.2]
    summary = summarize(samples)
    assert summary.median == statistics.median(samples)
    assert summary.outliers == (6,)
    assert summary.n == 8 and summary.maximum == 180.0
    assert summary.rel_iqr < 0.02 and summary.noise == "low"
    assert math.isclose(summary.ci_half_width, 1.57 * summary.iqr / math.sqrt(8))
    assert summary.to_json()["outliers"] == 1


def test_noise_labels_and_stability() -> None:
    assert [noise_label(x) for x in (0.01, 0.03, 0.2)] == ["low", "moderate", "high"]
    quiet = summarize([100.0 + 0.01 * i for i in range(40)])
    noisy = summarize([100.0 * (1 + 0.3 * (i % 2)) for i in range(6)])
    assert quiet.stable(0.01) and not noisy.stable(0.01)


def test_single_sample_and_bad_input() -> None:
    one = summarize([5.0])
    assert one.median == 5.0 and one.iqr == 0.0 and one.stdev == 0.0
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, math.inf])


def test_differ_needs_a_gap_beyond_noise_and_one_percent() -> None:
    a = summarize([100.0, 100.1, 99.9] * 10)
    b = summarize([100.4, 100.5, 100.3] * 10)
    c = summarize([120.0, 120.1, 119.9] * 10)
    assert not differ(a, b)  # 0.4%: below the 1% floor
    assert differ(a, c)


@given(st.lists(st.floats(1e-3, 1e6), min_size=1, max_size=60))
def test_summary_invariants(samples: list[float]) -> None:
    summary = summarize(samples)
    assert summary.minimum <= summary.q1 <= summary.median <= summary.q3 <= summary.maximum
    assert all(0 <= i < len(samples) for i in summary.outliers)


@pytest.mark.parametrize(("context", "query", "window"), [
    (0, 1, None), (0, 8192, None), (4095, 1, None), (100, 37, None), (0, 50, 16),
    (10, 50, 16), (30, 5, 16), (15, 1, 16), (0, 3, 100)])
def test_visible_pairs_closed_form_matches_the_sum(context: int, query: int,
                                                   window: int | None) -> None:
    expected = sum(min(p + 1, window) if window else p + 1
                   for p in range(context, context + query))
    assert visible_pairs(context, query, window) == expected


def test_decode_bytes_agree_with_the_smoke_metrics() -> None:
    batch = uniform_decode_batch(16, 128, 4096).batch
    requests = [(r.context_len, r.query_len) for r in batch.requests]
    work = shape_work(requests, LLAMA)
    assert work.kv_bytes == kv_read_bytes(batch, num_kv_heads=8, head_size=128,
                                          dtype="bfloat16")
    assert work.kv_bytes == 128 * 4096 * 2 * 8 * 128 * 2  # 2.15 GB
    assert work.flops == attention_flops(batch, num_q_heads=32, head_size=128,
                                         sliding_window=None)


def test_prefill_causal_flops() -> None:
    work = shape_work([(0, 8192)], LLAMA)
    assert work.flops == 4 * (8192 * 8193 // 2) * 32 * 128
    assert work.kv_bytes == 8192 * 2 * 8 * 128 * 2


def test_sliding_window_reads_only_the_window() -> None:
    work = shape_work([(9999, 1)], Geometry(8, 8, 64, sliding_window=128))
    assert work.kv_bytes == 128 * 2 * 8 * 64 * 2


def test_roofline_floor_and_fractions() -> None:
    ceilings = Ceilings(copy_tbps=4.0, matmul_tflops=800.0, catalog_tbps=4.8,
                        catalog_tflops=989.0)
    decode = shape_work([(4095, 1)] * 128, LLAMA)
    assert ceilings.bound(decode) == "memory"
    floor = ceilings.floor_us(decode)
    assert floor == pytest.approx(decode.bytes / 4e12 * 1e6)
    result = achieved(decode, 2 * floor, ceilings)
    assert result.fraction_of_roofline == pytest.approx(0.5)
    assert result.fraction_of_bandwidth == pytest.approx(0.5)
    assert result.kv_fraction_of_bandwidth is not None
    assert result.kv_fraction_of_bandwidth < result.fraction_of_bandwidth
    prefill = shape_work([(0, 8192)], LLAMA)
    assert ceilings.bound(prefill) == "compute"
    assert ceilings.floor_us(prefill) == pytest.approx(prefill.flops / 800e12 * 1e6)
    assert achieved(prefill, 1000.0, ceilings).tflops == pytest.approx(prefill.flops / 1e-3 / 1e12)


def test_catalog_ceilings_are_a_fallback_only() -> None:
    measured = Ceilings(4.2, 790.0, 4.8, 989.0)
    catalog_only = Ceilings(None, None, 4.8, 989.0)
    assert measured.source == "measured" and measured.bandwidth_tbps == 4.2
    assert catalog_only.source == "catalog" and catalog_only.bandwidth_tbps == 4.8
    assert Ceilings(None, None).floor_us(shape_work([(0, 8)], LLAMA)) is None


def test_peak_work_counts() -> None:
    assert copy_bytes(1 << 29, 2) == 2 << 30  # 1 GiB of bf16 read and written
    assert gemm_flops(8192, 8192, 8192) == 2 * 8192 ** 3
    with pytest.raises(ValueError):
        achieved(shape_work([(0, 8)], LLAMA), 0.0, Ceilings(1.0, 1.0))
