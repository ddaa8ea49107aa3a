"""Provider choice: the engine's own kernels first, a substitution is named, nothing
installed is exit 4 naming every provider tried (no GPU, no torch: loading is stubbed)."""

from __future__ import annotations

from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.errors import CannotRunHereError
from selector.smoke import providers
from selector.smoke.contract import ProviderSpec
from selector.smoke.plan import bind_plan

CATALOG = load_catalog()

FA3_PLAN = bind_plan(CATALOG, backend="FLASH_ATTN", fa_version=3, kernel_block_size=16, num_q_heads=32,
                     num_kv_heads=8, head_size=128)


def stub_loader(monkeypatch: pytest.MonkeyPatch, installed: set[str]) -> list[str]:
    tried: list[str] = []

    def load(spec: ProviderSpec, torch: Any) -> providers.Provider:
        tried.append(spec.id)
        if spec.id not in installed:
            raise ImportError(f"No module named {spec.id!r}")
        return providers.Provider(spec, spec.id, {})

    monkeypatch.setattr(providers, "_load", load)
    return tried


def test_vllms_own_kernels_are_tried_first(monkeypatch: pytest.MonkeyPatch) -> None:
    tried = stub_loader(monkeypatch, {"_vllm_fa3_C", "flash_attn.cute"})
    choice = providers.choose_provider(FA3_PLAN, torch=None)
    assert choice.provider.spec.id == "_vllm_fa3_C" and choice.substitution is None
    assert tried == ["vllm.vllm_flash_attn", "_vllm_fa3_C"]


def test_running_fa4_for_an_fa3_plan_is_a_substitution(monkeypatch: pytest.MonkeyPatch) -> None:
    stub_loader(monkeypatch, {"flash_attn.cute"})
    choice = providers.choose_provider(FA3_PLAN, torch=None)
    assert choice.provider.spec.id == "flash_attn.cute"
    assert choice.substitution is not None and "negotiated FA3" in choice.substitution
    with pytest.raises(CannotRunHereError):
        providers.choose_provider(FA3_PLAN, torch=None, strict=True)


def test_fp8_skips_a_provider_that_cannot_take_descales(monkeypatch: pytest.MonkeyPatch) -> None:
    stub_loader(monkeypatch, {"flash_attn.cute"})
    plan = FA3_PLAN.model_copy(update={"kv_cache_dtype": "fp8"})
    with pytest.raises(CannotRunHereError) as error:
        providers.choose_provider(plan, torch=None)
    assert "flash_attn.cute: cannot take q_descale" in str(error.value)


def test_nothing_installed_names_every_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    stub_loader(monkeypatch, set())
    with pytest.raises(CannotRunHereError) as error:
        providers.choose_provider(FA3_PLAN, torch=None)
    message = str(error.value)
    for name in ("vllm.vllm_flash_attn", "_vllm_fa3_C", "flash_attn_interface",
                 "flash_attn.cute", "VLLM_KERNELS_DIR", "attn-select[gpu]"):
        assert name in message
