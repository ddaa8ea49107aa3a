"""The synthetic configs the start-up fact oracles ask vLLM about (no vLLM needed here).

``max_len_configs()``: model types with and without vLLM's gemma3 exception, rope
scaling of every type vLLM names (and none), several factors, ``max_position_embeddings``
and its alias keys; read by tools/max_len_oracle.py (vLLM's answers) and
tests/golden/test_startup_facts.py (the tool's answers).

``weight_configs()``: small MoE configs of llama4_text and llama4 (shared expert), gpt_oss (expert
biases) and mixtral / qwen3_moe (neither: the controls); read by
tools/weights_oracle.py and the same test.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import oracle

__all__ = ["HUGE_MAX_MODEL_LEN", "max_len_configs", "new_answer", "record_answers", "small_models",
           "weight_configs"]

HUGE_MAX_MODEL_LEN = 10**9
"""A ``--max-model-len`` every config refuses (vLLM's message names the derived length)."""

_BASES: dict[str, dict[str, Any]] = {
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
              "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024},
    "gemma2": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
               "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
               "vocab_size": 1024},
    "gemma3_text": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
                    "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                    "vocab_size": 1024},
}

_ROPES: dict[str, dict[str, Any] | None] = {
    "none": None,
    "linear2": {"type": "linear", "factor": 2.0},
    "linear8": {"rope_type": "linear", "factor": 8.0},
    "linear4int": {"rope_type": "linear", "factor": 4},
    "dynamic2": {"rope_type": "dynamic", "factor": 2.0},
    "yarn4": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
    "yarn32": {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
               "beta_fast": 32.0, "beta_slow": 1.0},
    "yarn2_no_original": {"rope_type": "yarn", "factor": 2.0},
    "llama3_8": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                 "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
    "default": {"rope_type": "default"},
    "longrope4": {"rope_type": "longrope", "factor": 4.0, "short_factor": [1.0] * 32,
                  "long_factor": [1.0] * 32, "original_max_position_embeddings": 1024},
    "su4": {"type": "su", "factor": 4.0, "short_factor": [1.0] * 32, "long_factor": [1.0] * 32,
            "original_max_position_embeddings": 1024},
    "deepseek_yarn4": {"rope_type": "deepseek_yarn", "factor": 4.0,
                       "original_max_position_embeddings": 1024},
    "deepseek_llama_scaling4": {"rope_type": "deepseek_llama_scaling", "factor": 4.0,
                                "original_max_position_embeddings": 1024},
    "mrope_default": {"rope_type": "default", "mrope_section": [8, 12, 12]},
    "linear_null_factor": {"rope_type": "linear", "factor": None},
}

_LENGTHS: dict[str, dict[str, Any]] = {
    "mpe4096": {"max_position_embeddings": 4096},
    "mpe8192": {"max_position_embeddings": 8192},
    "mpe8192_seq_length2048": {"max_position_embeddings": 8192, "seq_length": 2048},
    "mpe4096_n_positions16384": {"max_position_embeddings": 4096, "n_positions": 16384},
    "mpe8192_max_seq_len3000": {"max_position_embeddings": 8192, "max_seq_len": 3000},
    "mpe4096_model_max_length65536": {"max_position_embeddings": 4096,
                                      "model_max_length": 65536},
    "mpe8192_model_max_length2048": {"max_position_embeddings": 8192,
                                     "model_max_length": 2048},
    "mpe8192_max_sequence_length1000": {"max_position_embeddings": 8192,
                                        "max_sequence_length": 1000},
    "mpe8192_max_seq_length1500": {"max_position_embeddings": 8192, "max_seq_length": 1500},
    "mpe8192_seq_len2500": {"max_position_embeddings": 8192, "seq_len": 2500},
    "mpe8192_max_target_positions600": {"max_position_embeddings": 8192,
                                        "max_target_positions": 600},
}


