"""Real kernels on a GPU, called exactly as vLLM calls them (marked ``gpu``).

Each test takes a deployment's plans as the check negotiates them and runs the smoke:
the engine's own kernels first (vLLM's FA3 and FlashMLA extensions through
``VLLM_KERNELS_DIR``), FlashInfer built as vLLM builds it. On a GPU machine a missing
library FAILS with its install hint (it never skips silently).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.errors import CannotRunHereError
from selector.smoke import SmokeOptions, SmokePlan, SmokeReport, run_smoke
from selector.smoke.plan import bind_plan

CATALOG = load_catalog()

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "smoke"
OPTIONS = SmokeOptions(repeats=5, warmup=1, layers=1)


def deployment(name: str, parity: bool | None = True) -> list[SmokePlan]:
    """The deployment's plans, every parity plan included (``smoke --parity``) unless
    ``parity`` says otherwise."""
    from selector.cli.smoke import _deployment_plans

    return _deployment_plans(FIXTURES / f"{name}.yaml", parity)


def run(plans: list[SmokePlan], options: SmokeOptions = OPTIONS) -> SmokeReport:
    try:
        report = run_smoke(plans, options, raise_on_failure=False)
    except CannotRunHereError as error:
        pytest.fail(f"cannot run on this GPU machine: {error}")
    assert report.passed, "\n".join(report.failures())
    return report


def test_gqa_group_16_passes_on_flashinfers_tensor_core_decode() -> None:
    plans = deployment("gqa16-tp2-h200")
    assert plans[0].num_q_heads // plans[0].num_kv_heads == 16
    report = run(plans)
    assert report.status == "PASS"


def test_flashinfer_compiles_only_the_kernels_the_calls_run() -> None:
    """FlashInfer's modules with the planned instantiations only, compiled or prebuilt
    (``.gpucarry-jit``'s flashinfer_jit_cache, benchmarks/prebuild_flashinfer.py), or its
    whole module when its JIT cache already holds it: either way the calls pass."""
    report = run(deployment("gqa16-tp2-h200", parity=False))
    notes = [note for group in report.groups for note in group.notes
             if note.startswith("FlashInfer JIT:")]
    assert not [note for note in notes if "failed" in note or "compiled whole" in note], notes
    for note in notes:
        assert " kernel instantiations (" in note, note


def test_fa3_really_runs_vllms_kernel() -> None:
    report = run(deployment("llama-h200"))
    fa = report.groups[0]
    assert fa.plan.fa_version == 3
    assert fa.provider in ("vllm.vllm_flash_attn", "_vllm_fa3_C"), fa.implementation
    # with vLLM importable its own vllm_flash_attn module runs (the same _vllm_fa3_C kernel)
    assert fa.status == "PASS"
    assert fa.provider == "vllm.vllm_flash_attn" or "_vllm_fa3_C" in fa.implementation


def test_fp8_kv_passes_for_fa3_and_flashinfer() -> None:
    report = run(deployment("llama-fp8kv-h200"))
    assert {g.plan.backend for g in report.groups} == {"FLASH_ATTN", "FLASHINFER"}
    assert all(g.plan.fp8_kv and g.status == "PASS" for g in report.groups)


def test_flashmla_passes_on_deepseek_v3() -> None:
    report = run(deployment("deepseek-v3-tp8-h200-flashmla"))
    assert report.groups[0].plan.backend == "FLASHMLA" and report.status == "PASS"


def test_flash_attn_mla_passes_on_deepseek_v3() -> None:
    report = run(deployment("deepseek-v3-tp8-h200"))
    assert report.groups[0].plan.backend == "FLASH_ATTN_MLA" and report.status == "PASS"


def test_gpt_oss_sinks_and_window_with_contexts_past_the_window() -> None:
    report = run(deployment("gpt-oss-20b-h200"))
    windowed = [g for g in report.groups if g.plan.sliding_window]
    assert windowed and all(g.plan.has_sinks for g in report.groups)
    assert report.status == "PASS"


def test_gemma2_window_4096_and_soft_cap_50() -> None:
    report = run(deployment("gemma-2-9b-h200"))
    assert any(g.plan.sliding_window == 4096 for g in report.groups)
    assert report.status == "PASS"


def test_fp8_flashinfer_decode_on_gqa16() -> None:
    plan = deployment("gqa16-tp2-h200")[0].model_copy(update={
        "kv_cache_dtype": "fp8", "k_scale": 0.5, "v_scale": 2.0, "name": "gqa16-fp8"})
    assert run([plan]).status == "PASS"


@pytest.mark.parametrize(("q_heads", "kv_heads", "head"), [
    (8, 8, 128), (16, 8, 128), (16, 4, 64), (32, 4, 256), (64, 8, 128), (32, 2, 128)])
def test_fa3_gqa_groups_and_head_sizes(q_heads: int, kv_heads: int, head: int) -> None:
    plan = bind_plan(CATALOG, name=f"fa3-{q_heads}-{kv_heads}-{head}", backend="FLASH_ATTN",
                     fa_version=3, kernel_block_size=16, num_q_heads=q_heads,
                     num_kv_heads=kv_heads, head_size=head, cudagraph_mode="FULL_AND_PIECEWISE",
                     sliding_window=200, logits_soft_cap=30.0)
    report = run([plan], SmokeOptions(measure=False, layers=1))
    assert report.status == "PASS"
