"""The weights of quantized checkpoints and of ``--quantization`` against vLLM's own:
the parameters vLLM 0.33.0's quant methods create on small models built on the meta
device (tools/quant_oracle.py -> ``vllm-0.33.0/quant-weights.jsonl.gz``), compared with
``estimate_weights`` (selector/memory/quant.py) part by part, in bytes."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.memory.profile import startup_profile
from selector.memory.weights import estimate_weights
from selector.models.hf_config import parse_config

ENGINE = "vllm==0.33.0"
ANSWERS = Path(__file__).parent / "oracle" / "vllm-0.33.0" / "quant-weights.jsonl.gz"

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1, "uint8": 1,
                "int32": 4, "int64": 8, "int8": 1}

_STORED = r"(?:weight|qweight|weight_packed|scales|qzeros|weight_scale_inv|weight_scale)"
_PARTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("expert biases", re.compile(r"\.experts\.(?:routed_experts\.)?w(?:13|2)_bias$")),
    ("routed experts", re.compile(rf"\.experts\.(?:routed_experts\.)?w(?:13|2)_{_STORED}$")),
    ("shared experts", re.compile(rf"\.shared_experts?\.\w+\.{_STORED}$")),
    ("router", re.compile(rf"\.(?:router|gate)\.{_STORED}$")),
    ("embedding", re.compile(r"^model\.(?:embed_tokens|embedding)\.weight$")),
    ("lm_head", re.compile(r"^lm_head\.weight$")),
    ("attention", re.compile(rf"\.(?:self_attn|attn)\.(?:qkv_proj|o_proj)\.{_STORED}$")),
    ("dense MLP", re.compile(rf"\.(?:mlp|feed_forward)\.(?:gate_up_proj|down_proj)\.{_STORED}$")),
)
_LEFT_OUT = re.compile(r"(?:norm\.weight|\.bias|\.sinks|_scale|_scale_2|_zero_point|"
                       r"weight_shape|g_idx)$")
"""Norms, biases, sinks, and the quant methods' per-tensor, per-shard and per-output-row
scalars and vectors (quant.py's docstring: left out)."""


_BLOCK_ROUNDED = {"qwen3_moe-fp8-block": ("router",),
                  "qwen3_moe-fp8-block-not-converted": ("router",)}


def _per_row(name: str, shape: list[int]) -> bool:
    """A scale that is one value per tensor, shard or output row, not per group."""
    if not name.endswith(("weight_scale", "w13_weight_scale", "w2_weight_scale")):
        return False
    moe = ".experts." in name
    return len(shape) < (3 if moe else 2) or shape[-1] == 1


def _vllm_bytes(parameters: list[list[Any]]) -> tuple[dict[str, int], int]:
    parts: dict[str, int] = {}
    left_out = 0
    for full_name, shape, dtype in parameters:
        name = full_name.removeprefix("language_model.")
        size = math.prod(shape) * _DTYPE_BYTES[dtype]
        part = None if _per_row(name, shape) else next(
            (label for label, pattern in _PARTS if pattern.search(name)), None)
        if part is None:
            assert _LEFT_OUT.search(name), f"unclassified vLLM parameter {name} {shape} {dtype}"
            left_out += size
            continue
        parts[part] = parts.get(part, 0) + size
    return parts, left_out


def _answers() -> list[dict[str, Any]]:
    if not ANSWERS.is_file():
        pytest.fail(f"{ANSWERS} is missing: run tools/quant_oracle.py")
    with gzip.open(ANSWERS, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _mine(answer: dict[str, Any]) -> dict[str, int]:
    profile = startup_profile(load_catalog(), ENGINE)
    raw = answer["config"]
    facts = parse_config(raw, file=answer["id"], name=answer["id"])
    estimate = estimate_weights(raw, layer_kinds=tuple(layer.kind for layer in facts.layers),
                                tp=1, dtype_bytes=2, cc=90, profile=profile,
                                quantization=answer["engine_args"].get("quantization"))
    out: dict[str, int] = {}
    for part in estimate.parts:
        name = part.name.removesuffix(" (not quantized)")
        out[name] = out.get(name, 0) + part.bytes
    return out


def test_the_answers_cover_the_grid() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    from quant_oracle import quant_configs

    rows = quant_configs()
    answers = _answers()
    assert [a["id"] for a in answers] == [row["id"] for row in rows]
    for answer, row in zip(answers, rows, strict=True):
        assert answer["config"] == row["config"] and answer["engine_args"] == row["engine_args"]
        assert answer["vllm_version"] == "0.33.0"


def _checkpoint_answers() -> list[dict[str, Any]]:
    return [a for a in _answers() if a["status"] == "ok" and not a["engine_args"]]


@pytest.mark.parametrize("answer", _checkpoint_answers(), ids=lambda a: a["id"])
def test_quantized_checkpoint_parts_are_vllms(answer: dict[str, Any]) -> None:
    """Every part holds the bytes of vLLM's stored weights, group scales and zero points;
    what is left out is under 3 % at these small sizes (per-row vectors shrink as 1/K)."""
    theirs, left_out = _vllm_bytes(answer["parameters"])
    mine = _mine(answer)
    for part in _BLOCK_ROUNDED.get(answer["id"], ()):
        # 8 router outputs are ceil(8 / 128) = 1 row of 128 x 128 blocks: vLLM rounds the
        # block count up (utils/fp8_utils.py:1413-1420), the tool counts scale bits per weight
        assert 0 < theirs[part] - mine[part] <= 4 * 2 * answer["config"]["num_hidden_layers"]
        mine[part] = theirs[part]
    assert mine == theirs, (answer["id"], mine, theirs)
    assert left_out < 0.03 * sum(theirs.values()), answer["id"]


def test_vllm_refuses_gptq_activation_ordering() -> None:
    """desc_act=True is refused by vLLM 0.33.0 at start-up (the row's error)."""
    refused = [a for a in _answers() if a["status"] != "ok"]
    assert [a["id"] for a in refused] == ["llama-gptq-g128-act-order"]
    assert "desc_act=True) is no longer supported" in refused[0]["error"]


@pytest.mark.parametrize("answer", [a for a in _answers() if a["engine_args"]],
                         ids=lambda a: a["id"])
def test_online_quantization_builds_the_checkpoint_dtype_first(answer: dict[str, Any]) -> None:
    """``--quantization fp8*`` on a bfloat16 checkpoint: vLLM builds the layers in
    bfloat16 on the meta device (OnlineQuantizationConfig) and quantizes each as it loads,
    so the parts the tool quantizes are exactly the linear and MoE layers vLLM built with
    the online method, each at 1 byte per weight after loading."""
    assert answer["status"] == "ok" and answer["quant_config"] == "OnlineQuantizationConfig"
    theirs, _ = _vllm_bytes(answer["parameters"])
    mine = _mine(answer)
    for part in ("embedding", "lm_head"):
        assert mine[part] == theirs[part]
    for part in ("attention", "dense MLP", "routed experts"):
        if part in theirs:
            assert mine[part] * 2 in range(theirs[part], theirs[part] + theirs[part] // 100), (
                answer["id"], part, mine[part], theirs[part])
