"""The smoke reaches the torch probe, the device and the kernel providers through the
deployment's platform module (selector/platforms/), never through CUDA-only code: a CUDA
plan through cuda's module, a ROCm plan through rocm's (which needs an AMD GPU), and a
platform registered in a test through its own module and providers."""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from typing import Any

import pytest

import selector.platforms as platforms
from selector.catalog import load_catalog
from selector.errors import CannotRunHereError
from selector.smoke import runner
from selector.smoke.contract import ProviderSpec
from selector.smoke.plan import SmokeOptions, SmokePlan, bind_plan, kernel_calls_file
from selector.smoke.providers import choose_provider, platform_providers

CATALOG = load_catalog()

ENGINE = "vllm==0.33.0"


def _plan(platform: str, backend: str = "TRITON_ATTN") -> SmokePlan:
    return bind_plan(CATALOG, name=f"{platform}-plan", engine=ENGINE, backend=backend, platform=platform,
                     num_q_heads=8, num_kv_heads=8, head_size=128, dtype="bfloat16",
                     kernel_block_size=16)


class _Reached(Exception):
    pass


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Record which platform module's probe the smoke calls (then stop it there)."""
    seen: list[str] = []

    def probe(what: str = "the smoke check") -> Any:
        seen.append(name)
        raise _Reached(what)

    monkeypatch.setattr(platforms.platform_module(name), "probe_torch", probe)
    return seen


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_the_smoke_machine_is_the_plans_platforms(monkeypatch: pytest.MonkeyPatch,
                                                  platform: str) -> None:
    seen = {name: _spy(monkeypatch, name) for name in ("cuda", "rocm")}
    with pytest.raises(_Reached):
        runner.platform_machine([_plan(platform)], SmokeOptions(), lambda _: None)
    assert seen[platform] == [platform]
    assert all(not calls for name, calls in seen.items() if name != platform)


def test_a_rocm_plans_smoke_needs_an_amd_gpu_by_rocms_module() -> None:
    torch = pytest.importorskip("torch")
    if getattr(torch.version, "hip", None) is not None:
        pytest.skip("a ROCm build of torch is installed")
    with pytest.raises(CannotRunHereError, match="needs an AMD GPU"):
        runner.run_smoke([_plan("rocm", "ROCM_ATTN")])


def test_a_rocm_plan_is_refused_on_a_cuda_machine_by_rocms_probe(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch, "rocm")
    machine = runner.SmokeMachine(torch=None, device=None, name="stand-in", choose=lambda p: None,
                                  platform="cuda")  # type: ignore[arg-type, return-value]
    with pytest.raises(_Reached):
        runner.run_smoke([_plan("rocm", "ROCM_ATTN")], machine=machine)
    assert seen == ["rocm"]


def test_a_registered_platform_gets_its_own_device_and_providers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    own = ProviderSpec(id="dummy_kernels", kind="module", module="dummy_platform_kernels",
                       backends=["TRITON_ATTN"], entry_points={"unified_attention": "attend"})
    kernels = types.ModuleType("dummy_platform_kernels")
    kernels.attend = lambda **kwargs: "attended"  # type: ignore[attr-defined]
    module = types.ModuleType("dummy_platform_module")
    module.NAME = "dummy"  # type: ignore[attr-defined]
    module.probe_torch = lambda what="": "dummy torch"  # type: ignore[attr-defined]
    module.open_device = lambda torch: ("dummy device", "Dummy GPU (d_1)")  # type: ignore[attr-defined]

    def kernel_providers(backend: str, listed: Sequence[ProviderSpec]) -> list[ProviderSpec]:
        return [own]

    module.kernel_providers = kernel_providers  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dummy_platform_module", module)
    monkeypatch.setitem(sys.modules, "dummy_platform_kernels", kernels)
    monkeypatch.setitem(platforms.PLATFORM_MODULES, "dummy", "dummy_platform_module")
    plan = _plan("dummy")
    assert platform_providers(plan) == [own]
    machine = runner.platform_machine([plan], SmokeOptions(), lambda _: None)
    assert (machine.platform, machine.device, machine.name) == ("dummy", "dummy device",
                                                                "Dummy GPU (d_1)")
    choice = machine.choose(plan)
    assert choice.provider.spec is own and choice.substitution is None
    assert choice.provider.call("unified_attention", {}) == "attended"
    assert choose_provider(plan, "dummy torch").provider.spec is own


def test_cuda_and_rocm_try_the_contracts_providers_in_its_order() -> None:
    from selector.smoke.contract import load_contract

    for platform, backend in (("cuda", "FLASH_ATTN"), ("rocm", "ROCM_ATTN")):
        plan = _plan(platform, backend)
        assert platform_providers(plan) == load_contract(kernel_calls_file(ENGINE, CATALOG)).providers_for(backend)
