"""``attn-select smoke-plan`` on a machine without a GPU: exit 4 or 2, never a traceback."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from selector.catalog import load_catalog
from selector.cli.smoke import register
from selector.smoke.plan import load_plans_file
from tests.cli_app import command_app

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "smoke-plan-h200.json"


def make_app() -> typer.Typer:
    return command_app(register)


def has_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def test_example_plans_file_is_valid() -> None:
    plans = load_plans_file(EXAMPLE, load_catalog())
    assert [p.backend for p in plans.plans] == ["FLASH_ATTN", "FLASHINFER"]
    assert plans.plans[0].parity_key() == plans.plans[1].parity_key()


@pytest.mark.skipif(has_cuda(), reason="checks the no-GPU path")
def test_without_gpu_exits_4_and_says_how_to_install() -> None:
    result = CliRunner().invoke(make_app(), ["smoke-plan", str(EXAMPLE), "--no-measure"])
    assert result.exit_code == 4, result.output
    assert "attn-select[gpu]" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("content", "fragment"), [
    (None, "file not found"),
    ("{nope", "invalid JSON"),
    ('{"plans": []}', "field 'plans'"),
    ('{"plans": [{"backend": "", "kernel_block_size": 16, "num_q_heads": 8, '
     '"num_kv_heads": 8, "head_size": 64}]}', "field 'plans[0].backend'"),
    ('[{"backend": "FLASHINFER", "kernel_block_size": 16, "num_q_heads": 6, '
     '"num_kv_heads": 4, "head_size": 64}]', "not a multiple"),
    ('[{"backend": "FLASHINFER", "fa_version": 3, "kernel_block_size": 16, '
     '"num_q_heads": 8, "num_kv_heads": 4, "head_size": 64}]', "FLASH_ATTN backends only"),
    # an engine without a profile was an internal error (exit 70)
    ('[{"backend": "FLASHINFER", "engine": "vllm==9", "kernel_block_size": 16, '
     '"num_q_heads": 8, "num_kv_heads": 4, "head_size": 64}]',
     "field 'plans[0].engine': no engine profile for vllm==9"),
])
def test_bad_plans_file_exits_2(tmp_path: Path, content: str | None, fragment: str) -> None:
    path = tmp_path / "plans.json"
    if content is not None:
        path.write_text(content)
    result = CliRunner().invoke(make_app(), ["smoke-plan", str(path)])
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr
    assert fragment in result.stderr


@pytest.mark.skipif(has_cuda(), reason="checks the no-GPU path")
def test_smoke_names_the_parity_it_leaves_out_and_how_to_run_it() -> None:
    fixture = str(REPO / "tests" / "fixtures" / "smoke" / "llama-h200.yaml")
    result = CliRunner().invoke(make_app(), ["smoke", fixture, "--no-measure"])
    assert result.exit_code == 4, result.output
    assert ("note: parity with FLASHINFER left out (its kernels JIT-compile on first use); "
            "--parity runs it") in result.stderr
    asked = CliRunner().invoke(make_app(), ["smoke", fixture, "--no-measure", "--parity"])
    assert asked.exit_code == 4 and "parity with" not in asked.stderr
