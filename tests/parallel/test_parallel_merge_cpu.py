"""The shard check on the CPU with the torch stand-in kernel (skipped without torch).

The LSE merge is checked against vLLM's own CPU reference of the DCP combine
(``_lse_weighted_combine``, recorded in tests/fixtures/parallel) in both log bases;
then whole DCP and TP runs, and a base-2 / natural-log mix-up that must FAIL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from tests.cli_app import command_app

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402
from vllm_facts import vllm_facts  # noqa: E402

from selector.catalog import load_catalog  # noqa: E402
from selector.cli.smoke import register  # noqa: E402
from selector.parallel.distributed import run_distributed  # noqa: E402
from selector.parallel.lse import merge_partials  # noqa: E402
from selector.parallel.plan import ShardOptions, ShardPlan  # noqa: E402
from selector.parallel.simulate import run_shard_check  # noqa: E402
from selector.smoke.plan import kernel_calls_file  # noqa: E402

ENGINE = load_catalog().choose(None).name

EXAMPLES = Path(__file__).parent.parent.parent / "examples" / "parallel"


def make_app() -> typer.Typer:
    return command_app(register)


def _tensor(values: object) -> object:
    def convert(item: object) -> object:
        if isinstance(item, list):
            return [convert(v) for v in item]
        return float("-inf") if item == "-inf" else item

    return torch.tensor(convert(values), dtype=torch.float32)


@pytest.mark.parametrize("index", range(5))
def test_merge_matches_vllms_combine_in_both_bases(index: int) -> None:
    case = vllm_facts()["lse_weighted_combine"][index]
    outputs, lses = _tensor(case["outputs"]), _tensor(case["lses"])
    merged, lse = merge_partials(torch, outputs, lses, case["base"])
    assert torch.allclose(merged, _tensor(case["result"]), atol=1e-5)
    assert torch.allclose(lse, _tensor(case["lse"]), atol=1e-5)
    other = "2" if case["base"] == "e" else "e"
    wrong, _ = merge_partials(torch, outputs, lses, other)
    assert not torch.allclose(wrong, _tensor(case["result"]), atol=1e-2)


def test_vllm_fixture_covers_both_bases() -> None:
    assert {c["base"] for c in vllm_facts()["lse_weighted_combine"]} == {"e", "2"}


def _plan(backend: str, **changes: object) -> ShardPlan:
    values: dict[str, object] = {
        "name": backend, "backend": backend, "engine": ENGINE,
        "kernel_calls": kernel_calls_file(ENGINE, load_catalog()), "kernel_block_size": 16,
        "head_size": 32,
        "num_heads": 16, "num_kv_heads": 2, "tensor_parallel_size": 8,
        "lse_base": "e" if backend == "FLASH_ATTN" else "2",
        "dcp_decode_kv": "context" if backend == "FLASH_ATTN" else "sequence"}
    values.update(changes)
    return ShardPlan.model_validate(values)


DCP_PLANS = [_plan("FLASH_ATTN", decode_context_parallel_size=2),
             _plan("FLASHINFER", decode_context_parallel_size=4),
             _plan("FLASH_ATTN", decode_context_parallel_size=4, cp_kv_cache_interleave_size=4),
             _plan("FLASHINFER", decode_context_parallel_size=2, cp_kv_cache_interleave_size=8,
                   logits_soft_cap=20.0)]
TP_PLANS = [_plan("FLASH_ATTN", num_heads=64, num_kv_heads=8, tensor_parallel_size=tp)
            for tp in (2, 4, 8)] + [
    _plan("FLASHINFER", num_heads=64, num_kv_heads=8, tensor_parallel_size=16,
          sliding_window=24)]


def test_dcp_and_tp_shards_merge_to_the_reference() -> None:
    report = run_shard_check(DCP_PLANS + TP_PLANS, ShardOptions(kernels="torch", repeats=1))
    assert [p.passed for p in report.plans] == [True] * 8, report.render_lines()


def test_lse_base_mixup_fails_every_dcp_plan() -> None:
    report = run_shard_check(DCP_PLANS, ShardOptions(kernels="torch", repeats=1,
                                                     merge_lse_base="swapped"))
    assert [p.passed for p in report.plans] == [False] * 4
    assert all(p.checks[0].max_abs and p.checks[0].max_abs > 0.1 for p in report.plans)


def test_kernel_returning_the_other_base_fails() -> None:
    """The data says base 2 (FlashInfer) but the kernel returns natural log: FAIL."""
    plan = _plan("FLASHINFER", decode_context_parallel_size=2, lse_base="2")
    mismatched = plan.model_copy(update={"lse_base": "e"})
    report = run_shard_check([mismatched], ShardOptions(kernels="torch", repeats=1,
                                                        merge_lse_base="2"))
    assert not report.plans[0].passed


def test_two_processes_over_gloo() -> None:
    """One process per rank (gloo): a natural-log merge is right for FlashAttention's
    LSEs and wrong for FlashInfer's base-2 ones; TP shards need no merge."""
    plans = [_plan("FLASH_ATTN", decode_context_parallel_size=2),
             _plan("FLASHINFER", decode_context_parallel_size=2),
             _plan("FLASH_ATTN", num_heads=64, num_kv_heads=8, tensor_parallel_size=2)]
    report = run_distributed(plans, ShardOptions(kernels="torch", repeats=1,
                                                 merge_lse_base="e"), processes=2)
    assert report.processes == 2
    assert [p.passed for p in report.plans] == [True, False, True], report.render_lines()
    assert report.plans[0].collective_us is not None
    assert [r.rank for r in report.plans[0].ranks] == [0, 1]
    assert [r.q_heads for r in report.plans[2].ranks] == ["0-31", "32-63"]


