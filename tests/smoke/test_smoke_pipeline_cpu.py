"""The smoke pipeline on CPU with torch doubles of the kernels (skipped without torch).

Everything but the real kernels runs -- the runner itself: the contract's calls, cache
allocation in each backend's shape and layout, K/V writes through slot_mapping (fp8 with
per-tensor scales), FlashInfer's reorder and CSR plans, the invariant guard, the float32
reference and the comparison. Injected kernel bugs must make the smoke FAIL.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

import paged_torch  # noqa: E402  (needs torch; lives beside this file)

from selector.catalog import load_catalog  # noqa: E402
from selector.smoke.invariants import check_metadata  # noqa: E402
from selector.smoke.plan import (  # noqa: E402
    SmokeOptions,
    SmokePlan,
    bind_plan,
)
from selector.smoke.reference import compare, reference_attention, tolerance_for  # noqa: E402
from selector.smoke.runner import run_smoke  # noqa: E402
from selector.smoke.steps import FlashAttentionStep, FlashInferStep, FlashInferWrappers  # noqa: E402
from selector.smoke.tensors import allocate_cache, fill_cache, make_request_data  # noqa: E402
from selector.smoke.workload import decode_batch, mixed_batch, uniform_decode_batch  # noqa: E402

CATALOG = load_catalog()

CPU = torch.device("cpu")
OPTIONS = SmokeOptions(measure=False, layers=1)


def make_plan(backend: str, layout: str, block: int, **changes: object) -> SmokePlan:
    values: dict[str, object] = {
        "backend": backend, "kernel_block_size": block, "kv_layout": layout,
        "num_q_heads": 8, "num_kv_heads": 2, "head_size": 32, "dtype": "bfloat16"}
    if backend == "FLASH_ATTN":
        values["fa_version"] = 3
    values.update(changes)
    return bind_plan(CATALOG, **values)


def smoke(plan: SmokePlan) -> object:
    return run_smoke([plan], OPTIONS, machine=paged_torch.cpu_machine(),
                     raise_on_failure=False)


def run_step(plan: SmokePlan, block: int) -> tuple[object, object]:
    workload = mixed_batch(block, seed=3)
    generator = torch.Generator().manual_seed(1)
    data = make_request_data(torch, workload.batch, plan, CPU, generator)
    cache = allocate_cache(torch, plan, workload.num_pages, CPU, generator)
    step: FlashAttentionStep | FlashInferStep
    if plan.backend == "FLASH_ATTN":
        step = FlashAttentionStep(torch, paged_torch.FAKE_FA, plan, workload.batch, CPU)
    else:
        wrappers = FlashInferWrappers(torch, paged_torch.FakeFlashInfer, plan, CPU)
        step = FlashInferStep(torch, wrappers, plan, workload.batch, CPU)
        step.plan_kernels()
    fill_cache(torch, cache, workload.batch, data, step.slot_mapping,
               token_order=step.token_order)
    assert check_metadata(workload.batch, step.device_metadata(),
                          cache_block_size=cache.block_size) == []
    output = step.run(data.flat_queries(torch), cache)
    expected = reference_attention(
        torch, workload.batch, data, num_q_heads=plan.num_q_heads,
        num_kv_heads=plan.num_kv_heads, head_size=plan.head_size,
        sliding_window=plan.sliding_window, logits_soft_cap=plan.logits_soft_cap)
    return output, expected


@pytest.mark.parametrize("backend", ["FLASH_ATTN", "FLASHINFER"])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("block", [16, 64])
def test_step_matches_reference(backend: str, layout: str, block: int) -> None:
    plan = make_plan(backend, layout, block)
    output, expected = run_step(plan, block)
    atol, rtol = tolerance_for("bfloat16")
    result = compare(torch, output, expected, atol=atol, rtol=rtol)
    assert result.passed, result


@pytest.mark.parametrize("backend", ["FLASH_ATTN", "FLASHINFER"])
def test_sliding_window_and_soft_cap(backend: str) -> None:
    plan = make_plan(backend, "HND", 16, sliding_window=20, logits_soft_cap=2.0)
    output, expected = run_step(plan, 16)
    assert compare(torch, output, expected, atol=2e-2, rtol=2e-2).passed
    unwindowed = make_plan(backend, "HND", 16)
    _, without_window = run_step(unwindowed, 16)
    # the window and the cap must actually change the answer on this batch
    assert not compare(torch, expected, without_window, atol=2e-2, rtol=2e-2).passed


def test_kv_written_through_slots_reads_back_per_request() -> None:
    for backend in ("FLASH_ATTN", "FLASHINFER"):
        for layout in ("NHD", "HND"):
            plan = make_plan(backend, layout, 16)
            workload = mixed_batch(16, seed=5)
            generator = torch.Generator().manual_seed(2)
            data = make_request_data(torch, workload.batch, plan, CPU, generator)
            cache = allocate_cache(torch, plan, workload.num_pages, CPU, generator)
            slots = torch.tensor(FlashAttentionStep(
                torch, paged_torch.FAKE_FA, plan, workload.batch, CPU
            ).metadata.common.slot_mapping)
            fill_cache(torch, cache, workload.batch, data, slots)
            for request, keys, values in zip(workload.batch.requests, data.keys, data.values,
                                             strict=True):
                got_k, got_v = cache.gather(torch, request.block_ids, request.seq_len)
                assert torch.equal(got_k, keys) and torch.equal(got_v, values)


def test_a_wrong_reorder_is_caught_by_the_reference() -> None:
    plan = make_plan("FLASHINFER", "NHD", 16)
    workload = mixed_batch(16, seed=3)
    generator = torch.Generator().manual_seed(1)
    data = make_request_data(torch, workload.batch, plan, CPU, generator)
    cache = allocate_cache(torch, plan, workload.num_pages, CPU, generator)
    wrappers = FlashInferWrappers(torch, paged_torch.FakeFlashInfer, plan, CPU)
    step = FlashInferStep(torch, wrappers, plan, workload.batch, CPU)
    step.plan_kernels()
    fill_cache(torch, cache, workload.batch, data, step.slot_mapping,
               token_order=step.token_order)
    step.inverse = step.order  # forget to undo the permutation
    output = step.run(data.flat_queries(torch), cache)
    expected = reference_attention(torch, workload.batch, data, num_q_heads=8, num_kv_heads=2,
                                   head_size=32, sliding_window=None, logits_soft_cap=None)
    assert not compare(torch, output, expected, atol=2e-2, rtol=2e-2).passed


def test_guard_sees_a_corrupted_device_table() -> None:
    plan = make_plan("FLASH_ATTN", "NHD", 16)
    workload = mixed_batch(16, seed=3)
    step = FlashAttentionStep(torch, paged_torch.FAKE_FA, plan, workload.batch, CPU)
    step.block_table[1, 0] = step.block_table[0, 0]
    found = check_metadata(workload.batch, step.device_metadata())
    assert found and found[0].invariant == 5


def test_workloads_are_valid_and_stable() -> None:
    for block in (1, 16, 64, 128):
        workload = mixed_batch(block, seed=0)
        ids = [r.id for r in workload.batch.requests]
        assert ids == ["prefill", "decode-full-page", "extend", "decode"]
        extend = workload.batch.requests[2]
        assert extend.context_len // block != (extend.seq_len - 1) // block  # crosses a page
        assert workload.batch.requests[1].seq_len % block == 0  # full last page
        pages = [p for r in workload.batch.requests for p in r.block_ids]
        assert 0 not in pages and len(set(pages)) == len(pages)
        assert pages != sorted(pages)
    sizes = {decode_batch(16, seed).num_pages for seed in range(5)}
    assert len(sizes) == 1
    bench = uniform_decode_batch(16, 4, 64)
    assert [r.seq_len for r in bench.batch.requests] == [64] * 4
    assert dataclasses.asdict(bench)["num_pages"] == 17


# ---- the runner end to end on the CPU, and injected kernel bugs it must catch

SMALL = {"num_q_heads": 8, "num_kv_heads": 2, "head_size": 32}
PLANS = {
    "window": make_plan("FLASH_ATTN", "NHD", 16, sliding_window=128),
    "softcap": make_plan("FLASHINFER", "HND", 16, logits_soft_cap=50.0),
    "sinks": make_plan("FLASH_ATTN", "NHD", 16, has_sinks=True),
    "fp8-fa": make_plan("FLASH_ATTN", "NHD", 16, kv_cache_dtype="fp8", k_scale=0.5,
                        v_scale=2.0),
    "fp8-fi": make_plan("FLASHINFER", "NHD", 16, kv_cache_dtype="fp8_e4m3", k_scale=0.5,
                        v_scale=2.0),
    "mla": bind_plan(CATALOG, backend="FLASHMLA", kernel_block_size=64, num_q_heads=4, num_kv_heads=1,
                     head_size=96, kv_lora_rank=64, qk_rope_head_dim=32,
                     softmax_scale=0.1),
    "mla-fa": bind_plan(CATALOG, backend="FLASH_ATTN_MLA", fa_version=3, kernel_block_size=16,
                        num_q_heads=4, num_kv_heads=1, head_size=96, kv_lora_rank=64,
                        qk_rope_head_dim=32),
}


@pytest.fixture(autouse=True)
def _no_bugs() -> object:
    paged_torch.BUGS.clear()
    yield
    paged_torch.BUGS.clear()


@pytest.mark.parametrize("name", sorted(PLANS))
def test_runner_passes_correct_kernels(name: str) -> None:
    report = smoke(PLANS[name])
    assert report.status == "PASS", report.failures()  # type: ignore[attr-defined]


BUG_PLANS = {
    "ignore_window": ["window"],
    "ignore_softcap": ["softcap"],
    "ignore_sinks": ["sinks"],
    "wrong_page": ["window", "softcap", "mla"],
    "drop_key": ["window", "softcap", "sinks", "mla-fa"],
    "wrong_scale": ["fp8-fa", "fp8-fi"],
}


@pytest.mark.parametrize(("bug", "name"), [(bug, name) for bug, names in BUG_PLANS.items()
                                           for name in names])
def test_injected_kernel_bug_fails_the_smoke(bug: str, name: str) -> None:
    paged_torch.BUGS.add(bug)
    report = smoke(PLANS[name])
    assert report.status == "FAIL"  # type: ignore[attr-defined]


def test_long_requests_exceed_the_window_and_the_split_span() -> None:
    from selector.smoke.dry_run import smoke_batch

    plan = PLANS["window"]
    longest = max(r.context_len for r in smoke_batch(plan, 0).requests)
    assert longest > 128 and longest > 2 * 16 * 32


def test_a_substituted_kernel_is_not_a_pass() -> None:
    from selector.smoke.providers import ProviderChoice

    machine = paged_torch.cpu_machine()
    machine.choose = lambda plan: ProviderChoice(paged_torch.FAKE_FA, "ran FA4 instead")
    report = run_smoke([make_plan("FLASH_ATTN", "NHD", 16)], OPTIONS, machine=machine,
                       raise_on_failure=False)
    assert report.status == "SUBSTITUTED" and report.passed
