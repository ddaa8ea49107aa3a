"""Layers whose own code builds a block-sparse attention (a family's ``attention.own_sparse``:
MiniMax-M3's ``MiniMaxM3SparseAttention``) against vLLM 0.33.0's answers
(``tools/model_driven_reference.py``: the model class built on the meta device on an
emulated H200 and B200, with no ``--attention-backend`` and with each name given, with vLLM's
default KV-cache dtype and ``fp8``): every cache module's backend, page and CUDA-graph
support, the block after the engine's alignment and the groups. The model-driven names
(``MINIMAX_M3_SPARSE``, ``CUTLASS_MSA``, ``TRITON_MSA``) given as ``--attention-backend``
reach the dense layers' selector, which refuses them: vLLM's refusal is recorded, and the
tool gives it word for word (each name has a CUDA backend file; the MSA aliases through
``--attention-backend`` are validated as their class, AttentionConfig's rewrite being the
``--attention-config.backend`` path's)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.inputs.config import parse_deployment
from selector.pipeline.deployment import solve_deployment
from tools import oracle
from tools.model_agreement import reference_deployment

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = ROOT / "tests" / "golden" / "vllm_models" / "model_driven" / "minimax-m3-vllm-0.33.0.jsonl.gz"
CONFIG = "tests/fixtures/hf_configs/model_driven/MiniMaxAI--MiniMax-M3-sparse.json"


def _runs() -> list[dict[str, Any]]:
    return [a for a in oracle.read_jsonl(ANSWERS) if "backends" not in a]


def _id(answer: dict[str, Any]) -> str:
    return (f"sm{answer['capability'].replace('.', '')}-{answer.get('attention_backend') or 'auto'}"
            f"-{answer.get('kv_cache_dtype') or 'auto'}")


def test_both_gpus_every_name_and_both_dtypes_are_recorded() -> None:
    runs = _runs()
    assert {a["config"] for a in runs} == {CONFIG}
    assert {(a["capability"], a.get("attention_backend"), a.get("kv_cache_dtype")) for a in runs} == {
        (cc, name, dtype) for cc in ("9.0", "10.0")
        for name in (None, "CUTLASS_MSA", "TRITON_MSA", "MINIMAX_M3_SPARSE", "FLASH_ATTN")
        for dtype in (None, "fp8")}


def _plan(answer: dict[str, Any]) -> Any:
    text = reference_deployment(answer, 8192)
    loaded = parse_deployment("<reference deployment>", text)
    solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                              refuse_split=False)
    assert solved.model is not None
    return solved.model.plan


@pytest.mark.parametrize("answer", [a for a in _runs() if a["status"] == "ok"], ids=_id)
def test_every_cache_and_group_is_vllms(answer: dict[str, Any]) -> None:
    plan = _plan(answer)
    assert plan is not None and plan.ok
    have = Counter((e.layer_index, e.role, e.backend.name, e.spec.page_size_bytes,
                    e.backend.cudagraph_support) for e in plan.entries)
    block = answer["aligned"]["block_size"]
    want = Counter((r["index"], "indexer" if "Indexer" in r["module"] else "attention", r["backend"],
                    r["page_size_bytes"] * block // r["block_size"], r["cudagraph_support"])
                   for r in answer["layers"])
    assert have == want
    assert plan.block_size.block_size == block
    groups = sorted((g.manager_block_size, g.bytes_per_block, tuple(sorted(set(g.layer_indices))))
                    for g in plan.groups)
    assert groups == sorted((g["block_size"], g["page_size_bytes"], tuple(sorted(set(g["layers"]))))
                            for g in answer["aligned"]["groups"])


@pytest.mark.parametrize("answer", [a for a in _runs() if a["status"] != "ok"], ids=_id)
def test_a_model_driven_name_is_refused(answer: dict[str, Any]) -> None:
    # vLLM: the dense layers' selector refuses the name (the alias rewrite of
    # AttentionConfig.__post_init__ never sees --attention-backend, arg_utils.py:2727-2737)
    assert answer["error"].startswith(
        f"ValueError: Selected backend AttentionBackendEnum.{answer['attention_backend']} is not "
        "valid for this configuration.")
    assert "non-sparse not supported" in answer["error"]
    if answer["attention_backend"] in load_catalog().engine("vllm==0.33.0").backends:
        # a CUDA backend file (MINIMAX_M3_SPARSE): the dense layers' refusal in vLLM's words
        loaded = parse_deployment("<reference deployment>", reference_deployment(answer, 8192))
        solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                                  refuse_split=False)
        assert solved.model is not None
        said = {f"ValueError: {s.result.error.message}" for s in solved.model.selections
                if s.result.error is not None}
        assert said == {answer["error"]}
        return
    with pytest.raises(InputError, match="unknown attention backend"):
        _plan(answer)
