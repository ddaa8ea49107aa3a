"""Facts that moved from Python into the data files give what the code used to state.

Each table below is the value the code hard-coded before it became data; the catalog
must give the same for every engine profile (behaviour unchanged)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from selector.catalog import CatalogError, _load_catalog_files, load_catalog
from selector.kv import BackendKVFacts, wired_backends
from selector.kv.layout import ENUM_ORDER
from selector.memory.profile import startup_profile
from selector.models.families import families, kv_heads_fields
from selector.util.resources import schemas_dir

ENGINES = load_catalog().engine_names

_SUGGESTIONS_IN_CODE: tuple[tuple[str, Any, str, str], ...] = (
    ("block_size", None, "remove --block-size (let vLLM choose)", "remove --block-size (let vLLM choose)"),
    ("kv_cache_dtype", "auto", "--kv-cache-dtype auto", "use --kv-cache-dtype auto"),
    ("kv_cache_dtype", "fp8", "--kv-cache-dtype fp8", "use --kv-cache-dtype fp8"),
    ("kv_cache_dtype", "fp8_e4m3", "--kv-cache-dtype fp8_e4m3", "use --kv-cache-dtype fp8_e4m3"),
    ("kv_cache_dtype", "fp8_ds_mla", "--kv-cache-dtype fp8_ds_mla", "use --kv-cache-dtype fp8_ds_mla"),
    ("block_size", 16, "--block-size 16", "use --block-size 16"),
    ("block_size", 32, "--block-size 32", "use --block-size 32"),
    ("block_size", 64, "--block-size 64", "use --block-size 64"),
    ("block_size", 128, "--block-size 128", "use --block-size 128"),
    ("dtype", "bfloat16", "--dtype bfloat16", "use --dtype bfloat16"),
    ("dtype", "float16", "--dtype float16", "use --dtype float16"),
    ("use_batch_invariant", False, "unset VLLM_BATCH_INVARIANT", "unset VLLM_BATCH_INVARIANT"),
    ("flash_attn_version", None, "remove -ac.flash_attn_version", "remove -ac.flash_attn_version"),
    ("use_trtllm_attention", None, "remove -ac.use_trtllm_attention",
     "remove -ac.use_trtllm_attention"),
)


@pytest.mark.parametrize("engine", ENGINES)
def test_fix_suggestions_are_the_ones_the_solver_hard_coded(engine: str) -> None:
    suggestions = load_catalog().engine(engine).profile.suggestions
    stated = tuple((s.input, s.value, s.flag, s.text) for s in suggestions)
    assert stated == _SUGGESTIONS_IN_CODE
    assert all(type(s.value) is type(old[1]) for s, old in zip(suggestions, _SUGGESTIONS_IN_CODE, strict=True))


def test_layout_aliases_are_the_ones_the_code_hard_coded() -> None:
    assert load_catalog().layout_aliases == {"NHD": "LBNHC", "HND": "LBHNC"}


def test_the_default_layout_preference_is_the_one_the_code_hard_coded() -> None:
    assert load_catalog().default_layout_preference == (
        "LBNHC", "LBHNC", "BLNHC", "BLHNC", "BHLNC", "LHBNC")
    assert ENUM_ORDER == ("LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC")


def test_per_layer_layout_names_are_the_ones_the_smoke_hard_coded() -> None:
    in_code = {"LBNHC": "NHD", "LBHNC": "HND", "BLNHC": "NHD", "BLHNC": "HND"}
    stated = load_catalog().per_layer_layouts
    assert {k: v for k, v in stated.items() if k in in_code} == in_code
    # vLLM also names BHLNC (HND), which no backend of any profile supports
    assert set(stated) - set(in_code) == {"BHLNC"}
    assert not any("BHLNC" in (variant.layouts or ())
                   for name in ENGINES for spec in load_catalog().engine(name).backends.values()
                   for variant in spec.runtime.kv_layouts)


_WIRED_IN_CODE: dict[str, dict[str, Any]] = {
    "mamba1": {"name": "MAMBA1_ATTN", "class_name": "Mamba1AttentionBackend",
               "cudagraph_support": "UNIFORM_BATCH", "reorder_batch_threshold": 1, "is_ssm": True},
    "mamba2": {"name": "MAMBA2_ATTN", "class_name": "Mamba2AttentionBackend",
               "cudagraph_support": "UNIFORM_BATCH", "reorder_batch_threshold": 1, "is_ssm": True},
    "gdn": {"name": "GDN_ATTN", "class_name": "GDNAttentionBackend",
            "cudagraph_support": "UNIFORM_BATCH", "reorder_batch_threshold": 1, "is_ssm": True},
    # added with LFM2's ShortConv layers (vLLM's answers: tests/golden/oracle/*/wired_backends.json)
    "short_conv": {"name": "SHORT_CONV_ATTN", "class_name": "ShortConvAttentionBackend",
                   "cudagraph_support": "UNIFORM_BATCH", "reorder_batch_threshold": 1,
                   "is_ssm": True},
    # added with Bailing-MoE-V2.5's lightning layers (vLLM's answers: the same files)
    "linear": {"name": "BAILING_LINEAR_ATTN", "class_name": "BailingLinearAttentionBackend",
               "cudagraph_support": "UNIFORM_BATCH", "reorder_batch_threshold": 1, "is_ssm": True},
    "sparse_indexer": {"name": "DEEPSEEK_V32_INDEXER", "class_name": "DeepseekV32IndexerBackend",
                       "kernel_block_sizes": (64,), "cudagraph_support": "UNIFORM_BATCH",
                       "reorder_batch_threshold": None},
}
"""``selector/kv/backend_facts.py``'s constants before the backend files stated them
(modelled on vLLM 0.33.0)."""


@pytest.mark.parametrize("engine", ENGINES)
def test_wired_backends_are_the_ones_the_kv_planner_hard_coded(engine: str) -> None:
    stated = wired_backends(load_catalog().engine(engine))
    expected = {key: BackendKVFacts(**fields) for key, fields in _WIRED_IN_CODE.items()}
    if engine == "vllm==0.25.1":
        # 0.25.1's indexer builder still reorders (threshold 1, indexer.py:241); 0.26.0 stopped
        expected["sparse_indexer"] = expected["sparse_indexer"].model_copy(
            update={"reorder_batch_threshold": 1})
    assert stated == expected


def test_the_kv_planner_takes_the_engines_rules_never_a_default_engines() -> None:
    from selector.kv import KVOptions

    options = KVOptions(cudagraph_mode="NONE", max_num_batched_tokens=8192, max_num_seqs=256,
                        gpu_memory_utilization=0.9)
    with pytest.raises(ValueError, match="for_engine"):
        options.engine_rules()
    engine = load_catalog().engine("vllm==0.25.1")
    wired, alignment = options.for_engine(engine).engine_rules()
    assert wired == wired_backends(engine) and alignment == engine.profile.hybrid_alignment



@pytest.mark.parametrize("engine", ENGINES)
def test_memory_model_types_are_the_ones_the_estimator_hard_coded(engine: str) -> None:
    profile = startup_profile(load_catalog(), engine)
    assert profile.checks.max_model_len.unscaled_model_types == ("gemma3",)
    assert set(profile.memory.weights.shared_expert_intermediate_types) == {"llama4_text", "llama4"}
    assert profile.memory.weights.expert_bias_types == ("gpt_oss",)


def test_nope_layers_are_llama4s_global_layers_as_the_parser_hard_coded() -> None:
    nope = {name: tuple(f.attention.nope_mixers) for name, f in families().items()
            if f.attention.nope_mixers}
    assert nope == {"llama4": ("full_attention",)}
    assert families()["llama4"].mixers.rule == "llama4"


def test_kv_head_fields_are_distinct_config_names() -> None:
    """What vLLM reads, and in which order: tests/golden/test_config_aliases.py."""
    fields = kv_heads_fields()
    assert fields and len(set(fields)) == len(fields)
    assert "num_attention_heads" not in fields  # vLLM's fallback, not a candidate


def _child(schemas: Path, backends: dict[str, dict[str, Any]], **profile: Any) -> str:
    """A scratch vllm==<newest minor + 1> profile with these backend files."""
    newest = _load_catalog_files(schemas_dir()).default_engine
    major, minor, _ = newest.split("==", 1)[1].split(".")
    child = f"vllm=={major}.{int(minor) + 1}.0"
    folder = schemas / "engines" / child.replace("==", "-", 1)
    (folder / "backends").mkdir(parents=True)
    (folder / "profile.yaml").write_text(
        yaml.safe_dump({"engine": child, "extends": newest, **profile}), encoding="utf-8")
    for name, body in backends.items():
        (folder / "backends" / f"{name}.yaml").write_text(yaml.safe_dump(body), encoding="utf-8")
    return child


def test_wired_backends_are_inherited_and_kept_apart_from_the_selectable_ones(schemas: Path) -> None:
    child = _child(schemas, {"GDN_ATTN": {"inherit": True, "runtime": {
        "cudagraph_support": [{"level": "ALWAYS"}]}}})
    data = _load_catalog_files(schemas).engine(child)
    assert set(data.wired) == {"mamba1", "mamba2", "gdn", "short_conv", "linear", "sparse_indexer"}
    assert not set(data.backends) & {spec.name for spec in data.wired.values()}
    assert wired_backends(data)["gdn"].cudagraph_support == "ALWAYS"
    assert wired_backends(data)["mamba2"].cudagraph_support == "UNIFORM_BATCH"


@pytest.mark.parametrize("patch", [
    {"runtime": {"cudagraph_support": [{"when": "cc >= 90", "level": "ALWAYS"}]}},
    {"runtime": {"reorder_batch_threshold": [{"value": "1 + num_speculative_tokens"}]}},
])
def test_a_wired_backend_states_plain_unconditional_facts(schemas: Path, patch: dict[str, Any]) -> None:
    child = _child(schemas, {"GDN_ATTN": {"inherit": True, **patch}})
    with pytest.raises(CatalogError, match="wired backend"):
        _load_catalog_files(schemas).engine(child)


def test_every_wired_layer_kind_has_a_backend(schemas: Path) -> None:
    child = _child(schemas, {}, remove_backends=["MAMBA1_ATTN"])
    with pytest.raises(CatalogError, match="mamba1"):
        _load_catalog_files(schemas).engine(child)


def test_a_suggestion_names_an_input_of_the_profile(schemas: Path) -> None:
    child = _child(schemas, {}, suggestions=[{"input": "no_such_input", "value": 1, "flag": "--x 1"}])
    with pytest.raises(CatalogError, match="no_such_input"):
        _load_catalog_files(schemas).engine(child)