def max_len_configs() -> list[dict[str, Any]]:
    """``{"id", "config"}`` rows: every base x rope type x length; the alias keys on
    llama and gemma3 only (the base decides nothing about them)."""
    rows: list[dict[str, Any]] = []
    for base_name, base in _BASES.items():
        for rope_name, rope in _ROPES.items():
            for length_name, length in _LENGTHS.items():
                alias = length_name not in ("mpe4096", "mpe8192")
                if alias and (base_name not in ("llama", "gemma3_text") or
                              rope_name not in ("none", "linear2", "yarn4")):
                    continue
                config = {**base, **length}
                if rope is not None:
                    config["rope_scaling"] = dict(rope)
                rows.append({"id": f"{base_name}-{rope_name}-{length_name}", "config": config})
    # transformers v5 spelling: rope_parameters, flat and nested per layer type
    for base_name in ("llama", "gemma3_text"):
        rows.append({"id": f"{base_name}-rope_parameters_linear4-mpe4096", "config": {
            **_BASES[base_name], "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}}})
    # Phi-3 style: the pre-extension length at the top level of the config. vLLM's default
    # max_model_len for a longrope model is that length, not the derived one; for another
    # rope type it changes nothing.
    for rope_name in ("longrope4", "yarn4"):
        config = {**_BASES["llama"], "max_position_embeddings": 16384,
                  "original_max_position_embeddings": 4096,
                  "rope_scaling": dict(_ROPES[rope_name] or {})}
        rows.append({"id": f"llama-{rope_name}-top_original4096-mpe16384", "config": config})
    return rows


def weight_configs() -> list[dict[str, Any]]:
    """``{"id", "config"}`` rows: small MoE models, bfloat16, no quantization."""
    llama4 = {"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text",
              "hidden_size": 256, "intermediate_size": 384, "intermediate_size_mlp": 512,
              "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 64, "num_local_experts": 4, "num_experts_per_tok": 1,
              "interleave_moe_layer_step": 1, "vocab_size": 1024,
              "max_position_embeddings": 4096, "no_rope_layers": [1, 1, 1, 0],
              "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    gpt_oss = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
               "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
               "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 1024,
               "max_position_embeddings": 4096, "sliding_window": 128,
               "layer_types": ["sliding_attention", "full_attention"],
               "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                "beta_slow": 1.0, "truncate": False,
                                "original_max_position_embeddings": 4096},
               "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    mixtral = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
               "hidden_size": 256, "intermediate_size": 384, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4,
               "num_experts_per_tok": 2, "vocab_size": 1024, "max_position_embeddings": 4096,
               "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    qwen3_moe = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
                 "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 128,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2,
                 "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 1024,
                 "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
                 "tie_word_embeddings": False}
    # the multimodal checkpoint layout (model_type llama4) whose text_config names no
    # model_type: the tool then reads the top-level llama4
    text = {k: v for k, v in llama4.items()
            if k not in ("architectures", "model_type", "torch_dtype", "no_rope_layers")}
    llama4_mm = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
                 "text_config": {**text, "num_hidden_layers": 2, "no_rope_layers": [1, 0]},
                 "vision_config": {"hidden_size": 128, "intermediate_size": 256,
                                   "num_hidden_layers": 1, "num_attention_heads": 2,
                                   "image_size": 112, "patch_size": 14,
                                   "projector_input_dim": 256, "projector_output_dim": 256,
                                   "vision_output_dim": 256, "pixel_shuffle_ratio": 0.5},
                 "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    return [
        {"id": "llama4_text-moe-every-layer", "config": llama4},
        {"id": "llama4-multimodal", "config": llama4_mm},
        {"id": "llama4_text-moe-every-second-layer",
         "config": {**llama4, "interleave_moe_layer_step": 2}},
        {"id": "gpt_oss", "config": gpt_oss},
        {"id": "gpt_oss-8-experts", "config": {**gpt_oss, "num_local_experts": 8,
                                                "intermediate_size": 320}},
        {"id": "mixtral-control", "config": mixtral},
        {"id": "qwen3_moe-control", "config": qwen3_moe},
    ]


def small_models(layers: int, *, dense_first: bool) -> tuple[dict[str, Any], ...]:
    """Small Llama, Qwen3-MoE, Mixtral and GPT-OSS configs of ``layers`` decoder layers
    (tools/pp_oracle.py's stages, tools/quant_oracle.py's schemes): Qwen3-MoE's first layer
    dense with ``dense_first``; GPT-OSS alternating sliding and full attention."""
    common = {"vocab_size": 1024, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
              "tie_word_embeddings": False}
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
             "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
             "num_hidden_layers": layers, **common}
    qwen3_moe = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
                 "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 128,
                 "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2,
                 "decoder_sparse_step": 1, "mlp_only_layers": [0] if dense_first else [], **common}
    mixtral = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 256,
               "intermediate_size": 384, "num_hidden_layers": layers, "num_attention_heads": 4,
               "num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2, **common}
    gpt_oss = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 256,
               "intermediate_size": 256, "num_hidden_layers": layers, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 64, "num_local_experts": 4,
               "num_experts_per_tok": 2, "sliding_window": 128,
               "layer_types": [("sliding_attention", "full_attention")[i % 2] for i in range(layers)],
               "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                "beta_slow": 1.0, "truncate": False,
                                "original_max_position_embeddings": 4096}, **common}
    return llama, qwen3_moe, mixtral, gpt_oss


def new_answer(row: dict[str, Any], workdir: Path, vllm_version: str) -> tuple[Path, dict[str, Any]]:
    """The row's config.json written to its own folder under ``workdir`` (what vLLM is
    pointed at), and the answer's common keys."""
    target = workdir / row["id"]
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(row["config"]), encoding="utf-8")
    return target, {"id": row["id"], "config": row["config"], "vllm_version": vllm_version}


def record_answers(out: Path, rows: list[dict[str, Any]],
                   answer: Callable[[dict[str, Any], Path], dict[str, Any]],
                   summary: Callable[[dict[str, Any]], object]) -> list[dict[str, Any]]:
    """Ask vLLM ``answer(row, scratch folder)`` for every row (progress on stderr) and
    write the answers to ``out``, one JSON line each, gzip'd reproducibly (the oracle
    tools' shared loop)."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for row in rows:
            result = answer(row, Path(tmp))
            results.append(result)
            print(f"{result['status']:5} {row['id']}: {result.get('error') or summary(result)}"[:300],
                  file=sys.stderr)
    oracle.write_jsonl_gz(out, results)
    ok = sum(r["status"] == "ok" for r in results)
    print(f"{len(results)} configs, {ok} answered, {len(results) - ok} refused -> {out}",
          file=sys.stderr)
    return results
