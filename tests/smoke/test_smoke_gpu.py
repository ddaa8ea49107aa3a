"""Real kernels on a GPU: Llama-style GQA 32/8, head 128, bf16 (marked ``gpu``).

FlashInfer compiles each kernel variant once (prefill ~90 s on an H200), so every test
reuses one head size and dtype, and the sliding-window test is the only extra variant.
"""

from __future__ import annotations

from typing import Any

import pytest

from selector.errors import CannotRunHereError
from selector.smoke import SmokeOptions, SmokePlan, SmokeReport, run_smoke

pytestmark = pytest.mark.gpu

LLAMA = {"num_q_heads": 32, "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16"}
OPTIONS = SmokeOptions(repeats=10, warmup=2)


def plan(backend: str, block: int, layout: str, **changes: Any) -> SmokePlan:
    values: dict[str, Any] = {"name": f"{backend.lower()}-p{block}-{layout}",
                              "backend": backend, "kernel_block_size": block,
                              "kv_layout": layout, **LLAMA}
    if backend == "FLASH_ATTN":
        values["fa_version"] = 4
    values.update(changes)
    return SmokePlan.model_validate(values)


def run(plans: list[SmokePlan], options: SmokeOptions = OPTIONS) -> SmokeReport:
    try:
        report = run_smoke(plans, options, raise_on_failure=False)
    except CannotRunHereError as error:
        pytest.skip(str(error))
    failures = report.failures()
    assert report.passed, "\n".join(failures)
    return report


def check_names(report: SmokeReport) -> list[str]:
    return [check.name for group in report.groups for check in group.checks]


@pytest.mark.parametrize("block", [16, 64])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_llama_gqa_both_backends_agree(block: int, layout: str) -> None:
    report = run([plan("FLASH_ATTN", block, layout), plan("FLASHINFER", block, layout)])
    names = check_names(report)
    assert any(name.startswith("parity vs flash_attn") for name in names)
    assert sum("vs fp32 reference" in name for name in names) >= 4
    for group in report.groups:
        assert group.timings and all(t.median_us > 0 for t in group.timings)


def test_sliding_window_with_soft_cap() -> None:
    report = run([
        plan("FLASH_ATTN", 16, "NHD", name="fa-swa", sliding_window=24, logits_soft_cap=2.0),
        plan("FLASHINFER", 16, "NHD", name="fi-swa", sliding_window=24, logits_soft_cap=2.0),
    ])
    assert any(name.startswith("parity vs fa-swa") for name in check_names(report))


@pytest.mark.parametrize("backend", ["FLASH_ATTN", "FLASHINFER"])
def test_full_cuda_graph_replay_with_new_data(backend: str) -> None:
    report = run([plan(backend, 16, "HND", cudagraph_mode="FULL_DECODE_ONLY")],
                 SmokeOptions(measure=False, graph_replays=2))
    replays = [name for name in check_names(report) if name.startswith("graph replay")]
    assert len(replays) == 3
