"""Which plans run through vLLM's own backend classes, decided from the kernel call contract
(CPU, no vLLM needed): the provider order, the cross-checks and the stand-in model."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

torch = pytest.importorskip("torch")


from selector.catalog import load_catalog  # noqa: E402
from selector.errors import CannotRunHereError  # noqa: E402
from selector.smoke import providers  # noqa: E402
from selector.smoke.contract import load_contract, resolve_arguments  # noqa: E402
from selector.smoke.plan import (  # noqa: E402
    SmokePlan,
    bind_plan,
    kernel_calls_file,
)
from selector.smoke.providers import choose_provider, cross_check_provider  # noqa: E402

CATALOG = load_catalog()

ENGINES = ["vllm==0.25.1", "vllm==0.33.0"]


def _plan(backend: str, engine: str, **fields: Any) -> SmokePlan:
    shape: dict[str, Any] = {"num_q_heads": 16, "num_kv_heads": 8, "head_size": 256}
    if backend == "TRITON_MLA":
        shape = {"num_q_heads": 16, "num_kv_heads": 1, "head_size": 576, "kv_lora_rank": 512,
                 "qk_rope_head_dim": 64}
    return bind_plan(CATALOG, name="p", backend=backend, engine=engine, kernel_block_size=16,
                     **{**shape, **fields})


@pytest.mark.parametrize("engine", ENGINES)
def test_vllms_backend_classes_come_first_for_the_triton_backends(engine: str) -> None:
    contract = load_contract(kernel_calls_file(engine, CATALOG))
    for backend in ("TRITON_ATTN", "TRITON_MLA"):
        first = contract.providers_for(backend)[0]
        assert (first.id, first.kind, first.module) == (
            "vllm.backend_classes", "backend_classes", "vllm")


@pytest.mark.parametrize("engine", ENGINES)
def test_without_vllm_a_triton_plan_cannot_run_and_says_why(
        engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] == "vllm" else
                        find_spec(name, *a))
    monkeypatch.setattr(importlib, "import_module", _no_vllm(importlib.import_module))
    with pytest.raises(CannotRunHereError, match=r"vllm\.backend_classes: ModuleNotFoundError"):
        choose_provider(_plan("TRITON_ATTN", engine), torch)


def _no_vllm(original: Any) -> Any:
    def import_module(name: str, *args: Any) -> Any:
        if name.split(".", maxsplit=1)[0] == "vllm":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return original(name, *args)
    return import_module


@pytest.mark.parametrize("engine", ENGINES)
def test_flash_attn_is_cross_checked_only_where_vllms_fa3_extension_imports(
        engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan("FLASH_ATTN", engine, fa_version=3, head_size=128)
    contract = load_contract(kernel_calls_file(engine, CATALOG))
    primary = contract.providers_for("FLASH_ATTN")[0]
    present: set[str] = set()
    monkeypatch.setattr(providers, "_importable", lambda name: name in present)
    problems: dict[str, str] = {}
    monkeypatch.setattr(providers, "backend_class_problem", problems.get)
    assert cross_check_provider(plan, primary) is None
    present.add("vllm")
    assert cross_check_provider(plan, primary) is None  # no FA3 extension
    present.add("vllm.vllm_flash_attn._vllm_fa3_C")
    spec = cross_check_provider(plan, primary)
    assert spec is not None and spec.id == "vllm.backend_classes"
    assert cross_check_provider(plan, spec) is None  # the classes never check themselves
    problems["FLASH_ATTN"] = "vLLM 0.33.0's FlashAttentionBackend has no get_kv_cache_shape"
    assert cross_check_provider(plan, primary) is None
    assert cross_check_provider(_plan("FLASHINFER", engine, head_size=128),
                               contract.providers_for("FLASHINFER")[0]) is None


@pytest.mark.parametrize("engine", ENGINES)
def test_the_stand_in_models_carry_the_plans_geometry(engine: str) -> None:
    spec = load_contract(kernel_calls_file(engine, CATALOG)).providers_for("TRITON_ATTN")[0]
    plan = _plan("TRITON_ATTN", engine, dtype="float16")
    config = resolve_arguments(plan, spec.stand_in_model["attention"], "attention")
    assert (config["num_attention_heads"], config["num_key_value_heads"],
            config["head_dim"], config["hidden_size"], config["torch_dtype"]) == (
        16, 8, 256, 16 * 256, "float16")
    mla = _plan("TRITON_MLA", engine)
    config = resolve_arguments(mla, spec.stand_in_model["mla"], "mla")
    assert (config["num_attention_heads"], config["kv_lora_rank"],
            config["qk_rope_head_dim"], config["model_type"]) == (16, 512, 64, "deepseek_v2")


def test_a_vllm_whose_classes_the_smoke_cannot_drive_is_skipped_naming_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.29.0 and later: no get_kv_cache_shape; the provider is skipped (exit 4 when
    no other can run the plan), never a failed check."""
    why = "vLLM 0.33.0's TritonAttentionBackend has no get_kv_cache_shape"
    monkeypatch.setattr(providers, "backend_class_problem", lambda backend: why)
    monkeypatch.setattr(importlib, "import_module",
                        lambda name, *a: type("vllm", (), {"__version__": "0.33.0"}))
    with pytest.raises(CannotRunHereError, match="has no get_kv_cache_shape"):
        choose_provider(_plan("TRITON_ATTN", "vllm==0.33.0"), torch)
