"""Model presets: every layer's facts, checked against the public config.json
values and vLLM's per-model layer rules."""

from __future__ import annotations

from collections import Counter

import pytest

from selector.errors import InputError
from selector.models import GDNDims, Mamba1Dims, list_presets, load_model

EXPECTED_PRESETS = {
    "deepseek-v3",
    "deepseek-v3.2",
    "gemma-2-9b",
    "gemma-3-27b",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "jamba-v0.1",
    "llama-3.1-70b",
    "llama-3.1-8b",
    "llama-4-scout",
    "mistral-7b-v0.1",
    "mistral-7b-v0.3",
    "qwen2.5-7b",
    "qwen3-32b",
    "qwen3-8b",
    "qwen3-next-80b-a3b",
}


def test_list_presets_holds_the_issue_models() -> None:
    # A superset: a new preset is one data file (plus vLLM's answer for it in
    # tests/golden/vllm_models), not an edit here.
    assert set(list_presets()) >= EXPECTED_PRESETS
    assert list(list_presets()) == sorted(list_presets())


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_parses(name: str) -> None:
    model = load_model(name)
    assert model.name == name
    assert model.num_layers == len(model.layers)
    assert [layer.index for layer in model.layers] == list(range(model.num_layers))


def test_preset_names_are_case_insensitive() -> None:
    assert load_model("Llama-3.1-8B").name == "llama-3.1-8b"
    assert load_model("  GPT-OSS-20B ").name == "gpt-oss-20b"


def test_unknown_preset_suggests_close_names() -> None:
    with pytest.raises(InputError) as info:
        load_model("llama-3.1-7b")
    assert info.value.field == "model"
    assert "did you mean" in str(info.value) and "'llama-3.1-8b'" in str(info.value)


def test_unknown_preset_without_close_match_lists_presets() -> None:
    with pytest.raises(InputError, match="known presets: deepseek-v3"):
        load_model("zzzzzzzzzzzz")


def test_llama_3_1_8b_is_uniform_gqa() -> None:
    model = load_model("llama-3.1-8b")
    assert {
        (layer.kind, layer.num_q_heads, layer.num_kv_heads, layer.head_size, layer.sliding_window)
        for layer in model.layers
    } == {("attention", 32, 8, 128, None)}
    assert model.dtype == "bfloat16" and model.architecture == "LlamaForCausalLM"


def test_mistral_v01_window_applies_to_every_layer() -> None:
    # No layer_types: vLLM sets cache_config.sliding_window for the whole model.
    model = load_model("mistral-7b-v0.1")
    assert {layer.sliding_window for layer in model.layers} == {4096}
    assert {layer.sliding_window for layer in load_model("mistral-7b-v0.3").layers} == {None}


def test_qwen25_disabled_sliding_window_is_ignored() -> None:
    # sliding_window 131072 with use_sliding_window false -> no window (HF Qwen2Config).
    model = load_model("qwen2.5-7b")
    assert {layer.sliding_window for layer in model.layers} == {None}
    assert model.layers[0].num_q_heads == 28 and model.layers[0].num_kv_heads == 4


def test_gemma2_alternates_and_soft_caps() -> None:
    model = load_model("gemma-2-9b")
    windows = [layer.sliding_window for layer in model.layers]
    assert windows[:4] == [4096, None, 4096, None]
    assert Counter(windows) == {4096: 21, None: 21}
    assert {layer.logits_soft_cap for layer in model.layers} == {50.0}
    assert model.dtype == "float32" and model.runtime_dtype == "bfloat16"
    assert model.layers[0].head_size == 256


def test_gemma3_five_local_one_global_from_nested_text_config() -> None:
    model = load_model("gemma-3-27b")
    global_layers = [layer.index for layer in model.layers if layer.sliding_window is None]
    assert global_layers == [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]
    assert {layer.sliding_window for layer in model.layers} == {1024, None}
    assert model.is_mm_prefix_lm  # model_type gemma3 is in vLLM's mm-prefix list
    assert {layer.logits_soft_cap for layer in model.layers} == {None}
    assert (model.layers[0].num_q_heads, model.layers[0].num_kv_heads) == (32, 16)


def test_gpt_oss_sinks_and_alternating_window() -> None:
    for name, layers in (("gpt-oss-20b", 24), ("gpt-oss-120b", 36)):
        model = load_model(name)
        assert model.num_layers == layers
        assert all(layer.has_sink for layer in model.layers)
        assert [layer.sliding_window for layer in model.layers[:3]] == [128, None, 128]
        assert (
            model.layers[0].num_q_heads,
            model.layers[0].num_kv_heads,
            model.layers[0].head_size,
        ) == (64, 8, 64)


def test_deepseek_v3_mla_dims() -> None:
    layer = load_model("deepseek-v3").layers[0]
    assert layer.kind == "mla"
    assert (layer.head_size, layer.head_size_v, layer.num_kv_heads) == (576, 0, 1)
    assert layer.mla is not None and layer.mla.qk_nope_head_dim == 128
    assert layer.indexer is None and layer.spec_kind == "mla_attention"


def test_deepseek_v32_sparse_indexer() -> None:
    model = load_model("deepseek-v3.2")
    assert all(layer.is_sparse for layer in model.layers)
    indexer = model.layers[0].indexer
    assert indexer is not None
    assert (indexer.index_topk, indexer.index_head_dim, indexer.index_n_heads) == (2048, 128, 64)


def test_qwen3_next_every_fourth_layer_is_full_attention() -> None:
    model = load_model("qwen3-next-80b-a3b")
    full = [layer.index for layer in model.layers if layer.kind == "attention"]
    assert full == list(range(3, 48, 4))
    gdn = model.layers[0]
    assert gdn.kind == "gdn" and isinstance(gdn.ssm, GDNDims)
    assert gdn.ssm.conv_dim == 128 * 16 * 2 + 128 * 32
    assert model.layers[3].head_size == 256 and model.layers[3].num_kv_heads == 2
    assert model.is_hybrid


def test_jamba_attention_period_and_offset() -> None:
    model = load_model("jamba-v0.1")
    assert [layer.index for layer in model.layers if layer.kind == "attention"] == [4, 12, 20, 28]
    mamba = model.layers[0]
    assert isinstance(mamba.ssm, Mamba1Dims)
    assert (mamba.ssm.intermediate_size, mamba.ssm.state_size, mamba.ssm.conv_kernel) == (
        8192,
        16,
        4,
    )
    assert model.layers[4].head_size == 4096 // 32


def test_llama4_scout_chunked_with_every_fourth_global() -> None:
    model = load_model("llama-4-scout")
    chunked = [layer.index for layer in model.layers if layer.attention_chunk_size == 8192]
    global_ = [layer.index for layer in model.layers if layer.attention_chunk_size is None]
    assert global_ == list(range(3, 48, 4))
    assert len(chunked) == 36
    assert not model.layers[3].use_rope and model.layers[0].use_rope
    assert (model.layers[0].num_q_heads, model.layers[0].num_kv_heads) == (40, 8)


def test_layer_lookup_errors_name_the_range() -> None:
    model = load_model("llama-3.1-8b")
    assert model.layer(31).index == 31
    with pytest.raises(InputError, match="layer 32 does not exist; the model has 32 layers"):
        model.layer(32)
