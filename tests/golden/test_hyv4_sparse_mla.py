"""HY-V4's sparse layers and learnable sink against vLLM 0.33.0's own build
(``tests/golden/vllm_models/vllm-0.33.0-hyv4.jsonl.gz``, recorded by
``tools/vllm_model_reference.py`` from the synthetic configs of
``tools/synthetic_model_configs.py``): every cache module vLLM registered under the backend
its layer bound (vllm/models/hy_v4/nvidia/attention.py:318-341, :544-641), the tool's
module of the same name under the same backend."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSWERS = REPO / "tests" / "golden" / "vllm_models" / "vllm-0.33.0-hyv4.jsonl.gz"
GRID = REPO / "tests" / "golden" / "vllm_models" / "hyv4" / "vllm-0.33.0-grid.jsonl.gz"
"""The sparse and all-sparse configs on an emulated H200 and B200, with no
``--attention-backend``, ``FLASH_ATTN_MLA_SPARSE`` and ``FLASHMLA_SPARSE``, each with the
default KV-cache dtype and ``fp8`` (``tools/model_driven_reference.py --capability 9.0
--capability 10.0 --backends FLASH_ATTN_MLA_SPARSE FLASHMLA_SPARSE --kv-cache-dtype auto
--kv-cache-dtype fp8``)."""
KNOWN_GAPS: set[tuple[str, str, str | None, str | None]] = set()
"""(config, capability, backend, dtype) the tool does not build as vLLM yet (none: the dense
layers after a FLASHMLA_SPARSE layer at fp8, which vLLM refuses because that layer rewrote
the shared cache dtype to fp8_ds_mla, are the profile's ``kv_cache_dtype_rewrite``:
tests/golden/test_kv_cache_dtype_rewrite.py)."""


def _grid() -> list[dict[str, Any]]:
    with gzip.open(GRID, "rt", encoding="utf-8") as f:
        return [a for a in map(json.loads, f) if a["config"] != "<backend classes>"]


def _key(answer: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    return (Path(answer["config"]).stem, str(answer.get("capability")),
            answer.get("attention_backend"), answer.get("kv_cache_dtype"))


def _tool_modules(answer: dict[str, Any]) -> list[tuple[int, str, str]] | None:
    """The tool's (layer, role, backend) per cache module for the reference's deployment;
    None: the tool refuses it."""
    sys.path.insert(0, str(REPO / "tools"))
    from model_agreement import reference_deployment

    from selector.catalog import load_catalog
    from selector.errors import InputError
    from selector.inputs.config import parse_deployment
    from selector.pipeline.deployment import solve_deployment

    try:
        loaded = parse_deployment("<reference deployment>", reference_deployment(answer, 8192))
        solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                                  refuse_split=False)
    except InputError:
        return None
    if solved.model is None or solved.model.plan is None or not solved.model.plan.ok:
        return None
    return sorted((e.layer_index, e.role, e.backend.name) for e in solved.model.plan.entries)


def _vllm_modules(answer: dict[str, Any]) -> list[tuple[int, str, str]]:
    return sorted((r["index"], "indexer" if r["module"] == "DeepseekV32IndexerCache"
                   else "attention", r["backend"]) for r in answer["layers"])


@pytest.mark.parametrize("answer", _grid(), ids=lambda a: "-".join(map(str, _key(a))))
def test_each_gpu_backend_and_dtype_builds_as_vllm(answer: dict[str, Any]) -> None:
    """vLLM's build under each pin and dtype: the same backend per cache module (the
    sink bound to FLASHMLA_SPARSE whatever sparse backend is pinned, a pinned sparse
    backend refused for the dense layers), or a refusal where vLLM refuses."""
    have = _tool_modules(answer)
    want = _vllm_modules(answer) if answer["status"] == "ok" else None
    if _key(answer) in KNOWN_GAPS:
        assert have != want, f"{_key(answer)} agrees now: drop it from KNOWN_GAPS"
        return
    assert have == want, answer.get("error")


def _answers() -> list[dict[str, Any]]:
    with gzip.open(ANSWERS, "rt", encoding="utf-8") as f:
        return [a for a in map(json.loads, f) if a["status"] == "ok"]


def test_vllms_refusals_of_indexer_types_are_the_tools() -> None:
    """A sparse layer's compute_skip_topk_layers refuses indexer_types of the wrong length
    or with an unknown entry (attention.py:84-94); the tool's refusal is vLLM's."""
    from selector.models.loader import load_model

    with gzip.open(ANSWERS, "rt", encoding="utf-8") as f:
        refused = [a for a in map(json.loads, f) if a["status"] != "ok"]
    assert len(refused) == 2
    for answer in refused:
        assert load_model(REPO / answer["config"]).refusals == (answer["error"],)


@pytest.mark.parametrize("answer", _answers(), ids=lambda a: Path(a["config"]).stem)
def test_each_cache_module_has_vllms_backend(answer: dict[str, Any]) -> None:
    assert _tool_modules(answer) == _vllm_modules(answer)


def test_the_configs_exercise_each_branch() -> None:
    """Dense MLA (no layer_types), sparse layers with an own indexer and with a shared
    top-k, the sink bound to FLASHMLA_SPARSE on sparse layers only, and no sink."""
    backends = {Path(a["config"]).stem: {r["backend"] for r in a["layers"]} for a in _answers()}
    assert backends == {
        "HYV4ForCausalLM": {"FLASH_ATTN_MLA"},
        "HYV4ForCausalLM-sparse": {"FLASH_ATTN_MLA", "FLASHMLA_SPARSE", "DEEPSEEK_V32_INDEXER"},
        "HYV4ForCausalLM-shared": {"FLASH_ATTN_MLA_SPARSE", "DEEPSEEK_V32_INDEXER"},
    }
