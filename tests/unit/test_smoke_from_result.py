"""Smoke plans come from the check's plan exactly (CPU only)."""

from __future__ import annotations

from pathlib import Path

from selector.catalog import load_catalog
from selector.models import load_model, shard_model
from selector.pipeline.model import check_model
from selector.result import SolveResult
from selector.smoke.contract import load_contract
from selector.smoke.from_result import (
    parity_backends,
    parity_choice,
    plans_from_model,
    plans_from_result,
)
from selector.smoke.plan import kernel_calls_file
from selector.solver import pinned, solve
from tests.fuzz.test_config_fuzz import run_cli

CATALOG = load_catalog()

LLAMA = {"head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None,
         "model_present": True, "model_num_q_heads": 32, "model_num_kv_heads": 8}


def _with_parity(result: SolveResult) -> dict[str, SolveResult]:
    return {backend: pinned(result, backend, catalog=load_catalog()) for backend in parity_backends(result)}


def test_single_layer_plan_on_hopper_runs_fa3_plus_flashinfer_parity() -> None:
    result = solve({**LLAMA, "cc": 90}, suggest=False, catalog=load_catalog())
    plans = plans_from_result(result, catalog=load_catalog(), name="llama", parity=_with_parity(result))
    assert [p.backend for p in plans] == ["FLASH_ATTN", "FLASHINFER"]
    fa, fi = plans
    assert (fa.fa_version, fa.kernel_block_size, fa.kv_layout, fa.cudagraph_mode) == (
        3, 16, "NHD", "FULL_AND_PIECEWISE")
    assert (fi.num_q_heads, fi.num_kv_heads, fi.head_size) == (32, 8, 128)
    assert fi.cudagraph_mode == "FULL_AND_PIECEWISE"  # UNIFORM_BATCH resolves to FULL_AND_PIECEWISE


def test_parity_by_default_only_for_backends_that_need_no_compile() -> None:
    """FlashInfer's every provider JIT-compiles on first use (the contract's
    compiles_on_first_use), FA3 has prebuilt providers: an FA3 deployment's FlashInfer
    parity runs only when asked, a FlashInfer deployment's FA3 parity by default."""
    fa3 = solve({**LLAMA, "cc": 90}, suggest=False, catalog=load_catalog())
    assert parity_backends(fa3) == ["FLASHINFER"]
    assert parity_choice(fa3, CATALOG) == ([], ["FLASHINFER"])
    assert parity_choice(fa3, CATALOG, True) == (["FLASHINFER"], [])
    assert parity_choice(fa3, CATALOG, False) == ([], ["FLASHINFER"])
    group16 = solve({**LLAMA, "model_num_q_heads": 64, "model_num_kv_heads": 4, "cc": 90},
                    suggest=False, catalog=load_catalog())
    if group16.selected == "FLASHINFER":
        assert parity_choice(group16, CATALOG) == (["FLASH_ATTN"], [])
        assert parity_choice(group16, CATALOG, False) == ([], ["FLASH_ATTN"])
    for engine in ("vllm==0.25.1", "vllm==0.33.0"):
        contract = load_contract(kernel_calls_file(engine, CATALOG))
        assert contract.compiles_on_first_use("FLASHINFER")
        assert not contract.compiles_on_first_use("FLASH_ATTN")
        assert all(p.compile_source for p in contract.providers if p.compiles_on_first_use)
    plans = plans_from_result(fa3, catalog=load_catalog(), name="llama", parity={})
    assert [p.backend for p in plans] == ["FLASH_ATTN"]


def test_blackwell_flashinfer_plan_uses_hnd() -> None:
    result = solve({**LLAMA, "cc": 100}, suggest=False, catalog=load_catalog())
    plans = plans_from_result(result, catalog=load_catalog(), name="llama", parity=_with_parity(result))
    assert plans[0].backend == "FLASHINFER" and plans[0].kv_layout == "HND"


def test_a_backend_without_a_runner_still_gets_its_plan() -> None:
    """The smoke then exits 4 naming why (not a silent 'no plan')."""
    result = solve({**LLAMA, "cc": 75}, suggest=False, catalog=load_catalog())
    assert result.selected == "TRITON_ATTN"
    assert [p.backend for p in plans_from_result(result, catalog=load_catalog(), name="x")] == ["TRITON_ATTN"]


