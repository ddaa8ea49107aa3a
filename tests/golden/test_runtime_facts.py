"""The profile's run-time facts against vLLM's own answers (not against a snapshot).

``tests/golden/oracle/vllm-<version>/runtime_facts.json`` holds what vLLM's backend and
metadata-builder classes answer at every compute capability, asked without a GPU by
``tools/runtime_facts_oracle.py`` (``get_supported_kernel_block_sizes()``,
``get_preferred_block_size(16)``, ``get_cudagraph_support(...)`` /
``_cudagraph_support``, ``reorder_batch_threshold``).  Here the data of
``schemas/engines`` is evaluated for the same question (no model, no speculative
decoding, no DCP) and must give the same answer.  Answers vLLM can give only with a
model (``{"dynamic": ...}``) are left to the whole-model checks; each test states how
many it compared, so a file that stops answering cannot pass quietly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import EngineData, load_catalog
from selector.inputs.flat import facts_from_flat
from selector.schema.backend import BackendSpec
from selector.schema.types import MultipleOf
from selector.solver import derive_facts, evaluate_runtime, kernel_block_sizes_of

GOLDEN = Path(__file__).parent / "oracle"
FILES = sorted(GOLDEN.glob("vllm-*/runtime_facts.json"))
DENSE_HEAD, MLA_HEAD = 128, 576


def _answers(path: Path) -> tuple[EngineData, dict[str, Any]]:
    document = json.loads(path.read_text(encoding="utf-8"))
    engine = load_catalog().engine(f"vllm=={document['vllm_version']}")
    return engine, document


def _scope(engine: EngineData, spec: BackendSpec, capability: str) -> dict[str, Any]:
    """The request facts of the question the oracle asked: this backend's kind of layer
    (MLA or not, sparse or not), bfloat16, automatic KV dtype, no model."""
    mla = spec.family == "mla"
    sparse = spec.features.sparse is True
    config = {"device_capability": capability, "dtype": "bfloat16",
              "head_size": MLA_HEAD if mla else DENSE_HEAD, "use_mla": mla, "use_sparse": sparse}
    facts, _ = facts_from_flat(config, engine.profile)
    scope = facts.solver_facts()
    derive_facts(engine.profile.facts, scope)
    derive_facts(spec.facts, scope)
    return scope


def _sizes(sizes: tuple[int | MultipleOf, ...]) -> list[Any]:
    return [{"multiple_of": s.multiple_of} if isinstance(s, MultipleOf) else s for s in sizes]


def _vllm_threshold(answer: Any) -> tuple[bool, Any]:
    """(known, value) of vLLM's threshold without speculative decoding or DCP."""
    if not isinstance(answer, dict):
        return True, answer
    if "value" not in answer["init"]:
        return False, None  # the tool could not read the builder's __init__
    value = answer["init"]["value"]
    if isinstance(value, dict):
        if value.get("dynamic") == "self.reorder_batch_threshold":
            return True, answer["class_value"]  # __init__ passes the class attribute on
        return False, None
    return True, value


def _compare(path: Path) -> tuple[list[str], dict[str, int]]:
    engine, document = _answers(path)
    mismatches: list[str] = []
    counted = {"kernel_block_sizes": 0, "preferred_block_size": 0, "cudagraph_support": 0,
               "reorder_batch_threshold": 0}
    for capability, backends in document["capabilities"].items():
        for name, answer in backends.items():
            if "import_error" in answer or name not in engine.backends:
                continue
            spec = engine.backends[name]
            scope = _scope(engine, spec, capability)
            ours = evaluate_runtime(spec, scope, "FULL_AND_PIECEWISE",
                                    engine.profile.kv_cache_layout_default)
            where = f"{engine.engine} cc {capability} {name}"
            checks = {
                "kernel_block_sizes": (_sizes(kernel_block_sizes_of(spec, scope)),
                                       answer["kernel_block_sizes"]),
                "preferred_block_size": (ours.preferred_block_size, answer["preferred_block_size"]),
            }
            if isinstance(answer["cudagraph_support"], str):
                checks["cudagraph_support"] = (ours.cudagraph_support, answer["cudagraph_support"])
            known, threshold = _vllm_threshold(answer["reorder_batch_threshold"])
            if known:
                checks["reorder_batch_threshold"] = (ours.reorder_batch_threshold, threshold)
            for fact, (mine, vllm) in checks.items():
                counted[fact] += 1
                if mine != vllm:
                    mismatches.append(f"{where} {fact}: data says {mine!r}, vLLM says {vllm!r}")
    return mismatches, counted


def test_runtime_fact_answers_are_committed() -> None:
    engines = {json.loads(p.read_text())["vllm_version"] for p in FILES}
    assert {"0.33.0", "0.25.1"} <= engines, "run tools/runtime_facts_oracle.py all for each engine"


@pytest.mark.parametrize("path", FILES, ids=[p.parent.name for p in FILES])
def test_profile_runtime_facts_equal_vllms_answers(path: Path) -> None:
    mismatches, counted = _compare(path)
    assert not mismatches, f"{len(mismatches)} differences:\n" + "\n".join(mismatches[:40])
    # every capability answered; most builder facts are static and were compared
    assert counted["kernel_block_sizes"] >= 100 and counted["preferred_block_size"] >= 100
    assert counted["cudagraph_support"] >= 80 and counted["reorder_batch_threshold"] >= 80


WORKSPACE_FILES = [p for p in FILES if "mla_chunked_prefill_workspace" in json.loads(
    p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("path", WORKSPACE_FILES, ids=lambda p: p.parent.name)
def test_mla_profile_workspace_tokens_equal_vllms(path: Path) -> None:
    """The MLA profile-run stand-in's tokens (the budget's ``mla_profile_workspace``)
    against vLLM's own ``determine_chunked_prefill_workspace_size`` over its grid."""
    from selector.memory.budget import _mla_workspace_tokens
    from selector.memory.profile import startup_profile

    document = json.loads(path.read_text(encoding="utf-8"))
    spec = startup_profile(load_catalog(), f"vllm=={document['vllm_version']}").memory \
        .estimates.mla_profile_workspace
    assert spec is not None, "the profile states no MLA profile workspace"
    grid: dict[str, Any] = document["mla_chunked_prefill_workspace"]
    assert len(grid) >= 100
    for key, tokens in grid.items():
        length, seqs, block = (int(part) for part in key.split(","))
        assert _mla_workspace_tokens(spec, length, seqs, block) == tokens, key
