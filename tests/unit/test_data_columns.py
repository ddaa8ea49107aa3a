"""Facts that moved from Python into the data files give what the code used to state.

Each table below is the value the code hard-coded before it became data; the catalog
must give the same for every engine profile (behaviour unchanged)."""

from __future__ import annotations

from typing import Any

import pytest

from selector.catalog import load_catalog

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


_WIRED_IN_CODE: dict[str, dict[str, Any]] = {
    "mamba1": {"name": "MAMBA1_ATTN", "class_name": "Mamba1AttentionBackend",
               "cudagraph_support": "UNIFORM_BATCH", "reorder_batch_threshold": 1, "is_ssm": True},
    "mamba2": {"name": "MAMBA2_ATTN", "class_name": "Mamba2AttentionBackend",
               "cudagraph_support": "UNIFORM_BATCH", "reorder_batch_threshold": 1, "is_ssm": True},
    "gdn": {"name": "GDN_ATTN", "class_name": "GDNAttentionBackend",
            "cudagraph_support": "UNIFORM_BATCH", "reorder_batch_threshold": 1, "is_ssm": True},
    "sparse_indexer": {"name": "DEEPSEEK_V32_INDEXER", "class_name": "DeepseekV32IndexerBackend",
                       "kernel_block_sizes": (64,), "cudagraph_support": "UNIFORM_BATCH",
                       "reorder_batch_threshold": None},
}
"""``selector/kv/backend_facts.py``'s constants before the backend files stated them
(modelled on vLLM 0.33.0)."""


@pytest.mark.parametrize("engine", ENGINES)
def test_wired_backends_are_the_ones_the_kv_planner_hard_coded(engine: str) -> None:
    from selector.kv import BackendKVFacts, wired_backends

    stated = wired_backends(load_catalog().engine(engine))
    expected = {key: BackendKVFacts(**fields) for key, fields in _WIRED_IN_CODE.items()}
    if engine == "vllm==0.25.1":
        # 0.25.1's indexer builder still reorders (threshold 1, indexer.py:241); 0.26.0 stopped
        expected["sparse_indexer"] = expected["sparse_indexer"].model_copy(
            update={"reorder_batch_threshold": 1})
    assert stated == expected


def test_the_kv_planner_alone_uses_the_default_engines_wired_backends() -> None:
    from selector.kv import wired_backends

    assert wired_backends() == wired_backends(load_catalog().engine())


@pytest.mark.parametrize("engine", ENGINES)
def test_memory_model_types_are_the_ones_the_estimator_hard_coded(engine: str) -> None:
    from selector.memory.profile import startup_profile

    profile = startup_profile(load_catalog(), engine)
    assert profile.checks.max_model_len.unscaled_model_types == ("gemma3",)
    assert set(profile.memory.weights.shared_expert_intermediate_types) == {"llama4_text", "llama4"}
    assert profile.memory.weights.expert_bias_types == ("gpt_oss",)


def test_nope_layers_are_llama4s_global_layers_as_the_parser_hard_coded() -> None:
    from selector.models.families import families

    nope = {name: tuple(f.attention.nope_mixers) for name, f in families().items()
            if f.attention.nope_mixers}
    assert nope == {"llama4": ("full_attention",)}
    assert families()["llama4"].mixers.rule == "llama4"


def test_kv_head_fields_are_the_ones_the_parser_hard_coded() -> None:
    from selector.models.families import kv_heads_fields

    assert kv_heads_fields() == ("n_head_kv", "num_kv_heads", "num_key_value_heads",
                                 "multi_query_group_num", "num_attention_groups")
