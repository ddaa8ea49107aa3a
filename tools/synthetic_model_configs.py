#!/usr/bin/env python3
"""Write small synthetic config.json files for architectures without a public config
the reference can read offline: the architecture's config class (transformers', or
vLLM's own in ``vllm/transformers_utils/configs/``) with its defaults, a few fields
shrunk (``SPECS``), as ``to_dict()`` writes it. Run with an oracle interpreter::

    /work/.venvs/oracle-0.33.0/bin/python tools/synthetic_model_configs.py [ARCH ...]

into ``tests/fixtures/hf_configs/synthetic/<ARCH>.json``; vLLM's answer for them is then
``tools/vllm_model_reference.py --merge ...``. Every value not in ``SPECS`` is the config
class's default.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "hf_configs" / "synthetic"

_SMALL = {"num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
          "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 4096,
          "max_position_embeddings": 4096}
"""A small language model (4 layers, 8 query / 2 KV heads of 64)."""


def _text(model_type: str, **extra: Any) -> dict[str, Any]:
    return {"model_type": model_type, **_SMALL, **extra}


_LFM2 = {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
         "vocab_size": 4096, "conv_dim": 512, "conv_dim_out": 512, "conv_bias": False, "conv_L_cache": 3,
         "block_dim": 512, "block_ff_dim": 1536, "block_auto_adjust_ff_dim": True, "block_multiple_of": 256,
         "block_ffn_dim_multiplier": 1.0, "norm_eps": 1e-05,
         "layer_types": ["conv", "full_attention", "conv", "full_attention"]}

_EXTRA: dict[str, dict[str, Any]] = {
    # fields the model class reads that the config class does not default
    "hunyuan_v1_dense": {"head_dim": 128}, "hunyuan_v1_moe": {"head_dim": 128},
}

SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    # architecture: (model_type, overrides of the config class's defaults)
    "LlavaForConditionalGeneration": ("llava", {"text_config": _text("llama")}),
    "LlavaNextForConditionalGeneration": ("llava_next", {"text_config": _text("mistral")}),
    "LlavaNextVideoForConditionalGeneration": ("llava_next_video", {"text_config": _text("llama")}),
    "LlavaOnevisionForConditionalGeneration": ("llava_onevision", {"text_config": _text("qwen2")}),
    "Blip2ForConditionalGeneration": ("blip-2", {"text_config": {
        **_text("opt", ffn_dim=1024), "num_key_value_heads": 8}}),  # OPT has no GQA
    "Qwen2AudioForConditionalGeneration": ("qwen2_audio", {"text_config": _text("qwen2")}),
    "Glm4vForConditionalGeneration": ("glm4v", {"text_config": _text("glm4v_text")}),
    "InternVLForConditionalGeneration": ("internvl", {"text_config": _text("qwen2")}),
    "AudioFlamingo3ForConditionalGeneration": ("audioflamingo3", {"text_config": _text("qwen2")}),
    "Gemma3nForCausalLM": ("gemma3n_text", {"num_hidden_layers": 10, "num_kv_shared_layers": 4,
                                            "layer_types": ["sliding_attention"] * 4 + ["full_attention"]
                                            + ["sliding_attention"] * 4 + ["full_attention"]}),
    "FalconForCausalLM": ("falcon", {"num_hidden_layers": 4, "new_decoder_architecture": True,
                                     "num_kv_heads": 8, "num_attention_heads": 32, "hidden_size": 2048}),
    "Mistral3ForConditionalGeneration": ("mistral3", {"text_config": _text("mistral")}),
    "UltravoxModel": ("ultravox", {"text_config": _text("llama"), "vocab_size": 4096}),
    "OpenVLAForActionPrediction": ("openvla", {}),
    "GraniteSpeechForConditionalGeneration": ("granite_speech", {"text_config": _text("granite")}),
    "GlmAsrForConditionalGeneration": ("glmasr", {"text_config": _text("llama")}),
    "Exaone4_5_ForConditionalGeneration": ("exaone4_5", {"text_config": _text(
        "exaone4", sliding_window=1024)}),
    "Qwen2_5OmniModel": ("qwen2_5_omni", {"thinker_config": {"text_config": _text(
        "qwen2_5_omni_text", max_position_embeddings=32768)}}),
    "Step3VLForConditionalGeneration": ("step3_vl", {"text_config": {
        "architectures": ["Step3TextForCausalLM"], "num_hidden_layers": 4, "hidden_size": 512,
        "intermediate_size": 1024, "num_attention_heads": 8, "num_attention_groups": 1,
        "head_dim": 64, "moe_layers_enum": "1,2", "moe_num_experts": 4, "moe_top_k": 2,
        "moe_intermediate_size": 256, "share_expert_dim": 256, "vocab_size": 4096,
        "max_position_embeddings": 4096}}),
    "MambaForCausalLM": ("mamba", {"num_hidden_layers": 4, "hidden_size": 256, "vocab_size": 4096}),
    "FalconMambaForCausalLM": ("falcon_mamba", {"num_hidden_layers": 4, "hidden_size": 256,
                                                "vocab_size": 4096}),
    "Mamba2ForCausalLM": ("mamba2", {"num_hidden_layers": 4, "hidden_size": 256, "num_heads": 8,
                                      "head_dim": 64, "vocab_size": 4096, "n_groups": 1}),
    "GlmOcrForConditionalGeneration": ("glm_ocr", {"text_config": _text("glm_ocr_text", head_dim=64)}),
    "Qwen2ForRewardModel": ("qwen2", _SMALL),
    "Qwen2ForProcessRewardModel": ("qwen2", _SMALL),
    "JinaVLForRanking": ("qwen2_vl", {"text_config": _text("qwen2_vl_text")}),
    "Alpamayo2Super": ("alpamayo2_super", {"text_config": _text("qwen3_vl_text", head_dim=64)}),
    "GraniteSpeechPlusForConditionalGeneration": ("granite_speech_plus", {"text_config": _text("granite")}),
    "OlmoHybridForCausalLM": ("olmo_hybrid", {"num_hidden_layers": 4, "layer_types": [
        "linear_attention", "linear_attention", "linear_attention", "full_attention"]}),
    "DbrxForCausalLM": ("dbrx", {"n_layers": 4, "d_model": 512, "n_heads": 8, "max_seq_len": 32768,
                                 "attn_config": {"kv_n_heads": 2, "rope_theta": 500000},
                                 "ffn_config": {"ffn_hidden_size": 1024, "moe_num_experts": 4,
                                                "moe_top_k": 2}}),
    "Idefics3ForConditionalGeneration": ("idefics3", {"text_config": _text("llama")}),
    "AriaForConditionalGeneration": ("aria", {"text_config": _text(
        "aria_text", moe_num_experts=4, moe_topk=2, moe_intermediate_size=256)}),
    "PaddleOCRVLForConditionalGeneration": ("paddleocr_vl", {"text_config": _text(
        "paddleocr_vl_text", head_dim=64)}),
    "Qwen3ASRForConditionalGeneration": ("qwen3_asr", {"thinker_config": {"text_config": _text(
        "qwen3", head_dim=64, max_position_embeddings=32768)}}),
    "MiniCPMV4_6ForConditionalGeneration": ("minicpmv4_6", {"text_config": _text(
        "qwen3_5_text", head_dim=64, layer_types=["linear_attention"] * 3 + ["full_attention"])}),
    # pooling models that build another module's model on their own config
    "VoyageQwen3BidirectionalEmbedModel": ("qwen3", {**_SMALL, "head_dim": 64}),
    "JinaForRanking": ("qwen3", {**_SMALL, "head_dim": 64}),
    "JinaEmbeddingsV5Model": ("llama", {**_SMALL, "is_decoder": False}),
    # transformers 5's Lfm2Config has no conv_dim, which vLLM's lfm2.py reads: the LFM2
    # checkpoints' own fields (edge/lfm2-1.2b-shape.json), at a small width
    "Lfm2BidirectionalModel": ("lfm2", _LFM2),
    "ColBERTLfm2Model": ("lfm2", _LFM2),
    "HF_ColBERT": ("bert", {"num_hidden_layers": 4}),
    "ColBERTModernBertModel": ("modernbert", {"num_hidden_layers": 4}),
    "OpenAIPrivacyFilterForTokenClassification": ("openai_privacy_filter", {"num_hidden_layers": 4}),
    # vLLM's ColModernVBertForRetrieval reads config.text_config: a ModernVBertConfig
    # (transformers' ColModernVBertConfig nests it in vlm_config and has none)
    "ColModernVBertForRetrieval": ("modernvbert", {"text_config": {"model_type": "modernbert",
                                                                    "num_hidden_layers": 4}}),
    "ModernVBertModel": ("modernvbert", {"text_config": {"model_type": "modernbert",
                                                          "num_hidden_layers": 4}}),
    "ColUltraVBertForRetrieval": ("ultravbert", {"text_config": {"num_hidden_layers": 4}}),
    "EmbeddingGemma2Model": ("embedding_gemma2", {"text_config": {"model_type": "embedding_gemma2_text",
                                                               "num_hidden_layers": 6}}),
    "WhisperForConditionalGeneration": ("whisper", {"encoder_layers": 2, "decoder_layers": 2}),
    "Cosmos3EdgeForConditionalGeneration": ("cosmos3_edge", {"text_config": {
        "model_type": "cosmos3_edge_text", "num_hidden_layers": 4}}),
    # cohere_compass.py:2326 asserts tie_word_embeddings (the config class defaults to false)
    "CohereCompassForConditionalGeneration": ("cohere_compass", {"tie_word_embeddings": True, "text_config": {
        "model_type": "cohere_compass_text", "num_hidden_layers": 4, "tie_word_embeddings": True}}),
    # the Transformers backend (transformers_supported_models): the config class's defaults
    # with a small stack
    **{arch: (model_type, {"num_hidden_layers": 4, **_EXTRA.get(model_type, {})})
       for arch, model_type in (
           ("ArceeForCausalLM", "arcee"), ("CwmForCausalLM", "cwm"),
           ("FlexOlmoForCausalLM", "flex_olmo"), ("GPTNeoXForCausalLM", "gpt_neox"),
           ("GlmForCausalLM", "glm"), ("HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"),
           ("HunYuanMoEV1ForCausalLM", "hunyuan_v1_moe"), ("Jais2ForCausalLM", "jais2"),
           ("Kolibri1ForCausalLM", "kolibri1"), ("MellumForCausalLM", "mellum"),
           ("Olmo2ForCausalLM", "olmo2"), ("Olmo3ForCausalLM", "olmo3"),
           ("OlmoForCausalLM", "olmo"), ("SeedOssForCausalLM", "seed_oss"),
           ("SmolLM3ForCausalLM", "smollm3"), ("Starcoder2ForCausalLM", "starcoder2"),
           ("VaultGemmaForCausalLM", "vaultgemma"),
           # vLLM's own model classes of the llama / cohere2 / exaone4 families
           ("HyperCLOVAXForCausalLM", "hyperclovax"),
           ("GraniteMoeSharedForCausalLM", "granitemoeshared"),
           ("GraniteMoeSWAForCausalLM", "granitemoe_swa"),
           ("ExaoneMoeForCausalLM", "exaone_moe"), ("Cohere2MoeForCausalLM", "cohere2_moe"))},
}


TEXT_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    # text-generation architectures of vLLM 0.33.0 whose config class is transformers' or
    # vLLM's own: its defaults with a small stack (8 layers where the defaults interleave
    # layer kinds, so that every kind appears)
    "AXK1ForCausalLM": ("axk1", {"num_hidden_layers": 4}),
    "AfmoeForCausalLM": ("afmoe", {"num_hidden_layers": 8, "score_func": "sigmoid", "route_norm": True,
                                   "route_scale": 1.0, "n_group": 1, "topk_group": 1}),
    "DoryForCausalLM": ("dory", {"num_hidden_layers": 4}),
    "HYV3ForCausalLM": ("hy_v3", {"num_hidden_layers": 4, "first_k_dense_replace": 1,
                                  "expert_hidden_dim": 1536, "route_norm": True}),
    "HrmTextForCausalLM": ("hrm_text", {"num_hidden_layers": 4}),
    "LagunaForCausalLM": ("laguna", {"num_hidden_layers": 4}),
    # Kimi-Linear's MLA and KDA fields (the class defaults have neither): 1-based kda_layers
    "KimiLinearForCausalLM": ("kimi_linear", {
        "num_hidden_layers": 8, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "v_head_dim": 128, "mla_use_nope": True, "linear_attn_config": {
            "kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "num_heads": 32,
            "head_dim": 128, "short_conv_kernel_size": 4}}),
    "BeamForCausalLM": ("beam", {"num_hidden_layers": 8}),
    "FlintForCausalLM": ("flint", {"num_hidden_layers": 8}),
    "InklingForCausalLM": ("inkling_text", {"num_hidden_layers": 8, "padded_vocab_size": 201088}),
    "Qwen4ExpForCausalLM": ("qwen4_exp_text", {"num_hidden_layers": 8}),
    "HYV4ForCausalLM": ("hy_v4", {"num_hidden_layers": 8}),
    "Step5ForCausalLM": ("step5", {"num_hidden_layers": 8}),
    "BailingMoeV3ForCausalLM": ("bailing_hybrid", {
        "num_hidden_layers": 8, "no_kda_lora": True, "use_bias": False, "n_group": 1,
        "num_experts_per_tok": 2, "moe_shared_expert_intermediate_size": 1024}),
    "SarvamMLAForCausalLM": ("sarvam_mla", {"num_hidden_layers": 4}),
    "SarvamMoEForCausalLM": ("sarvam_moe", {
        "num_hidden_layers": 4, "embedding_dropout": 0.0, "use_bias": False, "num_experts": 8,
        "num_experts_per_tok": 2, "moe_shared_expert_intermediate_size": 1024}),
    "IQuestLoopCoderForCausalLM": ("iquestcoder", {"num_hidden_layers": 4}),
    "LongcatFlashNgramForCausalLM": ("longcat_flash", {"num_layers": 2}),
    "Rnj1ForCausalLM": ("gemma3_text", {"num_hidden_layers": 8}),
    "MuseGlimmerForCausalLM": ("muse_glimmer", {"text_config": {"model_type": "muse_glimmer_text",
                                                                "num_hidden_layers": 8}}),
    "Zamba2ForCausalLM": ("zamba2", {"num_hidden_layers": 8, "layers_block_type": [
        "mamba", "hybrid", "mamba", "mamba", "hybrid", "mamba", "mamba", "hybrid"]}),
    # AliceAI has no config class of its own: Qwen3NextConfig with KDA's equal K / V heads
    "AliceAIForCausalLM": ("qwen3_next", {
        "num_hidden_layers": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 16,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        # vllm/model_executor/models/config.py:29-40 AliceAIForCausalLMConfig and
        # alice_ai.py:106-115 refuse a config without these
        "kda_allow_negative_eigenvalues": False, "router_score_function": "sigmoid",
        "router_bias_correction": True, "block_attn_res_block_size": 2,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"]}),
}
SPECS.update(TEXT_SPECS)

_BASE = {**_SMALL, "head_dim": 64, "rms_norm_eps": 1e-6, "hidden_act": "silu", "rope_theta": 10000.0,
         "tie_word_embeddings": False, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
"""A small decoder for a config class that is the model's remote code."""

_MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
        "moe_shared_expert_intermediate_size": 256, "num_shared_experts": 1,
        "first_k_dense_replace": 1, "norm_topk_prob": True}

RAW: dict[str, tuple[str, dict[str, Any]]] = {
    # architectures whose config class is remote code (no class in transformers or vLLM):
    # written as they are and read by the harness's stand-in config class
    # (tools/oracle/models.py STAND_IN_MODEL_TYPES), which keeps every key; the fields are
    # those the vLLM model module reads
    "OrionForCausalLM": ("orion", _BASE),
    "SolarForCausalLM": ("solar", {**_BASE, "bskcn_1": [1], "bskcn_2": [2], "bskcn_3": [2],
                                   "bskcn_4": [3], "bskcn_tv": [0.9, 0.8]}),
    "Step1ForCausalLM": ("step1", {**_BASE, "num_attention_groups": 2}),
    "MiniCPMForCausalLM": ("minicpm", {**_BASE, "dim_model_base": 256, "scale_depth": 1.4,
                                       "scale_emb": 12, "num_experts": 0, "num_experts_per_tok": 0}),
    "BailingMoeForCausalLM": ("bailing_moe", {**_BASE, **_MOE, "embedding_dropout": 0.0,
                                              "use_bias": False, "use_qkv_bias": False}),
    "BailingMoeV2ForCausalLM": ("bailing_moe_v2", {**_BASE, **_MOE, "embedding_dropout": 0.0,
                                                   "use_bias": False, "use_qkv_bias": False,
                                                   "use_qk_norm": True, "partial_rotary_factor": 0.5,
                                                   "score_function": "sigmoid", "n_group": 1,
                                                   "topk_group": 1, "moe_router_enable_expert_bias": True}),
    "PanguEmbeddedForCausalLM": ("pangu_embedded", _BASE),
    "PanguUltraMoEForCausalLM": ("pangu_ultra_moe", {
        **_BASE, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "first_k_dense_replace": 1,
        "moe_intermediate_size": 256, "n_routed_experts": 4, "n_shared_experts": 1,
        "norm_topk_prob": True, "num_experts_per_tok": 2, "routed_scaling_factor": 2.5,
        "router_enable_expert_bias": True, "torch_dtype": "bfloat16"}),
    "K2HorizonForCausalLM": ("k2_horizon", {
        **_BASE, **_MOE, "attention_bias": False, "attention_gate_func": "sigmoid",
        "decoder_sparse_step": 1, "layernorm_num_groups": 1, "mlp_only_layers": [0],
        "moe_gate_bias": False, "mova_num_experts": 2, "mova_num_experts_per_tok": 1,
        "query_key_norm": True, "rope_head_dim": 32, "router_scaling_factor": 1.0,
        "router_score_func": "sigmoid"}),
    "DomynEdgeForCausalLM": ("domyn_edge", {
        **_BASE, "position_layers": ["rope", "nope", "rope", "nope"],
        "per_layer_config": {"1": {"head_dim": 128}, "3": {"head_dim": 128}},
        "window_sizes": [[512, 0], [0, 0], [512, 0], [0, 0]]}),
    "Param2MoEForCausalLM": ("param2moe", {**_BASE, **_MOE, "score_function": "sigmoid",
                                           "rope_scaling": None, "use_qk_norm": True}),
}


