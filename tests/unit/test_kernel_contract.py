"""The kernel call contract against vLLM's own source.

``tests/fixtures/kernel_contract/vllm-X.json`` holds the vLLM source lines the contract
cites, extracted from the vLLM wheel by ``tools/kernel_contract_facts.py`` (which re-checks
them against a downloaded wheel). Every cited quote must be on its line, every literal a
quote carries must be the contract's value, and the facts the smoke relies on are checked
one by one against those lines (expected values come from vLLM's text, not the tool).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from selector.smoke.contract import ArgSpec, load_contract, resolve_calls

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from kernel_contract_facts import citations, contract_path  # noqa: E402

from selector.catalog import load_catalog  # noqa: E402
from selector.smoke.plan import bind_plan, kernel_calls_file  # noqa: E402

CATALOG = load_catalog()

ENGINES = ["0.25.1", "0.33.0"]
FIXTURES = ROOT / "tests" / "fixtures" / "kernel_contract"


def facts(engine: str) -> dict[str, str]:
    return json.loads((FIXTURES / f"vllm-{engine}.json").read_text())["lines"]


def raw(engine: str) -> Any:
    return yaml.safe_load(contract_path(engine).read_text())


def line(engine: str, source: str | None) -> str:
    assert source is not None
    return facts(engine)[source]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_quote_is_on_its_cited_line(engine: str) -> None:
    lines = facts(engine)
    checked = 0
    for where, path, number, quote in citations(raw(engine)):
        if number is None:
            continue
        key = f"{path}:{number}"
        assert key in lines, f"{where}: {key} not extracted (run tools/kernel_contract_facts.py)"
        assert quote in lines[key], f"{where}: {quote!r} not in {key}: {lines[key]!r}"
        checked += 1
    assert checked > 100


_LITERAL = re.compile(r"(?<![\w.])(True|False|None|-?\d+(?:\.\d+)?|\"[^\"]*\")(?![\w.])")


def _literals(text: str) -> list[Any]:
    found = []
    for token in _LITERAL.findall(text):
        found.append(ast.literal_eval(token))
    return found


def _arg_specs(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        if "value" in node and "quote" in node:
            out.append((where, node))
        for key, value in node.items():
            out += _arg_specs(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _arg_specs(value, f"{where}[{index}]")
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_literal_values_are_the_ones_vllm_writes(engine: str) -> None:
    """A literal argument whose cited line carries a literal must carry that very value."""
    lines = facts(engine)
    compared = 0
    for where, spec in _arg_specs(raw(engine)):
        if spec.get("when"):
            continue
        key = spec["source"]
        found = _literals(lines.get(key, ""))
        value = spec["value"]
        if isinstance(value, str):
            found = [item for item in found if isinstance(item, str)]
        if not found or value is None:
            continue
        wanted = value if isinstance(value, list) else [value]
        assert all(item in found for item in wanted), \
            f"{where}: {value!r} not among {found} in {key}"
        compared += 1
    assert compared >= 8


def _arg(engine: str, backend: str, call: str, stage: str, name: str) -> ArgSpec:
    spec = next(c for c in load_contract(kernel_calls_file(f"vllm=={engine}", CATALOG)).backends[backend].calls
                if c.name == call)
    return spec.stage(stage)[name]


@pytest.mark.parametrize("engine", ENGINES)
def test_flashinfer_decode_wrapper_uses_tensor_cores(engine: str) -> None:
    arg = _arg(engine, "FLASHINFER", "decode", "construct", "use_tensor_cores")
    assert arg.value is True
    assert line(engine, arg.source).strip() == "use_tensor_cores=True,"


@pytest.mark.parametrize("engine", ENGINES)
def test_window_left_is_window_minus_one(engine: str) -> None:
    for backend, call, stage, name in (("FLASHINFER", "decode", "plan", "window_left"),
                                       ("FLASH_ATTN", "attention", "arguments", "window_size")):
        arg = _arg(engine, backend, call, stage, name)
        assert "(sliding_window - 1, 0)" in line(engine, arg.source)
    plan = bind_plan(CATALOG, backend="FLASHINFER", kernel_block_size=16, num_q_heads=8, num_kv_heads=2,
                     head_size=64, sliding_window=128, engine=f"vllm=={engine}")
    decode = next(c for c in resolve_calls(plan) if c.name == "decode")
    assert decode.arguments("plan")["window_left"] == 127


@pytest.mark.parametrize("engine", ENGINES)
def test_flash_attention_splits_under_full_graphs(engine: str) -> None:
    constant = load_contract(kernel_calls_file(f"vllm=={engine}", CATALOG)).constants[
        "flash_attn_max_num_splits_for_cuda_graph"]
    assert "flash_attn_max_num_splits_for_cuda_graph: int = 32" in line(engine, constant.source)
    base = {"backend": "FLASH_ATTN", "fa_version": 3, "kernel_block_size": 16,
            "num_q_heads": 32, "num_kv_heads": 8, "head_size": 128, "engine": f"vllm=={engine}"}
    graph = bind_plan(CATALOG, **{**base, "cudagraph_mode": "FULL_AND_PIECEWISE"})
    eager = bind_plan(CATALOG, **{**base, "cudagraph_mode": "PIECEWISE"})
    splits = {plan.cudagraph_mode: next(c for c in resolve_calls(plan) if c.name == "attention")
              .arguments()["num_splits"] for plan in (graph, eager)}
    assert splits == {"FULL_AND_PIECEWISE": 32, "PIECEWISE": 0}
    arg = _arg(engine, "FLASH_ATTN", "attention", "arguments", "num_splits")
    assert "num_splits=" in line(engine, arg.source)


@pytest.mark.parametrize("engine", ENGINES)
def test_fa3_gets_vllms_schedule_sinks_and_descales(engine: str) -> None:
    plan = bind_plan(CATALOG, backend="FLASH_ATTN", fa_version=3, kernel_block_size=16, num_q_heads=64,
                     num_kv_heads=8, head_size=64, has_sinks=True, kv_cache_dtype="fp8",
                     engine=f"vllm=={engine}")
    calls = {c.name: c for c in resolve_calls(plan)}
    assert "scheduler_metadata" in calls
    arguments = calls["attention"].arguments()
    assert str(arguments["s_aux"]) == "<tensor sinks>"
    assert str(arguments["k_descale"]) == "<tensor k_descale>"
    assert arguments["fa_version"] == 3
    assert "s_aux=self.sinks" in line(engine, _arg(engine, "FLASH_ATTN", "attention",
                                                   "arguments", "s_aux").source)
    assert "layer._k_scale.expand(descale_shape)" in line(
        engine, _arg(engine, "FLASH_ATTN", "attention", "arguments", "k_descale").source)
    assert "get_flash_attn_version() == 3" in line(
        engine, load_contract(kernel_calls_file(f"vllm=={engine}", CATALOG)).backends["FLASH_ATTN"]
        .quantities["aot_schedule"].source)


@pytest.mark.parametrize("engine", ENGINES)
def test_flashmla_decode_call(engine: str) -> None:
    arg = _arg(engine, "FLASHMLA", "decode", "arguments", "head_dim_v")
    assert "head_dim_v=self.kv_lora_rank" in line(engine, arg.source)
    fixed = _arg(engine, "FLASHMLA", "decode", "arguments", "is_fp8_kvcache")
    assert fixed.value is False and "is_fp8_kvcache=False" in line(engine, fixed.source)


def test_fa3_op_binding_covers_the_op_schema() -> None:
    """vLLM's call, renamed as the contract says, names every required argument of
    _vllm_fa3_C.fwd / get_scheduler_metadata (schemas read from the compiled extension)."""
    text = (FIXTURES / "vllm-0.25.1-_vllm_fa3_C-schemas.txt").read_text()
    schemas = {}
    for row in text.splitlines():
        name, _, rest = row.partition("(")
        arguments = [part.split() for part in rest.rsplit(")", 1)[0].split(",")]
        schemas[name] = {words[-1]: words[0].endswith("?") for words in arguments}
    contract = load_contract(kernel_calls_file("vllm==0.25.1", CATALOG))
    spec = next(p for p in contract.providers if p.id == "_vllm_fa3_C")
    plans = [bind_plan(CATALOG, backend="FLASH_ATTN", fa_version=3, kernel_block_size=16, num_q_heads=32,
                       num_kv_heads=8, head_size=128, engine="vllm==0.25.1",
                       cudagraph_mode="FULL_AND_PIECEWISE"),
             bind_plan(CATALOG, backend="FLASH_ATTN_MLA", fa_version=3, kernel_block_size=16,
                       num_q_heads=16, num_kv_heads=1, head_size=576, kv_lora_rank=512,
                       qk_rope_head_dim=64, engine="vllm==0.25.1")]
    from selector.smoke.providers import _adapt  # the provider's renaming, as data says

    for call in [call for plan in plans for call in resolve_calls(plan)]:
        op = spec.entry_points[call.entry_point]
        bound = _adapt(spec, call.entry_point, call.arguments(), torch=None)
        schema = schemas[op]
        assert set(bound) <= set(schema), set(bound) - set(schema)
        missing = [name for name, optional in schema.items()
                   if not optional and name not in bound]
        assert missing == [], missing
