"""The decode-graph harnesses on the CPU with the kernel doubles (no capture: the
buffers are loaded with new batches and the launch compared with the reference)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import paged_torch  # noqa: E402

from selector.catalog import load_catalog  # noqa: E402
from selector.smoke.graphs import GRAPH_REQUESTS, _FlashAttentionHarness, _FlashInferHarness  # noqa: E402
from selector.smoke.plan import bind_plan  # noqa: E402
from selector.smoke.reference import compare, reference_attention  # noqa: E402
from selector.smoke.tensors import allocate_cache, make_request_data  # noqa: E402
from selector.smoke.workload import decode_batch  # noqa: E402

CATALOG = load_catalog()

CPU = torch.device("cpu")


@pytest.mark.parametrize("backend", ["FLASH_ATTN", "FLASHINFER"])
@pytest.mark.parametrize("extra", [{}, {"kv_cache_dtype": "fp8", "k_scale": 0.5, "v_scale": 2.0},
                                   {"sliding_window": 40, "logits_soft_cap": 8.0}])
def test_harness_reloads_and_matches(backend: str, extra: dict[str, object]) -> None:
    plan = bind_plan(CATALOG, **{
        "backend": backend, "fa_version": 3 if backend == "FLASH_ATTN" else None,
        "kernel_block_size": 16, "num_q_heads": 8, "num_kv_heads": 2, "head_size": 32,
        "cudagraph_mode": "FULL_AND_PIECEWISE", **extra})
    generator = torch.Generator().manual_seed(0)
    harness: _FlashAttentionHarness | _FlashInferHarness | None = None
    for seed in (7, 8):
        workload = decode_batch(16, seed, num_requests=GRAPH_REQUESTS)
        if harness is None:
            cache = allocate_cache(torch, plan, workload.num_pages, CPU, generator)
            harness = (_FlashInferHarness(torch, paged_torch.FakeFlashInfer, plan, cache, CPU)
                       if backend == "FLASHINFER" else
                       _FlashAttentionHarness(torch, paged_torch.FAKE_FA, plan, cache, CPU))
            harness.sinks = None
        data = make_request_data(torch, workload.batch, plan, CPU, generator)
        assert harness.load(workload, data) == []
        output = harness.launch()
        expected = reference_attention(
            torch, workload.batch, data, num_q_heads=8, num_kv_heads=2, head_size=32,
            sliding_window=plan.sliding_window, logits_soft_cap=plan.logits_soft_cap)
        if isinstance(harness, _FlashInferHarness):
            expected = expected[harness.order]
        assert compare(torch, output, expected, atol=6e-2, rtol=6e-2).passed
