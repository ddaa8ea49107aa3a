"""The backends vLLM wires without selection, against vLLM's own answers.

``tests/golden/oracle/vllm-<version>/wired_backends.json`` holds what vLLM's classes
answer (``tools/wired_backends_oracle.py``: the ``MambaAttentionBackendEnum`` member each
mamba type gets, DeepSeek-V3.2's indexer backend; their names, kernel block sizes and
builders' CUDA-graph support and reorder threshold without speculative decoding), plus
the legacy layout names ``VLLM_KV_CACHE_LAYOUT`` accepts; the backend files with
``wired_for`` and ``schemas/kv-layouts.yaml`` must state the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.kv import MultipleOf, wired_backends
from selector.kv.layout import ENUM_ORDER

GOLDEN = Path(__file__).parent / "oracle"
FILES = sorted(GOLDEN.glob("vllm-*/wired_backends.json"))

def _threshold(answer: Any) -> Any:
    """vLLM's reorder threshold without speculative decoding."""
    if not isinstance(answer, dict):
        return answer
    if "assigned_in_init" in answer:
        return answer["assigned_in_init"]
    if "added_in_init" in answer:
        return answer["class_value"]  # + speculative tokens (0)
    value = answer["init"]["value"]
    assert isinstance(value, int), answer
    return value


def test_every_engine_has_answers() -> None:
    versions = {path.parent.name.removeprefix("vllm-") for path in FILES}
    assert {f"vllm=={v}" for v in versions} == set(load_catalog().engine_names)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name)
def test_wired_backends_state_what_vllm_answers(path: Path) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    engine = load_catalog().engine(f"vllm=={document['vllm_version']}")
    stated = wired_backends(engine)
    assert set(stated) == set(document["wired_for"])
    for wired_for, answer in document["wired_for"].items():
        facts = stated[wired_for]
        sizes = [{"multiple_of": s.multiple_of} if isinstance(s, MultipleOf) else s
                 for s in facts.kernel_block_sizes]
        assert (facts.name, facts.class_name) == (answer["name"], answer["class_name"])
        assert sizes == answer["kernel_block_sizes"], wired_for
        assert facts.cudagraph_support == answer["cudagraph_support"], wired_for
        assert facts.reorder_batch_threshold == _threshold(answer["reorder_batch_threshold"]), \
            wired_for
        assert facts.is_ssm == (wired_for != "sparse_indexer")


def test_layout_aliases_are_vllms() -> None:
    answers = [json.loads(p.read_text(encoding="utf-8"))["layout_aliases"] for p in FILES]
    asked = [a for a in answers if a is not None]  # engines before 0.29.0 have no 5-D layouts
    assert len(asked) >= 5
    assert all(a == load_catalog().layout_aliases for a in asked)


def test_per_layer_layout_names_are_vllms() -> None:
    answers = [json.loads(p.read_text(encoding="utf-8"))["per_layer_layouts"] for p in FILES]
    asked = [a for a in answers if a is not None]  # engines before 0.29.0 have no 5-D layouts
    assert len(asked) >= 5
    assert all(a == load_catalog().per_layer_layouts for a in asked)


def test_layout_members_and_default_preference_are_vllms() -> None:
    documents = [json.loads(p.read_text(encoding="utf-8")) for p in FILES]
    asked = [d for d in documents if d["layout_members"] is not None]
    assert len(asked) >= 5
    for document in asked:
        assert tuple(document["layout_members"]) == ENUM_ORDER, document["vllm_version"]
        assert tuple(document["default_layout_preference"]) == \
            load_catalog().default_layout_preference, document["vllm_version"]
