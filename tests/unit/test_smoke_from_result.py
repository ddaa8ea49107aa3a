"""Smoke plans come from the check's plan exactly (CPU only)."""

from __future__ import annotations

from pathlib import Path

from selector.modelcheck import check_model
from selector.models import load_model
from selector.smoke.from_result import plans_from_model, plans_from_result
from selector.solver import solve
from tests.fuzz.test_config_fuzz import run_cli

LLAMA = {"head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None,
         "model_present": True, "model_num_q_heads": 32, "model_num_kv_heads": 8}


def test_single_layer_plan_on_hopper_runs_fa3_plus_flashinfer_parity() -> None:
    result = solve({**LLAMA, "cc": 90}, suggest=False)
    plans = plans_from_result(result, name="llama")
    assert [p.backend for p in plans] == ["FLASH_ATTN", "FLASHINFER"]
    fa, fi = plans
    assert (fa.fa_version, fa.kernel_block_size, fa.kv_layout, fa.cudagraph_mode) == (
        3, 16, "NHD", "FULL_AND_PIECEWISE")
    assert (fi.num_q_heads, fi.num_kv_heads, fi.head_size) == (32, 8, 128)
    assert fi.cudagraph_mode == "FULL_AND_PIECEWISE"  # UNIFORM_BATCH resolves to FULL_AND_PIECEWISE


def test_blackwell_flashinfer_plan_uses_hnd() -> None:
    result = solve({**LLAMA, "cc": 100}, suggest=False)
    plans = plans_from_result(result, name="llama")
    assert plans[0].backend == "FLASHINFER" and plans[0].kv_layout == "HND"


def test_a_backend_without_a_runner_still_gets_its_plan() -> None:
    """The smoke then exits 4 naming why (not a silent 'no plan')."""
    result = solve({**LLAMA, "cc": 75}, suggest=False)
    assert result.selected == "TRITON_ATTN"
    assert [p.backend for p in plans_from_result(result, name="x")] == ["TRITON_ATTN"]


def test_model_plan_per_attention_group() -> None:
    checked = check_model(load_model("gpt-oss-20b").for_tp(1),
                          {"cc": 90, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None})
    plans = plans_from_model(checked)
    windows = sorted((p.sliding_window or 0) for p in plans)
    assert windows == [0, 128]
    assert all(p.backend == "FLASH_ATTN" and p.fa_version == 3 and p.head_size == 64 for p in plans)


def test_cli_smoke_without_a_gpu_or_with_an_invalid_deployment(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    code, _, _ = run_cli(["smoke", str(root / "examples" / "gpt-oss-20b-l40s-flashinfer.yaml")])
    assert code == 1
    triton = tmp_path / "t4.yaml"
    triton.write_text("device: T4\ndtype: float16\nlayer: {head_size: 128, num_heads: 32, num_kv_heads: 8}\n")
    code, _, err = run_cli(["smoke", str(triton)])
    assert code == 4 and "TRITON_ATTN cannot be smoke-tested here" in err
