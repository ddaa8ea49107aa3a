"""The weight estimate (selector/memory/weights.py) against vLLM 0.33.0's own model classes,
for every real config.json the project ships and every preset, at TP 1 and 2 (and 4 and 8
for one dense, one MoE, one MLA and one hybrid model), part by part, without vLLM installed.

vLLM's answers: ``tests/golden/oracle/vllm-0.33.0/weights-configs.jsonl.gz``
(``tools/weights_oracle.py --real``: each model class built on the meta device, the
parameters of tensor-parallel rank 0). Every config is within 1 % of vLLM's bytes per GPU,
and every part group within 1 % of the whole, except those listed with their reason in
``tests/golden/weights_exceptions.yaml``. A missing answer file fails: goldens never write
themselves.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from selector.catalog import load_catalog
from selector.memory.weights_reference import WeightComparison, comparisons, load_answers
from tests.fuzz.test_config_fuzz import run_cli
from tools.weights_oracle import WIDE_TP, real_weight_configs

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = ROOT / "tests" / "golden" / "oracle" / "vllm-0.33.0" / "weights-configs.jsonl.gz"
EXCEPTIONS = yaml.safe_load((Path(__file__).parent / "weights_exceptions.yaml").read_text())
TOLERANCE = 0.01
PART_FLOOR = 0.005
"""A part group holding at least this share of the whole is compared against itself."""


@cache
def _answers() -> tuple[dict[str, Any], ...]:
    assert ANSWERS.is_file(), f"{ANSWERS} is missing: run tools/weights_oracle.py --real"
    return tuple(load_answers(ANSWERS))


@cache
def _rows() -> tuple[WeightComparison, ...]:
    return tuple(comparisons(load_catalog(), "vllm==0.33.0", _answers()))


def test_the_answers_cover_every_config_and_preset() -> None:
    grid = {row["id"]: row for row in real_weight_configs()}
    answers = {a["id"]: a for a in _answers()}
    assert list(answers) == list(grid)
    for name, answer in answers.items():
        assert answer["config"] == grid[name]["config"], name
        assert answer["source"] == grid[name]["source"], name
        assert answer["vllm_version"] == "0.33.0"


def test_vllm_refuses_only_the_listed_configs_with_its_words() -> None:
    refused = {a["id"]: a["error"] for a in _answers() if a["status"] != "ok"}
    assert set(refused) == set(EXCEPTIONS["refused"])
    for name, words in EXCEPTIONS["refused"].items():
        assert words in refused[name], (name, refused[name][:300])
    failed = {}
    for answer in _answers():
        if answer["status"] == "ok":
            for tp, built in answer["tp"].items():
                if built["status"] != "ok":
                    failed[(answer["id"], int(tp))] = built["error"]
    listed = {(name, tp): entry["error"] for name, entry in EXCEPTIONS["tp_errors"].items()
              for tp in entry["tp"]}
    assert set(failed) == set(listed)
    for key, words in listed.items():
        assert words in failed[key], (key, failed[key][:300])


def test_every_config_is_answered_at_tp_1_and_2_and_four_at_4_and_8() -> None:
    for answer in _answers():
        sizes = ("1", "2", "4", "8") if answer["id"] in WIDE_TP else ("1", "2")
        assert tuple(answer["tp"]) == sizes, answer["id"]
    kinds = {a["id"]: a["tp"]["1"].get("architecture") for a in _answers() if a["id"] in WIDE_TP}
    # one dense, one MoE, one MLA and one hybrid model at TP 4 and 8
    assert {"LlamaForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM",
            "NemotronHForCausalLM"} <= set(kinds.values())


def test_vllms_parameters_are_on_the_meta_device_and_sharded() -> None:
    """The recorder records only meta parameters (it raises otherwise); TP 2 halves the split
    layers of a dense model and leaves the norms whole."""
    llama = next(a for a in _answers() if a["id"] == "meta-llama--Llama-3.1-8B")
    one = {row[0]: row for row in llama["tp"]["1"]["parameters"]}
    two = {row[0]: row for row in llama["tp"]["2"]["parameters"]}
    assert one["model.layers.*.self_attn.qkv_proj.weight"][1:3] == ["QKVParallelLinear", [6144, 4096]]
    assert two["model.layers.*.self_attn.qkv_proj.weight"][2] == [3072, 4096]
    assert two["model.layers.*.self_attn.o_proj.weight"][1:3] == ["RowParallelLinear", [4096, 2048]]
    assert two["model.embed_tokens.weight"][1:3] == ["VocabParallelEmbedding", [64128, 4096]]
    assert two["model.norm.weight"][2] == [4096]


def _over(row: WeightComparison) -> dict[str, str]:
    """What is more than 1 % off: the total, or a part group holding at least 0.5 % of the
    whole (against itself), or any part group by more than 1 % of the whole."""
    out = {}
    error = row.error
    if error is not None and abs(error) > TOLERANCE:
        out["total"] = f"{error * 100:+.2f} %"
    for group in sorted(set(row.vllm_parts) | set(row.tool_parts)):
        mine, theirs = row.tool_parts.get(group, 0), row.vllm_parts.get(group, 0)
        large = max(mine, theirs) >= PART_FLOOR * row.vllm_bytes
        if abs(mine - theirs) > TOLERANCE * (max(theirs, 1) if large else row.vllm_bytes):
            out[group] = f"tool {mine / 1e9:.3f} GB, vLLM {theirs / 1e9:.3f} GB"
    return out


def test_every_config_is_within_one_percent_part_by_part() -> None:
    listed = {(name, tp, part) for name, entry in EXCEPTIONS["over"].items()
              for tp in entry["tp"] for part in entry["parts"]}
    off, unknown = {}, set()
    for row in _rows():
        if row.tool_bytes is None:
            unknown.add(row.id)
            continue
        for part, why in _over(row).items():
            off[(row.id, row.tp, part)] = why
    assert unknown == set(EXCEPTIONS["unknown"])
    unlisted = {key: value for key, value in off.items() if key not in listed}
    assert not unlisted, "\n".join(f"{k}: {v}" for k, v in unlisted.items())
    stale = listed - set(off)
    assert not stale, f"listed in weights_exceptions.yaml but now within 1 %: {sorted(stale)}"
    assert len(_rows()) > 150


def test_an_uncountable_part_makes_the_weights_unknown() -> None:
    for row in _rows():
        if row.id in EXCEPTIONS["unknown"]:
            assert row.unknown == (EXCEPTIONS["unknown"][row.id],), row.id


@pytest.mark.parametrize(("name", "tp"), [("meta-llama--Llama-3.1-8B", 8), ("Qwen--Qwen3-30B-A3B", 8),
                                          ("deepseek-ai--DeepSeek-R1", 8),
                                          ("nvidia--Nemotron-H-56B-Base-8K", 8)])
def test_wide_tensor_parallel_is_vllms(name: str, tp: int) -> None:
    row = next(r for r in _rows() if r.id == name and r.tp == tp)
    assert row.error is not None and abs(row.error) < TOLERANCE and not _over(row), (row.id, _over(row))


# ---------------------------------------------------------------- what a user sees


def _check(tmp_path: Path, config: str, device: str, *flags: str) -> tuple[int, dict[str, Any]]:
    folder = tmp_path / "model"
    folder.mkdir()
    raw = json.loads((ROOT / "tests" / "fixtures" / "hf_configs" / config).read_text())
    (folder / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    code, out, err = run_cli(["check", "--format", "json", "--device", device, "--",
                              "vllm", "serve", str(folder), *flags])
    assert out, err
    return code, json.loads(out)


def test_gptbigcode_weights_are_counted_not_zero(tmp_path: Path) -> None:
    """WizardCoder-15B (n_embd / n_layer / n_inner): about 29 GiB of weights, more than an RTX
    4090 has, where the tool once counted 0 B and found 1.1 M tokens of KV cache."""
    code, doc = _check(tmp_path, "WizardLM--WizardCoder-15B-V1.0.json", "RTX 4090")
    memory = doc["memory"]
    assert 28 < memory["weights"]["bytes_per_gpu"] / 1024**3 < 30
    assert code == 1 and doc["valid"] is False
    codes = {f["code"] for f in doc["findings"]}
    assert codes & {"MM001", "MM003"}, codes


def test_unknown_weights_are_not_checked(tmp_path: Path) -> None:
    """A Gemma-4 with per-layer input embeddings (the E2B / E4B layout, which the estimate
    does not count): the report says the fit was not checked and names no memory refusal."""
    raw = json.loads((ROOT / "tests" / "fixtures" / "hf_configs" /
                      "google--gemma-4-26B-A4B.json").read_text())
    raw["text_config"]["hidden_size_per_layer_input"] = 256
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    _, out, err = run_cli(["check", "--format", "json", "--device", "H200", "--",
                              "vllm", "serve", str(folder)])
    doc = json.loads(out)
    memory = doc["memory"]
    assert memory["weights"]["unknown"] == ["Gemma-4 per-layer embeddings"], err
    assert memory["not_checked"] and "not counted" in memory["not_checked"]
    assert memory["error"] is None and memory["kv_cache"] is None
    assert not {f["code"] for f in doc["findings"]} & {"MM001", "MM002", "MM003"}
    _, out, _ = run_cli(["check", "--device", "H200", "--", "vllm", "serve", str(folder)])
    assert re.search(r"not checked", out), out[-2000:]


def test_decilm_block_configs_start_on_a_b200(tmp_path: Path) -> None:
    """Llama-3.3-Nemotron-Super-49B (DeciLM block_configs: ffn_mult, no-op blocks): vLLM's
    49.9B parameters, which fit a B200, where the tool once counted 79.7B and said MM002."""
    code, doc = _check(tmp_path, "nvidia--Llama-3_3-Nemotron-Super-49B-v1.json", "B200")
    vllm_bytes = next(r.vllm_bytes for r in _rows()
                      if r.id == "nvidia--Llama-3_3-Nemotron-Super-49B-v1" and r.tp == 1)
    weights = doc["memory"]["weights"]["bytes_per_gpu"]
    assert abs(weights - vllm_bytes) < TOLERANCE * vllm_bytes
    assert code == 0 and doc["memory"]["kv_cache"]["fits"] is True
