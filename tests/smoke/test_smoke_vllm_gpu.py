"""The smoke through vLLM's own backend classes on a GPU (marked ``gpu``).

With vLLM importable the smoke runs TRITON_ATTN and TRITON_MLA the way a vLLM worker does:
the backend's metadata builder (``build(0, CommonAttentionMetadata)``) and its impl
(``forward`` / ``forward_mqa``) on a KV cache of the backend's ``get_kv_cache_shape``,
compared with the float32 reference. Without a GPU these tests skip (tests/conftest.py);
without vLLM they skip too, and with ``--gpu-required`` both are failures.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.errors import CannotRunHereError
from selector.smoke import SmokeOptions, SmokePlan, SmokeReport, run_smoke
from selector.smoke.contract import load_contract
from selector.smoke.plan import bind_plan
from selector.smoke.providers import ProviderChoice, _load, choose_provider, cross_check_provider
from selector.smoke.runner import platform_machine

CATALOG = load_catalog()

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "smoke"
OPTIONS = SmokeOptions(repeats=5, warmup=1, layers=2)
PROVIDER = "vllm.backend_classes"


@pytest.fixture(autouse=True)
def vllm_version(request: pytest.FixtureRequest) -> str:
    """The installed vLLM's version; no vLLM skips (fails with ``--gpu-required``)."""
    if importlib.util.find_spec("vllm") is None:
        message = "these tests run vLLM's own backend classes: vLLM is not importable"
        if request.config.getoption("--gpu-required"):
            pytest.fail(f"--gpu-required: {message}")
        pytest.skip(message)
    return str(importlib.import_module("vllm").__version__)


def deployment(name: str) -> list[SmokePlan]:
    from selector.cli.smoke import _deployment_plans

    return _deployment_plans(FIXTURES / f"{name}.yaml", True)


def run(plans: list[SmokePlan], options: SmokeOptions = OPTIONS, **kwargs: object) -> SmokeReport:
    try:
        report = run_smoke(plans, options, raise_on_failure=False, **kwargs)  # type: ignore[arg-type]
    except CannotRunHereError as error:
        pytest.fail(f"cannot run on this GPU machine: {error}")
    assert report.passed, "\n".join(report.failures())
    return report


def through_vllm(report: SmokeReport, version: str) -> None:
    for group in report.groups:
        assert group.provider == PROVIDER, group.implementation
        assert f"vLLM {version} backend classes" in group.implementation
        assert group.status == "PASS", group.failures()


def test_triton_attn_gemma3_window_through_vllms_backend_classes(vllm_version: str) -> None:
    plans = deployment("gemma-3-27b-h200-vllm-0.25.1")
    assert {p.backend for p in plans} == {"TRITON_ATTN"}
    assert any(p.sliding_window == 1024 for p in plans)
    plans = [p.model_copy(update={"engine": f"vllm=={vllm_version}"}) for p in plans]
    report = run(plans)
    through_vllm(report, vllm_version)
    assert "TritonAttentionBackend" in report.groups[0].implementation
    for group in report.groups:  # FULL_AND_PIECEWISE: the decode path replayed from a graph
        replays = [c for c in group.checks if c.name.startswith("graph replay")]
        assert len(replays) == OPTIONS.graph_replays + 1, group.checks


@pytest.mark.parametrize(("q_heads", "kv_heads", "head", "window", "soft_cap", "kv_dtype"), [
    (16, 8, 256, 1024, None, "auto"),     # Gemma-3 (4B/12B) shape: head 256, a window
    (16, 8, 256, None, None, "auto"),
    (16, 8, 256, 1024, 50.0, "auto"),     # Gemma-2 style soft cap on a window
    (32, 8, 128, None, None, "fp8"),      # fp8 KV cache, the query quantized by the layer
    (64, 4, 64, 128, None, "auto"),       # GQA 16, a short window
])
def test_triton_attn_pinned_shapes(vllm_version: str, q_heads: int, kv_heads: int, head: int,
                                   window: int | None, soft_cap: float | None,
                                   kv_dtype: str) -> None:
    plan = bind_plan(CATALOG, name=f"triton-{q_heads}-{kv_heads}-{head}-{window}-{soft_cap}-{kv_dtype}",
                     backend="TRITON_ATTN", engine=f"vllm=={vllm_version}",
                     kernel_block_size=16, num_q_heads=q_heads, num_kv_heads=kv_heads,
                     head_size=head, sliding_window=window, logits_soft_cap=soft_cap,
                     kv_cache_dtype=kv_dtype, k_scale=0.5 if kv_dtype == "fp8" else 1.0,
                     v_scale=2.0 if kv_dtype == "fp8" else 1.0,
                     cudagraph_mode="FULL_AND_PIECEWISE")
    through_vllm(run([plan], SmokeOptions(measure=False, layers=2)), vllm_version)


