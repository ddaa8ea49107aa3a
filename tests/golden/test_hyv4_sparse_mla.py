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
    sys.path.insert(0, str(REPO / "tools"))
    from model_agreement import reference_deployment

    from selector.catalog import load_catalog
    from selector.inputs.config import parse_deployment
    from selector.pipeline.deployment import solve_deployment

    loaded = parse_deployment("<reference deployment>", reference_deployment(answer, 8192))
    solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                              refuse_split=False)
    assert solved.model is not None and solved.model.plan is not None
    have = sorted((e.layer_index, e.role, e.backend.name) for e in solved.model.plan.entries)
    want = sorted((r["index"], "indexer" if r["module"] == "DeepseekV32IndexerCache" else "attention",
                   r["backend"]) for r in answer["layers"])
    assert have == want


def test_the_configs_exercise_each_branch() -> None:
    """Dense MLA (no layer_types), sparse layers with an own indexer and with a shared
    top-k, the sink bound to FLASHMLA_SPARSE on sparse layers only, and no sink."""
    backends = {Path(a["config"]).stem: {r["backend"] for r in a["layers"]} for a in _answers()}
    assert backends == {
        "HYV4ForCausalLM": {"FLASH_ATTN_MLA"},
        "HYV4ForCausalLM-sparse": {"FLASH_ATTN_MLA", "FLASHMLA_SPARSE", "DEEPSEEK_V32_INDEXER"},
        "HYV4ForCausalLM-shared": {"FLASH_ATTN_MLA_SPARSE", "DEEPSEEK_V32_INDEXER"},
    }
