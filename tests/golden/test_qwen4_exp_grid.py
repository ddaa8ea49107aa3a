"""Qwen4Exp's mapped layers (GatedDeltaNet state layers, gated full attention: the
``qwen4_exp`` family) against vLLM 0.33.0's own build on each emulated GPU, pin and KV-cache
dtype: the same backend per cache module and the same KV-cache groups once aligned (block
size, page bytes, layers), or a refusal where vLLM refuses."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
GRID = REPO / "tests" / "golden" / "vllm_models" / "qwen4_exp" / "vllm-0.33.0-grid.jsonl.gz"
"""tests/fixtures/hf_configs/synthetic/Qwen4ExpForCausalLM.json and
Qwen4ExpForConditionalGeneration.json on an emulated H200 and B200, with no
``--attention-backend``, ``FLASH_ATTN``, ``FLASHINFER`` and ``TRITON_ATTN``, each with the
default KV-cache dtype and ``fp8`` (``tools/model_driven_reference.py --cuda-runtime 13.0
--backends FLASH_ATTN FLASHINFER TRITON_ATTN``: the wheel's CUDA runtime, which SM10x's GDN
prefill kernel asks for)."""


def _grid() -> list[dict[str, Any]]:
    assert GRID.is_file(), f"{GRID} is missing: run tools/model_driven_reference.py"
    with gzip.open(GRID, "rt", encoding="utf-8") as f:
        return [a for a in map(json.loads, f) if "backends" not in a]


def _key(answer: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    return (Path(answer["config"]).stem, str(answer.get("capability")),
            answer.get("attention_backend"), answer.get("kv_cache_dtype"))


def _tool(answer: dict[str, Any]) -> tuple[list[tuple[int, str]], list[Any]] | None:
    """The tool's (layer, backend) per cache module and its groups for the reference's
    deployment; None: the tool refuses it."""
    sys.path.insert(0, str(REPO / "tools"))
    from model_agreement import reference_deployment, tool_groups

    from selector.catalog import load_catalog
    from selector.errors import InputError
    from selector.inputs.config import parse_deployment
    from selector.pipeline.deployment import solve_deployment

    try:
        loaded = parse_deployment("<reference deployment>", reference_deployment(answer, 8192))
        solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                                  refuse_split=False)
        groups = tool_groups(answer)
    except (InputError, ValueError):
        return None
    assert solved.model is not None and solved.model.plan is not None
    modules = sorted((e.layer_index, e.backend.name) for e in solved.model.plan.entries)
    return modules, groups


def _vllm(answer: dict[str, Any]) -> tuple[list[tuple[int, str]], list[Any]] | None:
    if answer["status"] != "ok":
        return None
    sys.path.insert(0, str(REPO / "tools"))
    from model_agreement import _vllm_groups

    modules = sorted((r["index"], r["backend"]) for r in answer["layers"])
    return modules, _vllm_groups(answer, len({r["index"] for r in answer["layers"]}))


def test_the_grid_covers_both_gpus_pins_and_dtypes() -> None:
    keys = {_key(a) for a in _grid()}
    assert len(keys) == 2 * 2 * 4 * 2
    assert {k[0] for k in keys} == {"Qwen4ExpForCausalLM", "Qwen4ExpForConditionalGeneration"}
    assert all(a["status"] in ("ok", "refused") for a in _grid())
    assert all(a.get("cuda_runtime") == "13.0" for a in _grid())


@pytest.mark.parametrize("answer", _grid(), ids=lambda a: "-".join(map(str, _key(a))))
def test_each_gpu_backend_and_dtype_builds_as_vllm(answer: dict[str, Any]) -> None:
    assert _tool(answer) == _vllm(answer), answer.get("error")
