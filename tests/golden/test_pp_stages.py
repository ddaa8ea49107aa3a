"""Pipeline parallelism as vLLM 0.33.0 splits it (tools/pp_oracle.py): the decoder layers
of each stage (``get_pp_indices``, with and without ``VLLM_PP_LAYER_PARTITION``, its
refusals word for word) and each stage's parameters (vLLM's model classes built as one
stage of the pipeline: the embedding on the first stage, or on the last too when tied,
the lm_head on the last), against selector/memory/pp.py and ``estimate_weights(stage=)``."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.memory.issues import startup_issue
from selector.memory.pp import PartitionRefusal, pp_stages
from selector.memory.profile import startup_profile
from selector.memory.weights import estimate_weights
from selector.models.hf_config import parse_config
from tests.fuzz.test_config_fuzz import run_cli

GOLDEN = Path(__file__).parent / "oracle" / "vllm-0.33.0"


def _indices() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / "pp-indices.json").read_text(encoding="utf-8"))
    assert data["vllm_version"] == "0.33.0"
    return data


def test_even_split_is_vllms() -> None:
    grid = _indices()["grid"]
    assert len(grid) > 100
    for row in grid:
        assert [list(stage) for stage in pp_stages(row["layers"], row["pp_size"])] \
            == row["stages"], row


def test_partition_strings_are_vllms_with_its_refusals() -> None:
    catalog = load_catalog()
    codes = startup_profile(catalog, "vllm==0.33.0").memory.pp_partition_codes
    for row in _indices()["partitions"]:
        found = pp_stages(row["layers"], row["pp_size"], row["partition"])
        if isinstance(row["answer"], str):
            assert isinstance(found, PartitionRefusal), row
            issue = startup_issue(catalog, codes[found.check], ("parallel",), **found.values)
            assert issue.message == row["answer"]
        else:
            assert not isinstance(found, PartitionRefusal)
            assert [list(stage) for stage in found] == row["answer"], row


_DTYPE_BYTES = {"bfloat16": 2, "float32": 4}
_PARTS = (("expert biases", re.compile(r"\.experts\.(?:routed_experts\.)?w(?:13|2)_bias$")),
          ("routed experts", re.compile(r"\.experts\.(?:routed_experts\.)?w(?:13|2)_weight$")),
          ("router", re.compile(r"\.(?:gate|router)\.weight$")),
          ("embedding", re.compile(r"^model\.(?:embed_tokens|embedding)\.weight$")),
          ("lm_head", re.compile(r"^lm_head\.weight$")),
          ("attention", re.compile(r"\.(?:self_attn|attn)\.(?:qkv_proj|o_proj)\.weight$")),
          ("dense MLP", re.compile(r"\.(?:mlp|block_sparse_moe)\.(?:gate_up_proj|down_proj)\.weight$")))
_LEFT_OUT = re.compile(r"(?:norm\.weight|\.bias|\.sinks)$")
"""What the estimate leaves out by design (weights.py): norms, biases other than the
experts', attention sinks."""


def _stage_rows() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN / "pp-weights.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.parametrize("row", _stage_rows(), ids=lambda row: row["id"])
def test_each_stage_holds_vllms_parameters(row: dict[str, Any]) -> None:
    assert row["status"] == "ok", row.get("error")
    theirs: dict[str, int] = {}
    layers: set[int] = set()
    for full_name, shape, dtype in row["parameters"]:
        name = full_name
        if (match := re.search(r"\.layers\.(\d+)\.", name)) is not None:
            layers.add(int(match.group(1)))
        part = next((label for label, pattern in _PARTS if pattern.search(name)), None)
        if part is None:
            assert _LEFT_OUT.search(name), name
            continue
        theirs[part] = theirs.get(part, 0) + math.prod(shape) * _DTYPE_BYTES[dtype]
    raw = row["config"]
    facts = parse_config(raw, file=row["id"], name=row["id"])
    split = pp_stages(len(facts.layers), row["pp_size"])
    assert not isinstance(split, PartitionRefusal)
    start, end = split[row["pp_rank"]]
    assert layers == set(range(start, end))
    estimate = estimate_weights(raw, layer_kinds=tuple(layer.kind for layer in facts.layers),
                                tp=1, dtype_bytes=2, cc=90,
                                profile=startup_profile(load_catalog(), "vllm==0.33.0"),
                                stage=(start, end))
    assert {part.name: part.bytes for part in estimate.parts} == theirs


def test_a_70b_on_two_h100_is_checked_per_stage() -> None:
    code, out, _ = run_cli(["check", "--device", "H100", "--format", "json", "--", "vllm",
                            "serve", "meta-llama/Llama-3.1-70B-Instruct", "-pp", "2",
                            "--max-model-len", "8192"])
    text = json.dumps(json.loads(out))
    assert code == 0
    assert "pipeline stage holding layers 0-39 of 2 stages" in text


def test_a_refused_partition_is_vllms_refusal() -> None:
    code, out, _ = run_cli(["check", "--device", "H100", "--", "VLLM_PP_LAYER_PARTITION=10,60",
                            "vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-pp", "2"])
    assert code == 1
    assert "[SU019]" in out and "sum(partitions)=70 does not match num_hidden_layers=80." in out