DEFAULTS: dict[str, str] = {
    # architecture: model_type; the config class's defaults with a 4-layer stack (in its
    # text_config when the class has one)
    "BagelForConditionalGeneration": "bagel",
    "BertForMaskedLM": "bert",
    "CLIPModel": "clip",
    "SiglipModel": "siglip",
    "BertForSequenceClassification": "bert",
    "BertForTokenClassification": "bert",
    "BertModel": "bert",
    "BertSpladeSparseEmbeddingModel": "bert",
    "BgeM3EmbeddingModel": "roberta",
    "Cohere2VisionForConditionalGeneration": "cohere2_vision",
    "CohereForCausalLM": "cohere",
    "Ernie4_5ForCausalLM": "ernie4_5",
    "Ernie4_5_MoeForCausalLM": "ernie4_5_moe",
    "ExaoneForCausalLM": "exaone",
    "ExaoneMoEForCausalLM": "exaone_moe",
    "GPT2ForSequenceClassification": "gpt2",
    "Gemma2Model": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma4ForCausalLM": "gemma4_text",
    "Glm4ForCausalLM": "glm4",
    "GraniteForCausalLM": "granite",
    "GraniteMoeForCausalLM": "granitemoe",
    "GraniteSWAForCausalLM": "granite_swa",
    "HCXVisionV2ForCausalLM": "hyperclovax_vision_v2",
    "HfMoondream": "moondream3",
    "IQuestCoderForCausalLM": "llama",
    "InternLM3ForCausalLM": "llama",
    "JambaForSequenceClassification": "jamba",
    "LLaMAForCausalLM": "llama",
    "Llama4ForCausalLM": "llama4_text",
    "LlamaModel": "llama",
    "Ministral3ForCausalLM": "ministral3",
    "MistralModel": "llama",
    "ModernBertForSequenceClassification": "modernbert",
    "ModernBertForTokenClassification": "modernbert",
    "ModernBertModel": "modernbert",
    "Moondream3ForCausalLM": "moondream3",
    "MossTranscribeDiarizeForConditionalGeneration": "moss_transcribe_diarize",
    "NemotronHPuzzleForCausalLM": "nemotron_h",
    "OlmoeForCausalLM": "olmoe",
    "PaliGemmaForConditionalGeneration": "paligemma",
    "PhiMoEForCausalLM": "phimoe",
    "Qwen2Model": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3_5ForCausalLM": "qwen3_5_text",
    "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
    "RobertaForMaskedLM": "roberta",
    "RobertaForSequenceClassification": "roberta",
    "RobertaForTokenClassification": "roberta",
    "RobertaModel": "roberta",
    "SmolVLMForConditionalGeneration": "smolvlm",
    "TeleChat3ForCausalLM": "llama",
    "XLMRobertaForSequenceClassification": "roberta",
    "XLMRobertaForTokenClassification": "roberta",
}