def test_triton_attn_with_sinks(vllm_version: str) -> None:
    plan = bind_plan(CATALOG, name="triton-sinks", backend="TRITON_ATTN", engine=f"vllm=={vllm_version}",
                     kernel_block_size=16, num_q_heads=64, num_kv_heads=8, head_size=64,
                     sliding_window=128, has_sinks=True, cudagraph_mode="FULL_AND_PIECEWISE")
    through_vllm(run([plan], SmokeOptions(measure=False, layers=2)), vllm_version)


def test_triton_mla_deepseek_v3_through_vllms_backend_classes(vllm_version: str) -> None:
    plans = deployment("deepseek-v3-tp8-h200-triton-mla")
    assert [p.backend for p in plans] == ["TRITON_MLA"]
    plans = [p.model_copy(update={"engine": f"vllm=={vllm_version}"}) for p in plans]
    report = run(plans)
    through_vllm(report, vllm_version)
    assert "TritonMLABackend" in report.groups[0].implementation


def test_triton_mla_fp8_kv(vllm_version: str) -> None:
    plan = deployment("deepseek-v3-tp8-h200-triton-mla")[0].model_copy(update={
        "engine": f"vllm=={vllm_version}", "kv_cache_dtype": "fp8", "k_scale": 0.5,
        "name": "triton-mla-fp8"})
    through_vllm(run([plan], SmokeOptions(measure=False, layers=1)), vllm_version)


def test_vllm_classes_and_the_contract_path_agree_on_one_plan(vllm_version: str) -> None:
    """FLASH_ATTN (FA3) through vLLM's FlashAttentionBackend and through the kernel call
    contract (vLLM's FA3 kernel called directly): the same plan and data, so the runner's
    parity check compares the two outputs."""
    base = bind_plan(CATALOG, name="fa3", backend="FLASH_ATTN", engine=f"vllm=={vllm_version}",
                     fa_version=3, kernel_block_size=16, num_q_heads=32, num_kv_heads=8,
                     head_size=128, sliding_window=200, logits_soft_cap=30.0,
                     cudagraph_mode="FULL_AND_PIECEWISE")
    classes, contract = (base.model_copy(update={"name": "fa3 vLLM classes"}),
                         base.model_copy(update={"name": "fa3 contract"}))
    options = SmokeOptions(measure=False, layers=1)
    machine = platform_machine([contract], options, lambda _: None)
    spec = next(s for s in load_contract(base.kernel_calls).providers if s.id == PROVIDER)

    def choose(plan: SmokePlan) -> ProviderChoice:
        if plan.name == classes.name:
            return ProviderChoice(_load(spec, machine.torch))
        return choose_provider(plan, machine.torch)

    machine.choose = choose
    report = run([contract, classes], options, machine=machine)
    by_name = {g.plan.name: g for g in report.groups}
    assert by_name[classes.name].provider == PROVIDER
    assert by_name[contract.name].provider != PROVIDER
    parity = [c for c in by_name[classes.name].checks if c.name.startswith("parity vs")]
    assert parity and all(c.passed for c in parity), by_name[classes.name].checks


def test_flash_attn_plans_run_through_vllms_flash_attention_backend_too(vllm_version: str
                                                                          ) -> None:
    """A FLASH_ATTN plan runs on its contract provider (vLLM's FA3 kernel) and, with vLLM's
    FA3 extension importable, the same layers and data through FlashAttentionBackend's
    builder and impl: both against the reference and against each other."""
    from selector.cli.smoke import _deployment_plans

    plans = _deployment_plans(FIXTURES.parent / "smoke" / "gpt-oss-20b-h200.yaml", True)
    plans = [p.model_copy(update={"engine": f"vllm=={vllm_version}"}) for p in plans
             if p.backend == "FLASH_ATTN"]
    assert plans and any(p.has_sinks and p.sliding_window for p in plans)
    report = run(plans, SmokeOptions(measure=False, layers=2))
    for group in report.groups:
        assert group.provider != PROVIDER
        assert any("FlashAttentionBackend" in other for other in group.cross_checks), (
            "vLLM's FA3 extension (vllm.vllm_flash_attn._vllm_fa3_C) importable: "
            f"{cross_check_provider(group.plan, load_contract(group.plan.kernel_calls).providers[1])}",
            group.notes)
        via = [c for c in group.checks if "via vLLM" in c.name]
        assert len(via) == 4 and all(c.passed for c in via), via
