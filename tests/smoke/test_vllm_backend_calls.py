"""Both smoke paths agree on the same plan: the kernel calls vLLM's backend classes make
(recorded from the real vLLM by tools/vllm_backend_calls.py, CPU, kernels replaced by
recorders) against the calls the contract path makes for the same plan and batch.

* FLASH_ATTN: the contract path's ``flash_attn_varlen_func`` / ``get_scheduler_metadata``
  arguments (selector/smoke/steps.py ``FlashAttentionStep``) are compared argument by
  argument with those vLLM's ``FlashAttentionImpl.forward`` and its builder passed:
  integer tensors by value, other tensors by shape and dtype, scalars by value.
* TRITON_ATTN and TRITON_MLA have no contract-path kernel runner (their Triton ops come
  with vLLM): vLLM's recorded ``unified_attention`` / ``decode_attention_fwd`` and cache
  writes are compared with the plan and the smoke's batch metadata.

Every record is a smoke run through the runner that PASSED against the float32 reference.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")


from selector.smoke.contract import load_contract  # noqa: E402
from selector.smoke.metadata import build_common_metadata  # noqa: E402
from selector.smoke.plan import SmokePlan  # noqa: E402
from selector.smoke.providers import Provider  # noqa: E402
from selector.smoke.steps import FlashAttentionStep  # noqa: E402
from selector.smoke.tensors import allocate_cache  # noqa: E402
from selector.smoke.workload import long_context_for, mixed_batch, mla_decode_batch  # noqa: E402
from tests.smoke import paged_torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from vllm_backend_calls import describe  # noqa: E402

from selector.catalog import load_catalog  # noqa: E402
from selector.smoke.plan import bind_plan  # noqa: E402

CATALOG = load_catalog()

GOLDEN = ROOT / "tests" / "golden" / "vllm_backend_calls"
FILES = sorted(GOLDEN.glob("vllm-*.json"))


def _records(backends: tuple[str, ...]) -> list[tuple[str, dict[str, Any], int]]:
    out = []
    for path in FILES:
        data = json.loads(path.read_text())
        out += [(path.name, record, data["seed"]) for record in data["records"]
                if record["plan"]["backend"] in backends]
    return out


def _id(item: tuple[str, dict[str, Any], int]) -> str:
    return f"{item[0]}:{item[1]['plan']['name']}"


FA = _records(("FLASH_ATTN",))
TRITON = _records(("TRITON_ATTN",))
MLA = _records(("TRITON_MLA",))


def test_the_records_cover_every_backend_the_classes_run() -> None:
    assert FILES, "run tools/vllm_backend_calls.py"
    assert FA and TRITON and MLA
    for _, record, _seed in FA + TRITON + MLA:
        assert record["status"] == "PASS", record["checks"]
        assert "backend classes" in record["implementation"]


def _workload(plan: SmokePlan, seed: int) -> Any:
    if plan.is_mla:
        return mla_decode_batch(plan.kernel_block_size, seed, long_context_for(plan))
    return mixed_batch(plan.kernel_block_size, seed, long_context=long_context_for(plan))


def _contract_calls(plan: SmokePlan, seed: int) -> dict[str, dict[str, Any]]:
    """The contract path's calls for ``plan``, made to recording entry points."""
    calls: dict[str, dict[str, Any]] = {}

    def recorder(name: str, result: Any) -> Any:
        def call(**arguments: Any) -> Any:
            calls.setdefault(name, {k: describe(torch, v) for k, v in arguments.items()})
            return result(**arguments)
        return call

    spec = next(s for s in load_contract(plan.kernel_calls).providers if s.id == "vllm.vllm_flash_attn")
    provider = Provider(spec, "recording", {
        "flash_attn_varlen_func": recorder("flash_attn_varlen_func",
                                           paged_torch.flash_attn_varlen_func),
        "get_scheduler_metadata": recorder("get_scheduler_metadata",
                                           paged_torch.get_scheduler_metadata)})
    workload = _workload(plan, seed)
    step = FlashAttentionStep(torch, provider, plan, workload.batch, torch.device("cpu"))
    cache = allocate_cache(torch, plan, workload.num_pages, torch.device("cpu"),
                           torch.Generator().manual_seed(0))
    queries = torch.zeros(workload.batch.num_tokens, plan.num_q_heads, plan.head_size,
                          dtype=getattr(torch, plan.dtype))
    sinks = torch.zeros(plan.num_q_heads, dtype=getattr(torch, plan.dtype)) \
        if plan.has_sinks else None
    step.run(queries, cache, sinks)
    return calls


