"""``smoke CONFIG --dry-run --format json``: every kernel call, without a GPU or torch.

The goldens in tests/golden/smoke_dry_run/ were reviewed against vLLM's source (each call
names its source line; the arguments are the contract's, which tests/unit/
test_kernel_contract.py checks against vLLM's text). A missing golden fails; regenerate
one with the command in the failure message after reviewing the change.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from selector.cli.smoke import register
from tests.cli_app import command_app

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "smoke"
GOLDEN = ROOT / "tests" / "golden" / "smoke_dry_run"
CASES = ["llama-h200", "gpt-oss-20b-h200", "llama-fp8kv-h200", "deepseek-v3-tp8-h200",
         "deepseek-v3-tp8-h200-flashmla", "gqa16-tp2-h200", "gemma-2-9b-h200"]


def make_app() -> typer.Typer:
    return command_app(register)


def dry_run(name: str, *flags: str) -> dict[str, object]:
    """The dry run with every parity plan (``--parity``), unless ``flags`` say otherwise."""
    result = CliRunner().invoke(make_app(), ["smoke", str(FIXTURES / f"{name}.yaml"), "--dry-run",
                                      "--format", "json", *(flags or ("--parity",))])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize("name", CASES)
def test_dry_run_matches_golden(name: str) -> None:
    golden = GOLDEN / f"{name}.json"
    assert golden.is_file(), (
        f"missing golden {golden}; review, then: attn-select smoke "
        f"tests/fixtures/smoke/{name}.yaml --dry-run --parity -f json > {golden.relative_to(ROOT)}")
    assert dry_run(name) == json.loads(golden.read_text())


def test_parity_runs_by_default_only_when_its_kernels_need_no_compile() -> None:
    """FlashInfer JIT-compiles on first use (20-110 s on a fresh machine): an FA3
    deployment's FlashInfer parity plan runs with --parity only; --no-parity drops every
    parity plan; a FlashInfer deployment's FA3 parity (prebuilt) runs by default."""
    def backends(name: str, *flags: str) -> list[object]:
        plans = dry_run(name, *flags)["plans"]
        assert isinstance(plans, list)
        return [entry["plan"]["backend"] for entry in plans]

    assert backends("llama-h200", "--parity") == ["FLASH_ATTN", "FLASHINFER"]
    assert backends("llama-h200", "--no-parity") == ["FLASH_ATTN"]
    assert backends("llama-h200", "--seed", "0") == ["FLASH_ATTN"]
    assert backends("gqa16-tp2-h200", "--seed", "0") == ["FLASHINFER", "FLASH_ATTN"]
    assert backends("gqa16-tp2-h200", "--no-parity") == ["FLASHINFER"]
    help_text = CliRunner().invoke(make_app(), ["smoke", "--help"], env={"COLUMNS": "200"}).output
    assert "--parity" in help_text and "--no-parity" in help_text


def _plans(name: str) -> list[dict[str, object]]:
    plans = dry_run(name)["plans"]
    assert isinstance(plans, list)
    return plans


def test_llama_runs_fa3_through_vllms_kernels_first_and_flashinfer_with_tensor_cores() -> None:
    fa, fi = _plans("llama-h200")
    assert fa["plan"]["backend"] == "FLASH_ATTN" and fa["plan"]["fa_version"] == 3
    assert [p["id"] for p in fa["providers"]][:2] == ["vllm.vllm_flash_attn", "_vllm_fa3_C"]
    assert fa["calls"][0]["entry_point"] == "get_scheduler_metadata"
    decode = next(c for c in fi["calls"] if c["call"] == "decode")
    assert decode["construct"]["use_tensor_cores"] is True


def test_gpt_oss_passes_sinks_and_the_window_and_sees_past_it() -> None:
    windowed = _plans("gpt-oss-20b-h200")[0]
    attention = next(c for c in windowed["calls"] if c["call"] == "attention")
    assert attention["arguments"]["s_aux"] == "<tensor sinks>"
    assert attention["arguments"]["window_size"] == [127, 0]
    longest = max(r["context_len"] for r in windowed["batch"]["requests"])
    assert longest > 128 and longest > 2 * 16 * 32


def test_fp8_plans_pass_descales_and_fp8_dtypes() -> None:
    fa, fi = _plans("llama-fp8kv-h200")
    attention = next(c for c in fa["calls"] if c["call"] == "attention")
    assert attention["arguments"]["k_descale"] == "<tensor k_descale>"
    prefill = next(c for c in fi["calls"] if c["call"] == "prefill")
    assert prefill["plan"]["kv_data_type"] == "torch.float8_e4m3fn"
    assert prefill["run"]["k_scale"] == 0.5


def test_dry_run_imports_no_torch() -> None:
    code = ("import sys; from selector.cli import main; "
            f"sys.argv = ['attn-select', 'smoke', {str(FIXTURES / 'llama-h200.yaml')!r}, "
            "'--dry-run']\ntry:\n    main()\nexcept SystemExit as e:\n    assert not e.code\n"
            "assert 'torch' not in sys.modules and 'flashinfer' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_backend_that_cannot_run_here_exits_4_naming_why(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """TRITON_ATTN runs only through vLLM's backend classes: without vLLM, exit 4 before
    torch or a GPU is looked for."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "vllm" else find_spec(name, *a))
    result = CliRunner().invoke(make_app(), ["smoke", str(FIXTURES / "gemma-3-27b-h200.yaml")])
    assert result.exit_code == 4, result.output
    assert "TRITON_ATTN" in result.stderr and "vllm package" in result.stderr


def test_gemma2_soft_cap_and_window_runs_past_the_window() -> None:
    windowed = _plans("gemma-2-9b-h200")[0]
    assert windowed["plan"]["sliding_window"] == 4096
    assert max(r["context_len"] for r in windowed["batch"]["requests"]) > 4096
    attention = next(c for c in windowed["calls"] if c["call"] == "attention")
    assert attention["arguments"]["softcap"] == 50.0


def test_a_rope_free_mla_model_gets_a_plan_with_no_rope_part() -> None:
    # a NoPE MLA layer (qk_rope_head_dim 0) is valid in vLLM 0.33.0 (FLASH_ATTN_MLA on an
    # H100); its smoke plan once failed validation and exited 70
    config = ROOT / "tests" / "fixtures" / "diff" / "h100-mla-nope-512.yaml"
    result = CliRunner().invoke(make_app(), ["smoke", str(config), "--dry-run", "-f", "json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plans"][0]["plan"]
    assert (plan["backend"], plan["head_size"], plan["qk_rope_head_dim"]) == \
        ("FLASH_ATTN_MLA", 512, 0)
    assert plan["softmax_scale"] == 256 ** -0.5  # (qk_nope_head_dim + qk_rope_head_dim) ** -0.5