def _default_spec(arch: str) -> tuple[str, dict[str, Any]]:
    model_type = DEFAULTS[arch]
    default = _config_class(model_type)()
    text = getattr(default, "text_config", None)
    if text is not None and text is not default and hasattr(text, "to_dict"):
        return model_type, {"text_config": {"model_type": text.model_type, "num_hidden_layers": 4}}
    return model_type, {"num_hidden_layers": 4}


def _config_class(model_type: str) -> Any:
    from transformers import AutoConfig

    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
    except ImportError:  # pragma: no cover - every profiled release has it
        _CONFIG_REGISTRY = {}
    if model_type in _CONFIG_REGISTRY:
        return _CONFIG_REGISTRY[model_type]  # a lazy table: indexing imports the class
    return type(AutoConfig.for_model(model_type))


def _write_raw(arch: str) -> Path:
    model_type, fields = RAW[arch]
    raw = {**fields, "architectures": [arch], "model_type": model_type}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{arch}.json"
    path.write_text(json.dumps(raw, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def write(arch: str) -> Path:
    if arch in RAW:
        return _write_raw(arch)
    model_type, overrides = SPECS[arch] if arch in SPECS else _default_spec(arch)
    overrides = dict(overrides)
    drop = overrides.pop("_drop", [])
    config = _config_class(model_type)(**overrides)
    raw = config.to_dict()
    for key, value in overrides.items():  # a sub-config to_dict renames (Ultravox)
        raw.setdefault(key, value)
    raw.pop("wrapped_model_config", None)
    for key in drop:  # what to_dict writes beside the key the class reads (DeepSeek-VL2)
        raw.pop(key, None)
    raw["architectures"] = [arch]
    raw.setdefault("model_type", model_type)
    raw.pop("transformers_version", None)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{arch}.json"
    path.write_text(json.dumps(raw, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = (argv if argv is not None else sys.argv[1:]) or sorted({*SPECS, *DEFAULTS, *RAW})
    failed = 0
    for arch in names:
        try:
            print(write(arch), file=sys.stderr)
        except Exception as exc:  # a config class that cannot be built: say which
            failed += 1
            print(f"FAILED {arch}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