UNSCALED_DESCALES = {"q_descale", "k_descale", "v_descale"}
"""vLLM 0.25.1 hands FlashAttention the layer's scales for every cache dtype
(flash_attn.py:850-856: ``layer._k_scale.expand(descale_shape)``); the contract passes them
for an fp8 cache only (the kernel reads them only for fp8 inputs). With a bf16 cache they
are 1.0: the same call."""


def _same(name: str, ours: Any, theirs: Any) -> str | None:
    """Why ``ours`` (contract path) differs from ``theirs`` (vLLM), or None."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in ("shape", "dtype"):
            if ours.get(key) != theirs.get(key):
                return f"{key} {ours.get(key)} != vLLM's {theirs.get(key)}"
        integer = not any(t in str(ours["dtype"]) for t in ("float", "bfloat"))
        if integer and ours.get("values") != theirs.get("values"):
            return "values differ"
        return None
    if isinstance(ours, float | int) and isinstance(theirs, float | int) and \
            not isinstance(ours, bool) and not isinstance(theirs, bool):
        return None if math.isclose(ours, theirs, rel_tol=1e-12) else f"{ours} != {theirs}"
    return None if ours == theirs else f"{ours!r} != vLLM's {theirs!r}"


def _differences(plan: SmokePlan, ours: dict[str, dict[str, Any]],
                 theirs: dict[str, dict[str, Any]]) -> list[str]:
    problems = []
    for call, arguments in ours.items():
        vllm_arguments = theirs[call]
        for name in sorted(set(arguments) | set(vllm_arguments)):
            mine, vllms = arguments.get(name), vllm_arguments.get(name)
            if mine is None and vllms is None:
                continue
            if mine is None and name in UNSCALED_DESCALES and not plan.fp8_kv:
                if set(vllms["values"]) != {1.0}:
                    problems.append(f"{call}.{name}: vLLM scales by {vllms['values'][:4]}")
                continue
            why = _same(name, mine, vllms)
            if why:
                problems.append(f"{call}.{name}: {why}")
    return problems


@pytest.mark.parametrize("item", FA, ids=_id)
def test_flash_attn_contract_path_passes_what_vllms_backend_classes_pass(
        item: tuple[str, dict[str, Any], int]) -> None:
    _, record, seed = item
    plan = bind_plan(CATALOG, **record["plan"])
    ours = _contract_calls(plan, seed)
    assert set(ours) == {"flash_attn_varlen_func", "get_scheduler_metadata"} <= set(record["calls"])
    problems = _differences(plan, ours, record["calls"])
    assert not problems, "\n".join(problems)


def test_a_difference_in_one_argument_is_found() -> None:
    _, record, seed = FA[0]
    plan = bind_plan(CATALOG, **record["plan"])
    ours = _contract_calls(plan, seed)
    theirs = json.loads(json.dumps(record["calls"]))
    attention = theirs["flash_attn_varlen_func"]
    attention["window_size"] = [attention["window_size"][0] + 1, 0]
    attention["seqused_k"]["values"][0] += 1
    attention["softcap"] = 0
    problems = _differences(plan, ours, theirs)
    assert [p.split(":")[0] for p in problems] == [
        "flash_attn_varlen_func.seqused_k", "flash_attn_varlen_func.softcap",
        "flash_attn_varlen_func.window_size"], problems


def _expected_window(plan: SmokePlan) -> list[int]:
    return [-1, -1] if plan.sliding_window is None else [plan.sliding_window - 1, 0]


@pytest.mark.parametrize("item", TRITON, ids=_id)
def test_triton_attn_gets_the_plan_and_the_batch(item: tuple[str, dict[str, Any], int]) -> None:
    _, record, seed = item
    plan = bind_plan(CATALOG, **record["plan"])
    workload = _workload(plan, seed)
    common = build_common_metadata(workload.batch)
    call = record["calls"]["unified_attention"]
    assert call["cu_seqlens_q"]["values"] == common.query_start_loc
    assert call["seqused_k"]["values"] == common.seq_lens
    assert call["max_seqlen_q"] == common.max_query_len
    assert call["max_seqlen_k"] == common.max_seq_len
    width = call["block_table"]["shape"][1]
    assert call["block_table"]["values"] == [
        page for row in common.block_table for page in row + [0] * (width - len(row))]
    assert call["window_size"] == _expected_window(plan)
    assert call["softmax_scale"] == pytest.approx(plan.scale)
    assert call["softcap"] == (plan.logits_soft_cap or 0)
    assert call["causal"] is True
    pages = call["k"]["shape"][0]
    assert call["k"]["shape"] == [pages, plan.kernel_block_size, plan.num_kv_heads,
                                  plan.head_size]
    assert call["q"]["dtype"] == ("torch.float8_e4m3fn" if plan.fp8_kv else f"torch.{plan.dtype}")
    assert (call["sinks"] is not None) == plan.has_sinks
    assert set(call["k_descale"]["values"]) == {plan.k_scale}
    assert set(call["v_descale"]["values"]) == {plan.v_scale}
    write = record["calls"]["triton_reshape_and_cache_flash"]
    assert write["slot_mapping"]["values"] == common.slot_mapping
    assert write["kv_cache_dtype"] == plan.kv_cache_dtype


@pytest.mark.parametrize("item", MLA, ids=_id)
def test_triton_mla_gets_the_plan_and_the_batch(item: tuple[str, dict[str, Any], int]) -> None:
    _, record, seed = item
    plan = bind_plan(CATALOG, **record["plan"])
    assert plan.kv_lora_rank is not None
    common = build_common_metadata(_workload(plan, seed).batch)
    call = record["calls"]["decode_attention_fwd"]
    assert call["b_seq_len"]["values"] == common.seq_lens
    width = call["req_to_token"]["shape"][1]
    assert call["req_to_token"]["values"] == [
        page for row in common.block_table for page in row + [0] * (width - len(row))]
    assert call["q"]["shape"] == [common.num_actual_tokens, plan.num_q_heads, plan.head_size]
    pages = call["kv_buffer"]["shape"][0]
    assert call["kv_buffer"]["shape"] == [pages, plan.kernel_block_size, 1, plan.head_size]
    assert call["v_buffer"]["shape"] == [pages, plan.kernel_block_size, 1, plan.kv_lora_rank]
    assert call["page_size"] == plan.kernel_block_size
    assert call["sm_scale"] == pytest.approx(plan.scale)
    assert call["is_mla"] is True


def test_a_kernel_bug_fails_the_smoke_through_vllms_classes() -> None:
    """The recorded runs with a bug injected into the kernel double (ignored window,
    soft-cap or sinks, a wrong page, a dropped key, a wrong scale) each FAILED."""
    injected = {(name, record["plan"]["name"], bug): status
                for name, record, _ in FA + TRITON + MLA
                for bug, status in record.get("injected_bugs", {}).items()}
    assert {bug for _, _, bug in injected} == {"ignore_window", "ignore_softcap", "ignore_sinks",
                                               "wrong_page", "drop_key", "wrong_scale"}
    assert set(injected.values()) == {"FAIL"}, injected


def test_full_graph_plans_replayed_the_decode_path_through_vllms_classes() -> None:
    for _, record, _ in FA + TRITON:
        replays = [c for c in record["checks"] if c["name"].startswith("graph replay")]
        full = record["plan"]["cudagraph_mode"] in ("FULL", "FULL_DECODE_ONLY",
                                                     "FULL_AND_PIECEWISE")
        assert bool(replays) == full, (record["plan"]["name"], record["checks"])
        assert all(c["passed"] for c in replays)
