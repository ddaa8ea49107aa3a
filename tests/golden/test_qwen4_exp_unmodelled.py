"""Qwen4Exp's QSA and PLE layers (issue 24): vLLM builds them, attn-select does not model
them yet. vLLM's answers for the configs that set them are recorded
(``tests/golden/vllm_models/unmodelled/vllm-<release>-qwen4.jsonl.gz``, 0.29.0-0.33.0,
written by ``tools/model_driven_reference.py --cuda-runtime 13.0``), and the reader refuses those configs in the words of the
family's ``unmodelled_when`` rather than reading them as the family's other layers; a config
without them is the ``qwen4_exp`` family's (its agreement with vLLM:
``tests/golden/test_vllm_model_agreement.py`` over ``vllm-<release>-qwen4.jsonl.gz``)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from selector.errors import InputError
from selector.models import load_model
from selector.models.families import family_for
from selector.models.hf_config import parse_config

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "vllm_models" / "unmodelled"
RELEASES = ("0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")
"""The releases whose registry has Qwen4Exp (vllm/models/qwen4_exp/), each answered."""
CONFIGS = ROOT / "tests" / "fixtures" / "hf_configs" / "unmodelled"
VARIANTS = {"qsa": "indexer_n_heads", "ple": "ple_layer_ids", "qsa-ple": "indexer_n_heads"}
"""Each unmodelled config and the field the reader names first."""


@cache
def _answers() -> tuple[dict[str, Any], ...]:
    out: list[dict[str, Any]] = []
    for release in RELEASES:
        path = GOLDEN / f"vllm-{release}-qwen4.jsonl.gz"
        assert path.is_file(), f"{path} is missing: run tools/model_driven_reference.py"
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        runs = [row for row in rows if "backends" not in row]
        assert runs and all(row["vllm_version"] == release for row in runs), path.name
        # the wheel's CUDA runtime (cu13), which SM10x's GDN prefill kernel asks for
        assert all(row.get("cuda_runtime") == "13.0" for row in runs), path.name
        out.extend(runs)
    return tuple(out)


def _runs(variant: str) -> list[dict[str, Any]]:
    name = f"Qwen4ExpForCausalLM-{variant}.json"
    return [a for a in _answers() if Path(str(a["config"])).name == name]


def _caches(answer: dict[str, Any], suffix: str) -> list[dict[str, Any]]:
    return [r for r in answer["layers"] if str(r["name"]).endswith(suffix)]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_answers_are_vllms_on_both_gpus(variant: str) -> None:
    runs = _runs(variant)
    assert runs, variant
    assert all(a["status"] in ("ok", "refused") for a in runs), variant
    for release in RELEASES:
        mine = [a for a in runs if a["vllm_version"] == release]
        assert {a["capability"] for a in mine} == {"9.0", "10.0"}, (variant, release)


@pytest.mark.parametrize("variant", ["qsa", "qsa-ple"])
def test_qsa_layers_pin_their_backend_beside_a_ring_and_a_compressed_cache(variant: str) -> None:
    """qsa.py:475, :552-560; common/qsa_cache.py:727-757, :842-875: on every build,
    whatever --attention-backend says, the attention layers (3 and 7) are QSA."""
    config = json.loads((CONFIGS / f"Qwen4ExpForCausalLM-{variant}.json").read_text())
    ratio = config["indexer_compress_ratio"]
    for answer in (a for a in _runs(variant) if a["status"] == "ok"):
        assert answer["kv_cache_layout"] == "BLNHC", answer
        main = _caches(answer, ".self_attn.attn")
        ring = _caches(answer, ".indexer.raw_key_cache")
        compressed = _caches(answer, ".indexer.compressed_key_cache")
        assert [r["index"] for r in main] == [r["index"] for r in ring] == [3, 7]
        assert {(r["spec"], r["backend"]) for r in main} == {
            ("FullAttentionSpec", "QWEN4_EXP_QSA_TRITON")}
        assert {(r["spec"], r["backend"], r["block_size"], r["num_kv_heads"],
                 r["head_size"]) for r in ring} == {
            ("CircularBufferSpec", "QWEN4_EXP_EXP_QSA_STATE", ratio, 1,
             config["indexer_head_dim"])}
        assert {(r["spec"], r["backend"]) for r in compressed} == {
            ("MLAAttentionSpec", "QWEN4_EXP_EXP_QSA_STATE")}
        # one row of indexer_head_dim bf16 per compress_ratio tokens (tokens_per_state)
        assert {r["page_size_bytes"] for r in compressed} == {
            answer["block_size"] // ratio * config["indexer_head_dim"] * 2}
        groups = answer["aligned"]["groups"]
        assert {g["spec"] for g in groups} == {"UniformTypeKVCacheSpecs"}
        assert [g["block_size"] for g in groups if g["layers"] == [3, 7]] == [ratio]


@pytest.mark.parametrize("variant", ["ple", "qsa-ple"])
def test_ple_layers_keep_a_second_state_beside_their_gated_deltanet(variant: str) -> None:
    """nvidia/model.py:210-223, :786-809: the one-indexed ple_layer_ids layers."""
    config = json.loads((CONFIGS / f"Qwen4ExpForCausalLM-{variant}.json").read_text())
    width = config["hc_count"] * config["hidden_size"]
    taps = (config["ple_conv_kernel_size"] - 1) * config["ngram_size"]
    for answer in (a for a in _runs(variant) if a["status"] == "ok"):
        ple = _caches(answer, ".ple")
        assert [r["index"] for r in ple] == [i - 1 for i in config["ple_layer_ids"]]
        assert {(r["spec"], r["backend"], json.dumps(r["shapes"])) for r in ple} == {
            ("MambaSpec", "PLE_SHORT_CONV_ATTN", json.dumps([[taps, width]]))}
        gdn = _caches(answer, ".linear_attn")
        assert {r["index"] for r in ple} <= {r["index"] for r in gdn}


@pytest.mark.parametrize(("variant", "field"), sorted(VARIANTS.items()))
def test_the_reader_refuses_what_it_does_not_model(variant: str, field: str) -> None:
    path = CONFIGS / f"Qwen4ExpForCausalLM-{variant}.json"
    with pytest.raises(InputError) as raised:
        load_model(path)
    text = str(raised.value)
    assert f"'{field}'" in text and "not modelled by attn-select yet" in text, text
    family = family_for("Qwen4ExpForCausalLM")
    assert family is not None and family.unmodelled_when[field] in text


def test_a_config_without_them_is_the_familys() -> None:
    """Null or empty fields are read (the class's ple_layer_ids [] and indexer_n_heads None);
    indexed_attention, the spelling transformers 5.18 writes, is full attention."""
    synthetic = ROOT / "tests" / "fixtures" / "hf_configs" / "synthetic"
    for name in ("Qwen4ExpForCausalLM.json", "Qwen4ExpForCausalLM-indexed.json",
                 "Qwen4ExpForConditionalGeneration.json"):
        facts = load_model(synthetic / name)
        assert facts.family == "qwen4_exp", name
        assert [layer.kind for layer in facts.layers] == (["gdn"] * 3 + ["attention"]) * 2, name


def test_a_wrapper_is_refused_by_its_text_config() -> None:
    """Qwen4ExpForConditionalGeneration reads the QSA fields from its text_config."""
    path = ROOT / "tests" / "fixtures" / "hf_configs" / "synthetic" / "Qwen4ExpForConditionalGeneration.json"
    raw = json.loads(path.read_text())
    raw["text_config"] = {**raw["text_config"], "indexer_n_heads": 4}
    with pytest.raises(InputError) as raised:
        parse_config(raw, file=str(path))
    assert "'text_config.indexer_n_heads'" in str(raised.value), str(raised.value)
