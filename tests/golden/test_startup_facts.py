"""The model-type start-up facts of ``schemas/engines/*/startup.yaml`` against vLLM's own
answers, for every profiled engine, without vLLM installed:

* ``checks.max_model_len`` (the alias keys, ``prescaled_rope_types``,
  ``unscaled_model_types``): vLLM's ``ModelConfig.get_and_verify_max_len`` on a grid of
  synthetic configs (tools/max_len_oracle.py -> ``vllm-<v>/max-model-len.jsonl.gz``),
  compared with ``max_model_len_issue`` / ``derived_max_model_len`` word for word;
* ``memory.weights`` (``shared_expert_intermediate_types``, ``expert_bias_types``): the
  parameters of vLLM's model classes built on the meta device (tools/weights_oracle.py ->
  ``vllm-<v>/weights.jsonl.gz``), compared with ``estimate_weights`` part by part.

The grids are tools/startup_fact_grid.py. A missing answer file fails: goldens never
write themselves.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.memory import (
    default_max_model_len,
    derived_max_model_len,
    estimate_weights,
    max_model_len_issue,
    startup_profile,
)
from selector.models import parse_config
from tools.startup_fact_grid import HUGE_MAX_MODEL_LEN, max_len_configs, weight_configs

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tests" / "golden" / "oracle"
ENGINES = load_catalog().engine_names
DERIVED = re.compile(r"derived max_model_len \((\w+)=([^ ]+) or model_max_length=")

REFUSED_CONFIGS = {
    # transformers' Gemma3TextConfig fills rope_type=default per layer type and then
    # refuses a config.json whose rope_scaling spells the legacy `type` key: vLLM does not
    # come up; the tool does not model this refusal (it reads the same config as scaled).
    "Found conflicts between 'rope_type=default' (modern field) and 'type=":
        lambda row: row["config"]["model_type"] == "gemma3_text"
        and "type" in (row["config"].get("rope_scaling") or {}),
    # vLLM 0.31.0 pins transformers <5.18 (5.17.0 in its oracle venv): its Gemma3 text
    # config requires original_max_position_embeddings for yarn and cannot read a flat
    # rope_parameters; the other releases' transformers build both configs.
    "Missing required keys in `rope_parameters` for 'rope_type'='yarn'":
        lambda row: row["vllm_version"] == "0.31.0"
        and row["id"].startswith("gemma3_text-yarn2_no_original-"),
    "AttributeError: 'str' object has no attribute 'get'":
        lambda row: row["vllm_version"] == "0.31.0"
        and row["id"] == "gemma3_text-rope_parameters_linear4-mpe4096",
}


@cache
def _answers(engine: str, name: str) -> tuple[dict[str, Any], ...]:
    path = ORACLE / engine.replace("==", "-") / name
    assert path.is_file(), (
        f"{path} is missing: run tools/{'max_len' if 'len' in name else 'weights'}_oracle.py "
        "with that release's oracle interpreter (goldens never write themselves)")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


# ---------------------------------------------------------------- max_model_len


@pytest.mark.parametrize("engine", ENGINES)
def test_max_len_answers_cover_the_grid(engine: str) -> None:
    answers = _answers(engine, "max-model-len.jsonl.gz")
    grid = {row["id"]: row["config"] for row in max_len_configs()}
    assert [a["id"] for a in answers] == list(grid)
    for answer in answers:
        assert answer["config"] == grid[answer["id"]], answer["id"]
        assert answer["vllm_version"] == engine.removeprefix("vllm==")
        if answer["status"] == "ok":
            assert DERIVED.search(answer["asked"][str(HUGE_MAX_MODEL_LEN)]), answer["id"]
        else:
            assert any(text in answer["error"] and applies(answer)
                       for text, applies in REFUSED_CONFIGS.items()), answer["error"]


@pytest.mark.parametrize("engine", ENGINES)
def test_max_model_len_refusals_are_vllms(engine: str) -> None:
    """For every config and every asked length (a huge one, the derived length, one more):
    vLLM's ValueError text or acceptance, and the tool's SU002 message or None."""
    catalog = load_catalog()
    profile = startup_profile(catalog, engine)
    differ = []
    compared = 0
    for answer in _answers(engine, "max-model-len.jsonl.gz"):
        if answer["status"] != "ok":
            continue
        for asked, theirs in answer["asked"].items():
            issue = max_model_len_issue(catalog, profile, answer["config"],
                                        max_model_len=int(asked), environment={})
            mine = issue.message if issue else None
            compared += 1
            if mine != theirs:
                differ.append(f"{answer['id']} --max-model-len {asked}:\n  tool: {mine}\n"
                              f"  vLLM: {theirs}")
    assert compared > 300
    assert not differ, "\n".join(differ[:10]) + f"\n({len(differ)} of {compared} differ)"


@pytest.mark.parametrize("engine", ENGINES)
def test_derived_length_and_key_are_vllms(engine: str) -> None:
    """The derived length and key in vLLM's message, and the length vLLM runs with when
    no --max-model-len is given (the derived one, or a longrope model's top-level
    original length)."""
    profile = startup_profile(load_catalog(), engine)
    for answer in _answers(engine, "max-model-len.jsonl.gz"):
        if answer["status"] != "ok":
            continue
        match = DERIVED.search(answer["asked"][str(HUGE_MAX_MODEL_LEN)])
        assert match is not None
        found = derived_max_model_len(answer["config"], profile)
        assert found is not None, answer["id"]
        assert (found[1], str(found[0])) == (match.group(1), match.group(2)), answer["id"]
        assert default_max_model_len(answer["config"], profile) == answer["default_max_model_len"], \
            answer["id"]


def test_the_grid_has_a_default_that_is_not_the_derived_length() -> None:
    """A longrope config with a top-level original length: vLLM's default differs from
    the derived length, so ``default_original_length_rope_types`` is exercised."""
    for engine in ENGINES:
        by_id = {a["id"]: a for a in _answers(engine, "max-model-len.jsonl.gz")}
        longrope = by_id["llama-longrope4-top_original4096-mpe16384"]
        yarn = by_id["llama-yarn4-top_original4096-mpe16384"]
        assert (longrope["default_max_model_len"], yarn["default_max_model_len"]) == (4096, 16384), \
            engine


def test_the_gemma3_exception_decides_answers_in_every_release() -> None:
    """The grid holds gemma3 configs whose answer differs from the same config under
    another model type, so ``unscaled_model_types`` is exercised, not just present."""
    for engine in ENGINES:
        by_id = {a["id"]: a for a in _answers(engine, "max-model-len.jsonl.gz")}
        gemma3 = by_id["gemma3_text-linear8-mpe4096"]["asked"][str(HUGE_MAX_MODEL_LEN)]
        gemma2 = by_id["gemma2-linear8-mpe4096"]["asked"][str(HUGE_MAX_MODEL_LEN)]
        assert "max_position_embeddings=4096" in gemma3 and "=32768.0" in gemma2, engine


# ---------------------------------------------------------------- weights

_PARTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("expert biases", re.compile(r"\.experts\.(?:routed_experts\.)?w(?:13|2)_bias$")),
    ("routed experts", re.compile(r"\.experts\.(?:routed_experts\.)?w(?:13|2)_weight$")),
    ("shared experts", re.compile(r"\.shared_experts?\.\w+\.weight$")),
    ("router", re.compile(r"\.(?:router|gate)\.weight$")),
    ("vision tower", re.compile(r"^(?:vision_model|multi_modal_projector)\.")),
    ("embedding", re.compile(r"^model\.(?:embed_tokens|embedding)\.weight$")),
    ("lm_head", re.compile(r"^lm_head\.weight$")),
    ("attention", re.compile(r"\.(?:self_attn|attn)\.(?:qkv_proj|o_proj)\.weight$")),
    ("dense MLP", re.compile(r"\.(?:mlp|feed_forward)\.(?:gate_up_proj|down_proj)\.weight$")),
)
_LEFT_OUT = re.compile(r"(?:norm\.weight|\.bias|\.sinks)$")
"""What the estimate leaves out by design (weights.py's docstring): norms, the biases other
than the experts', attention sinks."""


def _vllm_parts(parameters: list[list[Any]]) -> dict[str, int]:
    parts: dict[str, int] = {}
    for full_name, shape, _dtype in parameters:
        name = full_name.removeprefix("language_model.")
        part = next((label for label, pattern in _PARTS if pattern.search(name)), None)
        if part is None:
            assert _LEFT_OUT.search(name), f"unclassified vLLM parameter {name}"
            part = "left out"
        parts[part] = parts.get(part, 0) + math.prod(shape)
    return parts


@pytest.mark.parametrize("engine", ENGINES)
def test_weight_answers_cover_the_grid(engine: str) -> None:
    answers = _answers(engine, "weights.jsonl.gz")
    grid = {row["id"]: row["config"] for row in weight_configs()}
    assert [a["id"] for a in answers] == list(grid)
    for answer in answers:
        assert answer["config"] == grid[answer["id"]]
        assert answer["vllm_version"] == engine.removeprefix("vllm==")
        assert answer["status"] == "ok", answer.get("error")


@pytest.mark.parametrize("engine", ENGINES)
def test_weight_parts_are_vllms(engine: str) -> None:
    """Every part the estimate names holds exactly the parameters of vLLM's model class;
    the rest of vLLM's parameters are the documented left-outs."""
    profile = startup_profile(load_catalog(), engine)
    for answer in _answers(engine, "weights.jsonl.gz"):
        raw = answer["config"]
        facts = parse_config(raw, file=answer["id"], name=answer["id"])
        estimate = estimate_weights(raw, layer_kinds=tuple(layer.kind for layer in facts.layers),
                                    tp=1, dtype_bytes=2, cc=90, profile=profile)
        mine = {part.name: part.params for part in estimate.parts}
        theirs = _vllm_parts(answer["parameters"])
        left_out = theirs.pop("left out", 0)
        # the vision tower is a rough estimate (weights.py: _vision_params); present on both sides
        assert ("vision tower" in mine) == ("vision tower" in theirs), answer["id"]
        mine.pop("vision tower", None)
        theirs.pop("vision tower", None)
        assert mine == theirs, (answer["id"], mine, theirs)
        assert left_out < 0.01 * sum(theirs.values()), answer["id"]


def test_the_weight_facts_decide_parts_in_every_release() -> None:
    """llama4 has a shared expert and gpt_oss expert biases in vLLM's classes; the
    controls (mixtral, qwen3_moe) have neither, so both facts are exercised."""
    for engine in ENGINES:
        parts = {a["id"]: _vllm_parts(a["parameters"]) for a in _answers(engine, "weights.jsonl.gz")}
        assert parts["llama4_text-moe-every-layer"]["shared experts"] == 4 * 3 * 256 * 384
        assert parts["llama4-multimodal"]["shared experts"] == 2 * 3 * 256 * 384
        assert parts["gpt_oss"]["expert biases"] == 2 * 4 * (2 * 256 + 256)
        for control in ("mixtral-control", "qwen3_moe-control"):
            assert "shared experts" not in parts[control] and "expert biases" not in parts[control]


@pytest.mark.parametrize("engine", ["vllm==0.25.1", "vllm==0.30.0", "vllm==0.33.0"])
def test_a_model_deployment_plans_the_kv_cache_at_vllms_default_length(
        engine: str, tmp_path: Path) -> None:
    """Without ``max_model_len`` the KV plan (capacity, concurrency) uses the length vLLM
    runs with: the grid's configs as a ``model:`` deployment, against vLLM's answer."""
    from selector.inputs.config import load_deployment
    from selector.pipeline.deployment import solve_deployment

    catalog = load_catalog()
    wanted = ("llama-longrope4-top_original4096-mpe16384", "llama-yarn4-top_original4096-mpe16384",
              "llama-yarn4-mpe4096", "llama-linear2-mpe4096", "llama-none-seq_length2048",
              "gemma3_text-linear8-mpe4096", "qwen2-longrope4-mpe8192")
    answers = {a["id"]: a for a in _answers(engine, "max-model-len.jsonl.gz")}
    checked = 0
    for name in wanted:
        answer = answers.get(name)
        if answer is None or answer["status"] != "ok":
            continue
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(answer["config"]), encoding="utf-8")
        (folder / "deploy.yaml").write_text(
            f"device: H100\nengine: '{engine}'\nmodel: ./config.json\n", encoding="utf-8")
        solved = solve_deployment(load_deployment(str(folder / "deploy.yaml")), catalog)
        assert solved.model is not None and solved.model.plan is not None, name
        assert solved.model.plan.capacity.max_model_len == answer["default_max_model_len"], name
        checked += 1
    assert checked >= 5