def test_model_plan_per_attention_group() -> None:
    checked = check_model(shard_model(load_model("gpt-oss-20b"), 1),
                          {"cc": 90, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None}, catalog=load_catalog())
    plans = plans_from_model(checked, load_catalog())
    windows = sorted((p.sliding_window or 0) for p in plans)
    assert windows == [0, 128]
    assert all(p.backend == "FLASH_ATTN" and p.fa_version == 3 and p.head_size == 64 for p in plans)


def test_hybrid_models_plan_their_attention_groups_only() -> None:
    # Jamba's Mamba-1 and Qwen3-Next's GDN state groups have no attention kernel; their
    # groups once crashed the smoke plans (KeyError, exit 70)
    facts = {"cc": 90, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None}
    for preset, attention_layers in (("jamba-v0.1", "4, 12, 20, 28"),
                                     ("qwen3-next-80b-a3b", "3, 7, 11, 15")):
        plans = plans_from_model(check_model(shard_model(load_model(preset), 1), facts, catalog=load_catalog()), load_catalog())
        assert plans, preset
        assert all(p.name.split(" layers ")[1].startswith(attention_layers) for p in plans)
        assert all(p.backend in ("FLASH_ATTN", "FLASHINFER") for p in plans)


def test_sparse_mla_plans_skip_the_indexer_cache() -> None:
    # DeepSeek-V3.2's indexer K cache is a KV group of its own (DEEPSEEK_V32_INDEXER), not a
    # selectable backend; planning it once refused a valid deployment (exit 2)
    checked = check_model(shard_model(load_model("deepseek-v3.2"), 8),
                          {"cc": 100, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None}, catalog=load_catalog())
    assert checked.valid
    plans = plans_from_model(checked, load_catalog())
    assert [p.backend for p in plans] == [checked.selections[0].result.selected]


def test_cli_smoke_without_a_gpu_or_with_an_invalid_deployment(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    code, _, _ = run_cli(["smoke", str(root / "examples" / "gpt-oss-20b-l40s-flashinfer.yaml")])
    assert code == 1
    triton = tmp_path / "t4.yaml"
    triton.write_text("device: T4\ndtype: float16\nlayer: {head_size: 128, num_heads: 32, num_kv_heads: 8}\n")
    code, _, err = run_cli(["smoke", str(triton)])
    assert code == 4 and "TRITON_ATTN runs only through vLLM's own backend classes" in err


def test_a_hybrid_models_large_attention_page_gets_a_plan() -> None:
    # Nemotron-H: vLLM aligns the attention block to the Mamba state's page (4128 tokens
    # per page at TP 1); the smoke plan once capped pages at 4096 and exited 70
    root = Path(__file__).resolve().parents[2]
    model = shard_model(load_model(str(root / "tests" / "fixtures" / "hf_configs" /
                           "nvidia--Nemotron-H-56B-Base-8K.json")), 1)
    checked = check_model(model, {"cc": 90, "dtype": "bfloat16", "kv_cache_dtype": "auto",
                                  "block_size": None}, catalog=load_catalog())
    plans = plans_from_model(checked, load_catalog())
    assert plans and all(p.kernel_block_size > 4096 for p in plans)
    assert {p.kernel_block_size for p in plans} == {
        g.kernel_block_size or g.manager_block_size for g in checked.plan.groups
        if g.kind == "full_attention"}


def test_cli_smoke_of_a_model_tp_cannot_split_exits_1_as_check_does(tmp_path: Path) -> None:
    # 28 heads over TP 8: vLLM refuses at start-up; check says so (exit 1), the smoke once
    # exited 2 as if the file were bad input
    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "qwen.yaml"
    path.write_text(f"device: B200\nmodel: {root}/tests/fixtures/hf_configs/Qwen--Qwen2.5-7B.json\n"
                    "parallel: {tensor_parallel_size: 8}\n", encoding="utf-8")
    assert run_cli(["check", str(path)])[0] == 1
    code, _, err = run_cli(["smoke", str(path), "--dry-run"])
    assert code == 1
    assert "must be divisible by tensor parallel size (8); `attn-select check" in err
