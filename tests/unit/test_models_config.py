"""config.json parsing: paths, nesting, tensor parallelism and error reporting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.errors import ExitCode, InputError
from selector.models import load_model, parse_config, shard_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"


def _base(**extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "max_position_embeddings": 4096,
        "torch_dtype": "float16",
    }
    config.update(extra)
    return config


def test_path_to_file_and_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_base()))
    by_dir = load_model(str(tmp_path))
    by_file = load_model(tmp_path / "config.json")
    assert by_dir.layers == by_file.layers
    assert by_dir.source.endswith("config.json")


def test_fixture_full_hf_config_with_unrelated_keys() -> None:
    model = load_model(str(FIXTURES / "gemma2_full_config.json"))
    assert model.architecture == "Gemma2ForCausalLM"
    assert [layer.sliding_window for layer in model.layers[:2]] == [4096, None]


def test_head_size_fallbacks() -> None:
    assert parse_config(_base(), file="x").layers[0].head_size == 64  # hidden / heads
    assert parse_config(_base(head_dim=128), file="x").layers[0].head_size == 128
    assert parse_config(_base(head_dim=0), file="x").layers[0].head_size == 64


def test_kv_head_aliases_and_mha_default() -> None:
    config = _base()
    del config["num_key_value_heads"]
    assert parse_config(config, file="x").layers[0].num_kv_heads == 16
    config["multi_query_group_num"] = 2
    assert parse_config(config, file="x").layers[0].num_kv_heads == 2


def test_dtype_variants() -> None:
    assert parse_config(_base(torch_dtype=None, dtype="bfloat16"), file="x").dtype == "bfloat16"
    assert parse_config(_base(torch_dtype=None), file="x").dtype == "float32"
    with pytest.raises(InputError) as info:
        parse_config(_base(torch_dtype="int3"), file="cfg.json")
    assert info.value.field == "torch_dtype" and info.value.file == "cfg.json"


def test_explicit_layer_types_win() -> None:
    config = _base(
        sliding_window=512,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    )
    model = parse_config(config, file="x")
    assert [layer.sliding_window for layer in model.layers] == [512, None, 512, None]


def test_qwen_max_window_layers() -> None:
    """Qwen2Config's layer_types (sliding from max_window_layers on); vLLM's
    Qwen2Model refuses a mix (checked against vLLM in tests/golden)."""
    config = _base(
        architectures=["Qwen2ForCausalLM"],
        model_type="qwen2",
        use_sliding_window=True,
        sliding_window=256,
        max_window_layers=2,
    )
    model = parse_config(config, file="x")
    assert [layer.sliding_window for layer in model.layers] == [None, None, 256, 256]
    assert "Sliding window for some but all layers is not supported" in model.refusals[0]
    config["max_window_layers"] = 4
    assert parse_config(config, file="x").refusals == ()
    assert {layer.sliding_window for layer in parse_config(config, file="x").layers} == {None}
    config["use_sliding_window"] = False
    assert {layer.sliding_window for layer in parse_config(config, file="x").layers} == {None}


def test_alibi_detection() -> None:
    assert parse_config(_base(alibi=True), file="x").layers[0].alibi
    bloom = _base(architectures=["BloomForCausalLM"], model_type="bloom")
    assert parse_config(bloom, file="x").layers[0].alibi
    assert parse_config(_base(attn_config={"alibi": True}), file="x").layers[0].alibi
    assert not parse_config(_base(), file="x").layers[0].alibi


def test_cross_attention_layers() -> None:
    model = parse_config(_base(cross_attention_layers=[1, 3]), file="x")
    assert [layer.kind for layer in model.layers] == [
        "attention",
        "cross_attention",
        "attention",
        "cross_attention",
    ]
    assert model.layers[1].attn_type == "encoder_decoder"


def test_encoder_only_model() -> None:
    model = parse_config(_base(architectures=["BertModel"], model_type="bert"), file="x")
    assert {layer.kind for layer in model.layers} == {"encoder_only"}


def test_tensor_parallel_divides_heads_and_replicates_kv() -> None:
    model = load_model("llama-3.1-70b")
    tp4 = shard_model(model, 4)
    assert (tp4.layers[0].num_q_heads, tp4.layers[0].num_kv_heads, tp4.tp_size) == (16, 2, 4)
    tp16 = shard_model(model, 16)  # 8 KV heads over 16 ranks: each rank keeps a replica
    assert (tp16.layers[0].num_q_heads, tp16.layers[0].num_kv_heads) == (4, 1)
    assert shard_model(tp16, 2).layers[0].num_kv_heads == 4  # re-sharding starts from the totals


def test_tensor_parallel_mla_keeps_one_latent_head() -> None:
    tp8 = shard_model(load_model("deepseek-v3"), 8)
    assert (tp8.layers[0].num_q_heads, tp8.layers[0].num_kv_heads) == (16, 1)


def test_tensor_parallel_errors() -> None:
    with pytest.raises(InputError) as info:
        shard_model(load_model("llama-4-scout"), 3)
    assert info.value.field == "num_attention_heads"
    assert (
        "Total number of attention heads (40) must be divisible by tensor parallel size (3)."
        in (str(info.value))
    )
    with pytest.raises(InputError, match="KV heads are not divisible"):
        shard_model(parse_config(
            _base(num_attention_heads=12, num_key_value_heads=6, hidden_size=768), file="x"
        ), 4)
    with pytest.raises(InputError, match="positive integer"):
        shard_model(load_model("llama-3.1-8b"), 0)
    with pytest.raises(InputError, match="value heads"):
        shard_model(load_model("qwen3-next-80b-a3b"), 64)


def test_linear_attention_state_shards_and_refuses_as_vllm() -> None:
    """Bailing-MoE-V2.5's lightning layers: heads split over the ranks; a TP size above the
    gate norm's group_norm_size is vLLM's AssertionError in its words (bailing_linear_attn.py:
    446-453; vLLM 0.33.0 raises it building the synthetic config at TP 8)."""
    model = load_model(str(FIXTURES / "synthetic" / "BailingMoeV2_5ForCausalLM.json"))
    state = shard_model(model, 4).layers[0]
    assert state.ssm is not None and state.ssm.ssm_type == "linear"
    with pytest.raises(InputError, match="tp_size must be <= group_norm_size for local rms norm"):
        shard_model(model, 8)


@pytest.mark.parametrize(
    ("config", "field", "fragment"),
    [
        ({"model_type": "llama"}, "architectures", "missing required field"),
        (_base(model_type=None), "model_type", "missing required field"),
        (_base(num_hidden_layers=None), "num_hidden_layers", "missing required field"),
        (_base(num_hidden_layers="32"), "num_hidden_layers", "expected an integer, got string"),
        (_base(num_hidden_layers=True), "num_hidden_layers", "expected an integer, got boolean"),
        (_base(num_hidden_layers=0), "num_hidden_layers", "must be >= 1"),
        (_base(num_hidden_layers=10**6), "num_hidden_layers", "implausible"),
        (_base(num_attention_heads=-2), "num_attention_heads", "must be >= 1"),
        (_base(layer_types=["full_attention"]), "layer_types", "has 1 entries"),
        (
            _base(layer_types=["full_attention", "x", "full_attention", "full_attention"]),
            "layer_types[1]",
            "unknown layer type 'x'",
        ),
        (_base(layer_types=["sliding_attention"] * 4), "sliding_window", "need a sliding_window"),
        (_base(text_config=[1]), "text_config", "expected an object"),
        (
            _base(text_config={"num_hidden_layers": 2}),
            "text_config.hidden_size",
            "missing required field",
        ),
        (_base(attn_logit_softcapping="high"), "attn_logit_softcapping", "expected a number"),
        (
            _base(
                architectures=["JambaForCausalLM"],
                model_type="jamba",
                attn_layer_period=4,
                attn_layer_offset=4,
            ),
            "attn_layer_offset",
            "must be smaller",
        ),
        (_base(cross_attention_layers=[9]), "cross_attention_layers", "beyond"),
    ],
)
def test_malformed_fields_name_file_and_field(
    config: dict[str, Any], field: str, fragment: str
) -> None:
    with pytest.raises(InputError) as info:
        parse_config(config, file="model/config.json")
    assert info.value.field == field
    assert info.value.file == "model/config.json"
    assert fragment in info.value.message
    assert info.value.exit_code == ExitCode.USAGE


def test_not_an_object() -> None:
    with pytest.raises(InputError, match="must hold a JSON object"):
        parse_config([1, 2], file="x.json")


def test_invalid_json_reports_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "architectures": ["X"],\n  oops\n}')
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert info.value.line == 3 and "invalid JSON" in info.value.message


def test_missing_file_and_empty_name(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_model(str(tmp_path / "nope" / "config.json"))
    with pytest.raises(InputError, match="empty model name"):
        load_model("  ")


def test_broken_fixture_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        load_model(str(FIXTURES / "broken_layer_types.json"))
    assert info.value.field == "text_config.layer_types"
