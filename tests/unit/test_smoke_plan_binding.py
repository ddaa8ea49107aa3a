"""A smoke plan is bound to the catalog the command loaded: its engine (a plans file's
default: the catalog's default engine) and that engine's kernel call contract file, so no
smoke stage looks the contract up for itself (``tests/unit/test_catalog_passed_down.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.smoke.contract import load_contract, resolve_calls
from selector.smoke.plan import bind_plan, kernel_calls_file, load_plans_file

PLAN = {"backend": "FLASHINFER", "kernel_block_size": 16, "kv_layout": "HND",
        "num_q_heads": 32, "num_kv_heads": 8, "head_size": 128}


def _write(tmp_path: Path, plans: object) -> Path:
    path = tmp_path / "plans.json"
    path.write_text(json.dumps(plans), encoding="utf-8")
    return path


def test_a_plans_file_plan_without_an_engine_gets_the_catalogs_default(tmp_path: Path) -> None:
    catalog = load_catalog()
    plan = load_plans_file(_write(tmp_path, [PLAN]), catalog).plans[0]
    assert plan.engine == catalog.choose(None).name
    assert plan.kernel_calls == kernel_calls_file(plan.engine, catalog)


def test_the_contract_comes_from_the_catalog_given(schemas: Path) -> None:
    """An edited catalog's contract reaches the calls; the shipped one is not consulted."""
    shipped = load_catalog()
    engine = shipped.choose(None).name
    own = shipped.engine_file(engine, "kernel-calls.yaml")
    assert own is not None
    release = own.parent.name
    edited = schemas / "engines" / release / "kernel-calls.yaml"
    text = edited.read_text(encoding="utf-8")
    assert "BatchDecodeWithPagedKVCacheWrapper" in text
    edited.write_text(text.replace("BatchDecodeWithPagedKVCacheWrapper",
                                   "EditedDecodeWrapper"), encoding="utf-8")
    catalog = load_catalog(schemas)
    plan = bind_plan(catalog, engine=engine, **PLAN)
    assert Path(plan.kernel_calls) == edited
    names = {call.entry_point for call in resolve_calls(plan)}
    assert any("EditedDecodeWrapper" in name for name in names), names
    shipped_plan = bind_plan(shipped, engine=engine, **PLAN)
    assert not any("EditedDecodeWrapper" in call.entry_point
                   for call in resolve_calls(shipped_plan))
    assert load_contract(plan.kernel_calls) is not load_contract(shipped_plan.kernel_calls)


def test_a_plans_file_may_not_name_the_contract_file(tmp_path: Path) -> None:
    path = _write(tmp_path, [{**PLAN, "kernel_calls": "/tmp/elsewhere.yaml"}])
    with pytest.raises(InputError) as caught:
        load_plans_file(path, load_catalog())
    assert caught.value.field == "plans[0].kernel_calls"
    assert "unknown field" in str(caught.value)


def test_an_unknown_engine_is_refused_at_its_field(tmp_path: Path) -> None:
    path = _write(tmp_path, {"plans": [PLAN, {**PLAN, "engine": "vllm==0.1.0"}]})
    with pytest.raises(InputError) as caught:
        load_plans_file(path, load_catalog())
    assert caught.value.field == "plans[1].engine"
    assert "no engine profile for vllm==0.1.0" in str(caught.value)


def test_the_contract_file_stays_out_of_the_plans_json() -> None:
    plan = bind_plan(load_catalog(), **PLAN)
    assert "kernel_calls" not in plan.model_dump(mode="json")
    assert "kernel_calls" not in repr(plan)


def test_shard_plans_carry_their_smoke_plans_engine_and_contract() -> None:
    """A TP/DCP split's shard plans run the engine the smoke plans were bound to (the
    resolved target's), and the kernel call contract file of that engine."""
    from selector.cli.smoke import _deployment_plans
    from selector.pipeline.smoke import shard_plans

    config = Path(__file__).parents[2] / "examples" / "parallel" / "gqa-32q-2kv-h200-tp8-dcp2.yaml"
    smoke = _deployment_plans(config, True)
    plans, skipped = shard_plans(config, smoke, catalog=load_catalog())
    assert plans and not skipped
    by_name = {plan.name: plan for plan in smoke}
    for plan in plans:
        assert (plan.engine, plan.kernel_calls) == (by_name[plan.name].engine,
                                                   by_name[plan.name].kernel_calls)