def test_cli_dcp_deployment_with_the_stand_in() -> None:
    runner = CliRunner()
    config = str(EXAMPLES / "gqa-32q-2kv-h200-tp8-dcp2.yaml")
    ok = runner.invoke(make_app(), ["smoke", config, "--kernels", "torch", "--repeats", "1"])
    assert ok.exit_code == 0, ok.output
    assert "PASS" in ok.output and "FLASHINFER" in ok.output
    bad = runner.invoke(make_app(), ["smoke", config, "--kernels", "torch", "--repeats", "1",
                              "--merge-lse-base", "swapped"])
    assert bad.exit_code == 3, bad.output


def test_cli_gpus_must_match_the_group(tmp_path: Path) -> None:
    config = str(EXAMPLES / "gqa-32q-2kv-h200-tp8-dcp2.yaml")
    result = CliRunner().invoke(make_app(), ["smoke", config, "--kernels", "torch", "--gpus", "4"])
    assert result.exit_code == 2
    assert "--gpus 2" in result.output


@pytest.fixture
def fake_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real-kernel adapters over doubles of FlashInfer and vLLM's FA3 entry points."""
    import sys
    import types

    import fake_kernels

    module = types.ModuleType("vllm.vllm_flash_attn")
    module.flash_attn_varlen_func = fake_kernels.fake_varlen  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm.vllm_flash_attn", module)
    monkeypatch.setitem(sys.modules, "flashinfer", fake_kernels.FakeFlashInfer)


@pytest.mark.usefixtures("fake_libraries")
def test_native_adapters_with_the_libraries_conventions() -> None:
    plans = [_plan("FLASH_ATTN", decode_context_parallel_size=2),
             _plan("FLASHINFER", decode_context_parallel_size=4, kv_layout="HND"),
             _plan("FLASHINFER", num_heads=64, num_kv_heads=8, tensor_parallel_size=2)]
    options = ShardOptions(kernels="native", device="cpu", repeats=1)
    report = run_shard_check(plans, options)
    assert [p.passed for p in report.plans] == [True] * 3, report.render_lines()
    assert "vllm.vllm_flash_attn" in report.plans[0].implementation
    swapped = run_shard_check(plans[:2], options.model_copy(update={"merge_lse_base":
                                                                    "swapped"}))
    assert [p.passed for p in swapped.plans] == [False, False]


@pytest.mark.usefixtures("fake_libraries")
def test_fa3_op_bound_by_its_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import fake_kernels

    from selector.parallel import kernels

    monkeypatch.setitem(sys.modules, "vllm.vllm_flash_attn", None)
    monkeypatch.setattr(kernels, "_fa3_compiled_op", lambda torch: fake_kernels.FakeFa3Op())
    report = run_shard_check([_plan("FLASH_ATTN", decode_context_parallel_size=2)],
                             ShardOptions(kernels="native", device="cpu", repeats=1))
    assert report.plans[0].passed, report.render_lines()
    assert "_vllm_fa3_C" in report.plans[0].implementation


def test_cli_model_preset_tp_shards(tmp_path: Path) -> None:
    config = tmp_path / "llama70b.yaml"
    config.write_text("device: H200\nmodel: llama-3.1-70b\nparallel: {tensor_parallel_size: 8}\n")
    result = CliRunner().invoke(make_app(), ["smoke", str(config), "--shards", "only",
                                             "--kernels", "torch", "--repeats", "1"])
    assert result.exit_code == 0, result.output
    assert "TP 8 (8 q / 1 KV heads per rank of 64/8 heads)" in result.output


def test_cli_split_vllm_refuses_quotes_vllm(tmp_path: Path) -> None:
    config = tmp_path / "split.yaml"
    config.write_text("device: H200\ndtype: bfloat16\n"
                      "layer: {head_size: 128, num_heads: 32, num_kv_heads: 8}\n"
                      "parallel: {tensor_parallel_size: 4, decode_context_parallel_size: 2}\n")
    result = CliRunner().invoke(make_app(), ["smoke", str(config), "--kernels", "torch"])
    assert result.exit_code == 1
    assert "Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` (4)" \
        in result.output


def test_cli_backend_without_dcp_gets_vllms_reason(tmp_path: Path) -> None:
    config = tmp_path / "triton.yaml"
    config.write_text("device: H200\ndtype: bfloat16\nattention_backend: TRITON_ATTN\n"
                      "layer: {head_size: 128, num_heads: 32, num_kv_heads: 2}\n"
                      "parallel: {tensor_parallel_size: 8, decode_context_parallel_size: 2}\n")
    result = CliRunner().invoke(make_app(), ["smoke", str(config), "--kernels", "torch"])
    assert result.exit_code == 1
    assert "Reason: ['DCP not supported']" in result.output
