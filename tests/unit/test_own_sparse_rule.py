"""A family's ``attention.own_sparse`` (MiniMax-M3): the flagged layers name the rule's
model-driven backend and keep a bf16 index-key cache; the rest stay ordinary attention;
a release whose ``model-driven.yaml`` states no facts of those backends refuses the model
(the rule is checked against vLLM 0.33.0 only: ``tests/golden/test_own_sparse_layers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.inputs.config import parse_deployment
from selector.kv.model_driven import own_backend_facts
from selector.models import load_model
from selector.pipeline.deployment import solve_deployment

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "fixtures" / "hf_configs" / "model_driven" / "MiniMaxAI--MiniMax-M3-sparse.json"


def test_the_flagged_layers_build_their_own_sparse_attention() -> None:
    model = load_model(CONFIG)
    assert model.family == "minimax_m3"
    dense, sparse = model.layers[:3], model.layers[3:]
    assert all(layer.own_backend is None and layer.indexer is None for layer in dense)
    assert all(layer.own_backend == "MINIMAX_M3_SPARSE" for layer in sparse)
    indexers = {layer.indexer for layer in sparse}
    assert len(indexers) == 1
    indexer = indexers.pop()
    assert indexer is not None
    assert (indexer.index_head_dim, indexer.row, indexer.backend) == (
        128, "bfloat16", "MINIMAX_M3_SPARSE_INDEXER")
    assert {(layer.kind, layer.num_kv_heads, layer.head_size) for layer in model.layers} == {
        ("attention", 4, 128)}


def test_the_backends_come_from_the_releases_model_driven_data() -> None:
    model = load_model(CONFIG)
    facts = own_backend_facts(model, "vllm==0.33.0", load_catalog())
    assert {name: (f.kernel_block_sizes, f.cudagraph_support) for name, f in facts.items()} == {
        "MINIMAX_M3_SPARSE": ((128,), "UNIFORM_BATCH"),
        "MINIMAX_M3_SPARSE_INDEXER": ((128,), "UNIFORM_BATCH")}
    assert "MINIMAX_M3_SPARSE_INDEXER" not in own_backend_facts(model, "vllm==0.28.0", load_catalog())


def _deployment(engine: str) -> str:
    return (f"engine: {engine}\nmodel: {CONFIG}\ndevice: H200\ndtype: bfloat16\n"
            "max_model_len: 8192\nmax_num_seqs: 1\n")


def test_a_release_without_the_facts_refuses_the_model() -> None:
    loaded = parse_deployment("<test>", _deployment("vllm==0.28.0"))
    with pytest.raises(InputError, match="states no facts of backend MINIMAX_M3_SPARSE_INDEXER"):
        solve_deployment(loaded, load_catalog(), suggest=False, startup=False, refuse_split=False)


def test_the_sparse_layers_are_selected_without_the_solver() -> None:
    loaded = parse_deployment("<test>", _deployment("vllm==0.33.0"))
    solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                              refuse_split=False)
    assert solved.model is not None
    chosen = {s.layers: s.result.selected for s in solved.model.selections}
    assert chosen == {(0, 1, 2): "FLASH_ATTN", tuple(range(3, 60)): "MINIMAX_M3_SPARSE"}
    own = next(s for s in solved.model.selections if s.result.selected == "MINIMAX_M3_SPARSE")
    assert own.result.priority == () and own.result.verdicts == ()
