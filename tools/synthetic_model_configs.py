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

import oracle  # noqa: F401  (the checkout's selector/ on sys.path)

from selector.inputs.serve.values import deep_merge

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


_INTERNVL: dict[str, Any] = {
    # OpenGVLab/InternVL3-1B's config.json (its InternVLChatConfig as printed in
    # shivangjhalani/multicoco InternVL3-1B_data.md @98f8611dcc110d39dc14ffe479acd4db5b206107),
    # the language model a small Llama and the InternViT two layers deep: the remote
    # InternVL config every InternVL-derived model class reads (force_image_size,
    # downsample_ratio, ps_version, select_layer, llm_config, vision_config, ...)
    "_raw": True, "model_type": "internvl_chat", "downsample_ratio": 0.5,
    "dynamic_image_size": True, "force_image_size": 448, "hidden_size": 512,
    "max_dynamic_patch": 12, "min_dynamic_patch": 1, "pad2square": False, "ps_version": "v2",
    "select_layer": -1, "template": "internvl2_5", "tie_word_embeddings": False,
    "use_backbone_lora": 0, "use_llm_lora": 0, "use_thumbnail": True,
    "llm_config": {**_text("llama", max_position_embeddings=8192),
                   "architectures": ["LlamaForCausalLM"]},
    "vision_config": {"architectures": ["InternVisionModel"], "model_type": "intern_vit_6b",
                      "attention_dropout": 0.0, "drop_path_rate": 0.0, "dropout": 0.0,
                      "hidden_act": "gelu", "hidden_size": 1024, "image_size": 448,
                      "initializer_factor": 0.1, "initializer_range": 1e-10,
                      "intermediate_size": 4096, "layer_norm_eps": 1e-06,
                      "norm_type": "layer_norm", "num_attention_heads": 16, "num_channels": 3,
                      "num_hidden_layers": 2, "patch_size": 14, "qk_normalization": False,
                      "qkv_bias": True, "use_flash_attn": False},
}


_QWEN4_EXP_GATE = {"output_gate_type": "silu"}
"""Qwen4Exp's linear-attention output gate, as its config class reads None (hidden_act)."""
_QWEN4_EXP_LAYERS = (["linear_attention"] * 3 + ["full_attention"]) * 2
"""Qwen4Exp's 8 layers as its checkpoints spell them."""
_QWEN4_EXP_8 = {"num_hidden_layers": 8, **_QWEN4_EXP_GATE}
_QWEN4_EXP_WRITTEN = {"_written": {"": {"layer_types": _QWEN4_EXP_LAYERS}}}
_QWEN4_EXP_QSA = {"indexer_n_heads": 8, "indexer_kv_heads": 1, "indexer_head_dim": 256,
                  "indexer_budget": 2048, "indexer_compress_ratio": 4}
"""QSA on Qwen4Exp's indexed_attention layers."""
_QWEN4_EXP_PLE = {"ple_layer_ids": [1, 6], "eos_token_id": 2, "ngram_vocab_size_base": 20000}
"""PLE on two linear_attention layers, the hashed n-gram tables shrunk from 20M rows per
head (vLLM allocates them in host memory, ngram_embedding.py:667-680: 80 GB at the
defaults)."""


_STEP3P5_TEXT: dict[str, Any] = {
    "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
    "num_attention_heads": 8, "num_attention_groups": 2, "head_dim": 64,
    "vocab_size": 4096, "max_position_embeddings": 8192,
    "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                    "full_attention"], "sliding_window": 512,
    "moe_num_experts": 4, "moe_top_k": 2, "moe_intermediate_size": 256,
    "share_expert_dim": 256, "use_moe_router_bias": True, "moe_router_scaling_factor": 1.0,
    "need_fp32_gate": True, "norm_expert_weight": True, "swiglu_limits": None,
    "swiglu_limits_shared": None}
"""Step-3.5's text model: the MoE router fields of its config the class leaves unset."""


_MAPPED: dict[str, tuple[str, dict[str, Any]]] = {
    # architectures a family maps that had no reference answer (tests/golden/vllm_models/
    # not_built.yaml): the config class's defaults plus the fields its model class reads
    # and the class leaves unset (each value a config value, never a layer decision)
    "MiniCPMOcrForConditionalGeneration": ("minicpmv4_6", {"text_config": _text(
        "qwen3_5_text", head_dim=64, layer_types=["linear_attention"] * 3 + ["full_attention"])}),
    "MiniCPMV4_7ForConditionalGeneration": ("minicpmv4_6", {"text_config": _text(
        "qwen3_5_text", head_dim=64, layer_types=["linear_attention"] * 3 + ["full_attention"])}),
    "Qwen3ASRForcedAlignerForTokenClassification": ("qwen3_asr", {"thinker_config": {
        "classify_num": 5000, "text_config": _text("qwen3", head_dim=64, max_position_embeddings=32768)}}),
    "Qwen3ASRRealtimeGeneration": ("qwen3_asr", {"thinker_config": {"text_config": _text(
        "qwen3", head_dim=64, max_position_embeddings=32768)}}),
    "Gemma3TextModel": ("gemma3_text", {"num_hidden_layers": 4}),
    "XLMRobertaModel": ("xlm-roberta", {"num_hidden_layers": 4,
                                        "position_embedding_type": "absolute"}),
    "Glm4MoeLiteForCausalLM": ("glm4_moe_lite", {"num_hidden_layers": 4, "first_k_dense_replace": 1}),
    "Glm4vMoeForConditionalGeneration": ("glm4v_moe", {"text_config": {
        "model_type": "glm4v_moe_text", "num_hidden_layers": 4, "use_qk_norm": False,
        "head_dim": 128}}),
    "DeepseekForCausalLM": ("deepseek_v2", {"num_hidden_layers": 4, "n_group": 1, "topk_group": 1}),
    "DeepseekV3BidirectionalModel": ("deepseek_v3", {"num_hidden_layers": 4, "n_group": 1,
                                                     "topk_group": 1}),
    "KimiVLForConditionalGeneration": ("kimi_vl", {"text_config": {
        "model_type": "deepseek_v3", "num_hidden_layers": 4, "n_group": 1, "topk_group": 1}}),
    "LlamaBidirectionalModel": ("llama", {"num_hidden_layers": 4, "pooling": "avg"}),
    "LlamaBidirectionalForSequenceClassification": ("llama", {"num_hidden_layers": 4,
                                                               "pooling": "avg"}),
    "LongcatFlashForCausalLM": ("longcat_flash", {"num_hidden_layers": 4, "mla_scale_q_lora": True,
                                                  "mla_scale_kv_lora": True, "zero_expert_num": 2,
                                                  "zero_expert_type": "identity"}),
    "Qwen2_5OmniForConditionalGeneration": ("qwen2_5_omni", {"thinker_config": {"text_config": _text(
        "qwen2_5_omni_text", max_position_embeddings=32768)}}),
    "Step3TextForCausalLM": ("step3_text", {
        "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
        "num_attention_heads": 8, "num_attention_groups": 1, "head_dim": 64,
        "moe_layers_enum": "1,2", "moe_num_experts": 4, "moe_top_k": 2,
        "moe_intermediate_size": 256, "share_expert_dim": 256, "vocab_size": 4096,
        "max_position_embeddings": 4096}),
    "NomicBertModel": ("nomic_bert", {
        # the field names of nomic-embed's remote config, which NomicBertModelConfig reads
        # (vllm/model_executor/models/config.py:858-900)
        "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
        "intermediate_size": 1024, "n_layer": 4, "n_embd": 512, "n_head": 8, "n_inner": 1024,
        "activation_function": "swiglu", "mlp_fc1_bias": False, "mlp_fc2_bias": False,
        "qkv_proj_bias": False, "rotary_emb_scale_base": None, "rotary_emb_interleaved": False,
        "rotary_emb_fraction": 1.0, "rotary_emb_base": 1000, "layer_norm_epsilon": 1e-12,
        "max_trained_positions": 2048, "max_position_embeddings": 2048}),
    "GteModel": ("gte", {"num_hidden_layers": 4, "position_embedding_type": "rope"}),
    "Gemma4UnifiedForConditionalGeneration": ("gemma4_unified", {
        "text_config": {"model_type": "gemma4_unified_text", "num_hidden_layers": 4},
        "vision_config": {"model_type": "gemma4_unified_vision"}}),
    "Ovis": ("ovis", {"_raw": True, "model_type": "ovis", "hidden_size": 512,
                      "llm_config": _text("qwen2", max_position_embeddings=8192),
                      "visual_tokenizer_config": {"model_type": "siglip_visual_tokenizer",
                                                  "backbone_config": {"model_type": "siglip_vision_model"}}}),
    "QianfanOCRForConditionalGeneration": ("qianfan_ocr", {
        "text_config": _text("qwen3", head_dim=64), "force_image_size": 448,
        "ps_version": "v2", "select_layer": -1, "downsample_ratio": 0.5, "template": None,
        "dynamic_image_size": True, "use_thumbnail": True, "min_dynamic_patch": 1,
        "max_dynamic_patch": 12}),
    "Lfm2MoeForCausalLM": ("lfm2_moe", {"num_hidden_layers": 4, "layer_types": [
        "conv", "conv", "full_attention", "conv"]}),
    "ChatGLMForConditionalGeneration": ("chatglm", {"num_layers": 4, "original_rope": True,
                                                    "tie_word_embeddings": False}),
    # GLM-4V (THUDM glm-4v): ChatGLM's config with an EVA2-CLIP vision_config, the fields
    # glm4v.py reads (two vision layers)
    "GLM4VForCausalLM": ("chatglm", {
        "num_layers": 4, "original_rope": True, "tie_word_embeddings": False,
        "boi_token_id": 151339, "eoi_token_id": 151340,
        "vision_config": {"dropout_prob": 0.0, "hidden_act": "gelu", "in_channels": 3,
                          "num_hidden_layers": 2, "hidden_size": 1792, "patch_size": 14,
                          "num_heads": 16, "intermediate_size": 15360, "layer_norm_eps": 1e-06,
                          "num_positions": 6401, "image_size": 1120, "scaling_factor": 8}}),
    # the Transformers backend's own classes named in architectures (vLLM's registry
    # _TRANSFORMERS_BACKEND_MODELS): the text model of a transformers config class
    **{arch: ("llama", dict(_SMALL)) for arch in (
        "TransformersForCausalLM", "TransformersEmbeddingModel",
        "TransformersForSequenceClassification")},
    **{arch: ("qwen3_moe", {**_SMALL, "head_dim": 64, "num_experts": 4, "num_experts_per_tok": 2,
                            "moe_intermediate_size": 256}) for arch in (
        "TransformersMoEForCausalLM", "TransformersMoEEmbeddingModel",
        "TransformersMoEForSequenceClassification")},
    # remote-code config classes (trust_remote_code): the keys their configuration_*.py
    # defines, carried by the harness's stand-in config class (tools/oracle/models.py)
    **{arch: ("internlm2", {"_raw": True, "model_type": "internlm2", **_SMALL, "bias": False,
                            "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 1000000,
                            "rope_scaling": {"type": "dynamic", "factor": 2.0},
                            "attn_implementation": "eager", "tie_word_embeddings": False})
       for arch in ("InternLM2ForCausalLM", "InternLM2ForRewardModel")},
    **{arch: ("new", {"_raw": True, "model_type": "new", "num_hidden_layers": 4,
                      "hidden_size": 512, "num_attention_heads": 8, "intermediate_size": 1024,
                      "hidden_act": "gelu", "vocab_size": 4096, "max_position_embeddings": 8192,
                      "type_vocab_size": 1, "layer_norm_eps": 1e-12,
                      "position_embedding_type": "rope", "rope_theta": 160000,
                      "layer_norm_type": "layer_norm", "pack_qkv": True, "unpad_inputs": False,
                      "use_memory_efficient_attention": False, "logn_attention_scale": False,
                      "logn_attention_clip1": False, "num_labels": 1})
       for arch in ("GteNewModel", "GteNewForSequenceClassification")},
    # Keye-VL (keye.py:1231-1235: a Qwen3ForCausalLM on the top-level config, a SigLIP tower
    # on vision_config)
    **{arch: ("Keye", {"_raw": True, "model_type": "Keye", **_SMALL, "head_dim": 64,
                       "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
                       "tie_word_embeddings": False,
                       "vision_config": {"model_type": "siglip_vision_model",
                                         "num_hidden_layers": 2, "hidden_size": 1152,
                                         "intermediate_size": 4304, "num_attention_heads": 16,
                                         "patch_size": 14, "image_size": 384,
                                         "spatial_merge_size": 2}})
       for arch in ("KeyeForConditionalGeneration", "KeyeVL1_5ForConditionalGeneration")},
    # Phi-3-Vision (phi3v.py:575-584: a LlamaForCausalLM on the top-level config; the CLIP
    # tower and HD transform from img_processor / embd_layer, as microsoft's config has them)
    "Phi3VForCausalLM": ("phi3_v", {"_raw": True, "model_type": "phi3_v", **_SMALL,
                                    "hidden_act": "silu", "rms_norm_eps": 1e-05,
                                    "rope_theta": 10000.0, "tie_word_embeddings": False,
                                    "embd_layer": {"embedding_cls": "image",
                                                   "hd_transform_order": "sub_glb",
                                                   "projection_cls": "mlp",
                                                   "use_hd_transform": True,
                                                   "with_learnable_separator": True},
                                    "img_processor": {"image_dim_out": 1024,
                                                      "model_name": "openai/clip-vit-large-patch14-336",
                                                      "name": "clip_vision_model",
                                                      "num_img_tokens": 144}}),
    # Kanana-V (kanana_v.py: a Qwen2-VL vision tower, the DynamicC abstractor of
    # projector_config, the language model of text_config)
    "KananaVForConditionalGeneration": ("kanana-1.5-v", {
        "_raw": True, "model_type": "kanana-1.5-v",
        "text_config": {**_text("llama", max_position_embeddings=8192),
                        "architectures": ["LlamaForCausalLM"]},
        "vision_config": {"depth": 2, "embed_dim": 1280, "hidden_size": 1280, "mlp_ratio": 4,
                          "num_heads": 16, "in_chans": 3, "in_channels": 3, "patch_size": 14,
                          "spatial_merge_size": 2, "temporal_patch_size": 2,
                          "hidden_act": "quick_gelu"},
        "projector_config": {"depth": 2, "encoder_hidden_size": 1280, "hidden_size": 1024,
                             "merge_size": 2, "mlp_depth": 2, "output_hidden_size": 512,
                             "pos_emb": True, "pos_emb_size": 576}}),
    # dots.ocr (dots_ocr.py:627-633: a Qwen2 model on the top-level config, the vision
    # tower from the vision_config dict as vLLM's DotsVisionConfig)
    "DotsOCRForCausalLM": ("dots_ocr", {"_raw": True, "model_type": "dots_ocr", **_SMALL,
                                        "hidden_act": "silu", "rms_norm_eps": 1e-06,
                                        "rope_theta": 1000000.0, "tie_word_embeddings": False,
                                        "max_position_embeddings": 8192,
                                        "vision_config": {"num_hidden_layers": 2}}),
    "TeleChat2ForCausalLM": ("telechat", {"_raw": True, "model_type": "telechat", "n_layer": 4,
                                          "n_head": 8, "num_key_value_heads": 2,
                                          "hidden_size": 512, "ffn_hidden_size": 1024,
                                          "layer_norm_epsilon": 1e-05, "vocab_size": 4096,
                                          "max_position_embeddings": 4096,
                                          "tie_word_embeddings": False}),
    "TeleFLMForCausalLM": ("teleflm", {"_raw": True, "model_type": "teleflm", **_SMALL,
                                       "hidden_act": "silu", "rms_norm_eps": 1e-05,
                                       "use_mup": False, "tie_word_embeddings": False}),
    # subclasses of another architecture's model class on that class's config
    "ClefFlashForJointSchema": ("qwen3_5", {
        "text_config": _text("qwen3_5_text", head_dim=64,
                             layer_types=["linear_attention"] * 3 + ["full_attention"]),
        # clef_flash.py:31 JointSchemaHead(**joint_head_config), clef_joint_schema.py:101-109
        "joint_head_config": {"hidden_size": 512, "width": 256, "routing_layers": 1, "layers": 1,
                              "heads": 4, "feedforward": 512}}),
    "InternS2PreviewForConditionalGeneration": ("qwen3_5_moe", {"text_config": _text(
        "qwen3_5_moe_text", head_dim=64, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=256, shared_expert_intermediate_size=256,
        layer_types=["linear_attention"] * 3 + ["full_attention"])}),
    "OpenCUAForConditionalGeneration": ("qwen2_5_vl", {"text_config": _text("qwen2_5_vl_text")}),
    "InternS1ProForConditionalGeneration": ("qwen3_vl_moe", {"text_config": _text(
        "qwen3_vl_moe_text", head_dim=64, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=256,
        # interns1_pro.py:382-394: the FoPE fields of rope_scaling, which it requires
        rope_scaling={"rope_type": "default", "fope_init_factor": 0.1, "fope_sep_head": True,
                      "num_inv_freq": 16}, norm_topk_prob=True),
        "vision_config": {"depth": 2}}),
    **{arch: ("llava_onevision", {"text_config": _text("qwen2")})
       for arch in ("BeeForConditionalGeneration", "RForConditionalGeneration")},
    "MistralLarge3ForCausalLM": ("deepseek_v3", {"num_hidden_layers": 4, "n_group": 1,
                                                 "topk_group": 1}),
    # MiMoV2ForCausalLM subclasses MiMoV2FlashForCausalLM (mimo_v2.py:1125): MiMo-V2-Flash's
    # real config under the subclass's name
    "MiMoV2ForCausalLM": ("mimo_v2_flash", {"_from": "XiaomiMiMo--MiMo-V2-Flash.json"}),
    # MiMo-V2-Omni (mimo_v2_omni.py:1258-1290): MiMo-V2-Flash's text config with a vision_config
    # dict that vLLM builds as its Mimo_VLVisionConfig (vllm/transformers_utils/configs/
    # mimo_v2_omni.py: these defaults); the ViT reads vision_cfg.use_sink (mimo_v2_omni.py:474),
    # which that class does not define, so the checkpoint's vision_config carries it: False here
    # (no sink in the vision blocks; the ViT keeps no KV cache); no audio_config (no audio tower)
    "MiMoV2OmniForCausalLM": ("mimo_v2_flash", {"_from": "XiaomiMiMo--MiMo-V2-Flash.json",
                                                "vision_config": {"use_sink": False}}),
    # DeepseekV4ForConditionalGeneration (models/deepseek_v4/common/vl_model.py:137-191) wraps
    # DeepseekV4ForCausalLM on the same config; the vision variant is DeepSeek-V4-Flash's
    # config with the flat vision_* fields its tower reads (common/vision.py:86-213,
    # common/mm_preprocess.py:246-248; DeepseekV4Config has no default for them)
    "DeepseekV4ForConditionalGeneration": ("deepseek_v4", {
        "_from": "deepseek-ai--DeepSeek-V4-Flash.json", "vision_n_layers": 32,
        "vision_dim": 1024, "vision_n_heads": 16, "vision_inter_dim": 2816,
        "vision_patch_size": 14, "vision_rope_theta": 10000.0, "vision_downsample_ratio": 3,
        "vision_max_n_token": 384, "vision_min_pixels": 295936, "vision_max_wh_ratio": None}),
    # built on the CPU device (vllm_model_reference.BUILT_ON_CPU): a small stack
    "ApertusForCausalLM": ("apertus", dict(_SMALL)),
    "BloomForCausalLM": ("bloom", {"n_layer": 4, "hidden_size": 512, "n_head": 8,
                                   "vocab_size": 4096}),
    # InternVL-derived model classes on InternVL's remote config (the stand-in of
    # tools/oracle/models.py builds it)
    **{arch: ("internvl_chat", dict(_INTERNVL)) for arch in (
        "H2OVLChatModel", "NVLM_D", "SkyworkR1VChatModel", "Eagle2_5_VLForConditionalGeneration",
        "LlamaNemotronVLModel",
        "LlamaNemotronVLForSequenceClassification")},
    # vLLM's Moondream3Config reads the checkpoint's nested "config" (text / vision)
    **{arch: ("moondream3", {"_raw": True, "model_type": "moondream3", "config": {
        "text": {"n_layers": 4, "dim": 512, "ff_dim": 1024, "n_heads": 8, "n_kv_heads": 2,
                 "vocab_size": 4096, "max_context": 8192,
                 "moe": {"start_layer": 2, "n_experts": 4, "n_experts_per_tok": 2,
                         "expert_inner_dim": 256}},
        "vision": {}}}) for arch in ("HfMoondream", "Moondream3ForCausalLM")},
    # step3p5.py (0.33.0 maps model_type step3p5 to transformers' Step3p7TextConfig): the
    # MoE router fields of Step-3.5's config the class leaves unset
    "Step3p5ForCausalLM": ("step3p5", _STEP3P5_TEXT),
    "LightOnOCRForConditionalGeneration": ("lighton_ocr", {
        "text_config": _text("qwen3", head_dim=64), "vision_feature_layer": -1,
        "projector_hidden_act": "gelu", "multimodal_projector_bias": False,
        "spatial_merge_size": 2, "image_token_index": 151655}),
    "Granite4VisionForConditionalGeneration": ("granite4_vision", {
        "text_config": {"model_type": "granite4_vision_text", "num_hidden_layers": 4},
        "deepstack_layer_map": [[-1, 0]], "downsample_rate": "1/4"}),
    "Qwen3OmniMoeForConditionalGeneration": ("qwen3_omni_moe", {"thinker_config": {
        # qwen3_omni_moe_thinker.py's vision fields Qwen3OmniMoeVisionEncoderConfig leaves unset
        "vision_config": {"image_size": 768, "apply_vit_abs_pos_embed": True, "depth": 2},
        "audio_config": {"encoder_layers": 2},
        "text_config": _text("qwen3_omni_moe_text", head_dim=64, num_experts=4,
                             num_experts_per_tok=2, moe_intermediate_size=256,
                             max_position_embeddings=32768, tie_word_embeddings=False)}}),
    # vLLM's FunAudioChatConfig builds its sub-configs from the config.json as written
    "FunAudioChatForConditionalGeneration": ("funaudiochat", {
        "_raw": True, "model_type": "funaudiochat",
        "text_config": _text("qwen3", head_dim=64, max_position_embeddings=8192),
        "audio_config": {"pad_token_id": 0, "codebook_size": 4096, "encoder_layers": 2,
                         "output_dim": 512}}),
    "NemotronForCausalLM": ("nemotron", {"num_hidden_layers": 4, "num_key_value_heads": 8}),
    # chameleon.py:775-785 (0.25.1-0.28.0) reads the image token of vocabulary_map (which
    # facebook/chameleon-7b's config.json has); written with vLLM 0.28.0's venv
    "ChameleonForConditionalGeneration": ("chameleon", {"num_hidden_layers": 4, "vocabulary_map": {
        "<image>": 8711, "IMGIMGBA": 4, "IMGIMGBB": 5}}),
    # fuyu.py:286-302 (0.25.1): its patch projection reads the top-level hidden_size (which
    # adept/fuyu-8b's config.json states), the language model is a Persimmon on text_config
    "FuyuForCausalLM": ("fuyu", {"hidden_size": 4096, "text_config": {
        "model_type": "persimmon", "num_hidden_layers": 4}}),
    # rnj1.py:140-172: a chunked_attention layer passes chunk_lookback=1 and the window
    "Rnj1ForCausalLM": ("gemma3_text", {
        **_SMALL, "head_dim": 64, "sliding_window": 512,
        "layer_types": ["chunked_attention", "chunked_attention", "chunked_attention",
                        "full_attention"],
        # rnj1.py:147-151 reads rope_parameters[layer_type] (v5 style, one per layer type)
        "rope_parameters": {"chunked_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}}),
    # flint/configs.py (vLLM's FlintConfig): sliding per layer_types, sinks on every layer
    "FlintForCausalLM": ("flint", {
        **_SMALL, "head_dim": 64, "num_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 256, "shared_expert_intermediate_size": 256,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                        "full_attention"], "no_rope_layer_indices": [3]}),
}


SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    **_MAPPED,
    # architecture: (model_type, overrides of the config class's defaults)
    # vLLM 0.28.0's HCXVisionConfig (written with its venv; hyperclovax_vision.py, 0.25.1-0.28.0):
    # a small Llama text_config, a SigLIP tower, a linear projector, no anyres grids
    "HCXVisionForCausalLM": ("hyperclovax_vlm", {
        "text_config": _text("llama"), "mm_projector_type": "linear", "anyres": False,
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                          "intermediate_size": 4304, "num_hidden_layers": 2,
                          "num_attention_heads": 16, "image_size": 384, "patch_size": 14}}),
    "LlavaForConditionalGeneration": ("llava", {"text_config": _text("llama")}),
    "LlavaNextForConditionalGeneration": ("llava_next", {"text_config": _text("mistral")}),
    "LlavaNextVideoForConditionalGeneration": ("llava_next_video", {"text_config": _text("llama")}),
    "LlavaOnevisionForConditionalGeneration": ("llava_onevision", {"text_config": _text("qwen2")}),
    "Blip2ForConditionalGeneration": ("blip-2", {"text_config": {
        **_text("opt", ffn_dim=1024), "num_key_value_heads": 8}}),  # OPT has no GQA
    "Qwen2AudioForConditionalGeneration": ("qwen2_audio", {"text_config": _text("qwen2")}),
    "Glm4vForConditionalGeneration": ("glm4v", {"text_config": _text("glm4v_text")}),
    "InternVLForConditionalGeneration": ("internvl", {"text_config": _text("qwen2")}),
    # Phi-4-reasoning-vision (Phi4ForCausalLMV, phi4siglip.py:235-280): the checkpoint's remote
    # config (model type phi4-siglip) is a Phi-3 text config plus mm_hidden_size and a SigLIP2
    # vision_config dict (as a public test writes one, SOURCES.md); Phi3Config's defaults, a
    # 4-layer stack, SigLIP2's vision defaults; read by the harness's phi4-siglip stand-in
    "Phi4ForCausalLMV": ("phi3", {
        "_defaults_of": "transformers.models.phi3.configuration_phi3.Phi3Config",
        "num_hidden_layers": 4,
        "_written": {"": {"model_type": "phi4-siglip", "mm_hidden_size": 1152,
                          "mm_projector_type": "mlp2x_gelu",
                          "vision_config": {"model_type": "siglip2_vision_model"}}}}),
    # MOSS-Audio (MossAudioModel): the checkpoint's config class is remote code; vLLM's
    # moss_audio.py:266-300 holds its own MossAudioConfig (model type moss_audio, an audio
    # encoder config and a Qwen3 language_config), whose defaults these are, with a 4-layer
    # language model; read by the harness's moss_audio stand-in (moss_audio.py:1516-1526 wraps
    # any other config class in its MossAudioConfig)
    "MossAudioModel": ("moss_audio", {
        "_defaults_of": "vllm.model_executor.models.moss_audio.MossAudioConfig",
        "language_config": {"num_hidden_layers": 4, "layer_types": ["full_attention"] * 4},
        "_written": {"": {"model_type": "moss_audio", "num_hidden_layers": 4}}}),
    # FireRed-ASR2 (fireredasr2.py:121-150, :184-185): a Qwen2Config (the processing info asks
    # for that class) whose audio_encoder_conf holds vLLM's ConformerEncoder arguments (no
    # defaults for idim / n_layers_enc / n_head / d_model: a public FireRedASR vLLM adaptation's
    # config.json values, SOURCES.md) and encoder_downsample_rate; Qwen2Config's defaults with a
    # 4-layer stack
    "FireRedASR2ForConditionalGeneration": ("qwen2", {
        "num_hidden_layers": 4,
        "_written": {"": {"audio_encoder_conf": {"idim": 80, "n_layers_enc": 12, "n_head": 8,
                                                 "d_model": 512, "kernel_size": 33,
                                                 "pe_maxlen": 5000},
                          "encoder_downsample_rate": 2}}}),
    # Fun-ASR (funasr.py:633-640, :704-705): a Qwen3Config (the processing info asks for that
    # class) whose audio_encoder_conf holds SenseVoiceEncoderSmall's arguments (Fun-ASR-Nano's
    # config.yaml values as a public converter reads them, SOURCES.md); Qwen3Config's defaults
    # with a 4-layer stack
    "FunASRForConditionalGeneration": ("qwen3", {
        "num_hidden_layers": 4, "layer_types": ["full_attention"] * 4,
        "_written": {"": {"audio_encoder_conf": {"output_size": 512, "attention_heads": 4,
                                                 "linear_units": 2048, "num_blocks": 50,
                                                 "tp_blocks": 20}}}}),
    # LLaVA-OneVision-2 (llava_onevision2.py:2045-2075, :1135-1155): the checkpoint's remote
    # config class; a public copy of its MoE variant's configuration (SOURCES.md): model type
    # llava_onevision2_moe, a qwen3_moe text_config (4 layers here) and LlavaOnevision2VisionConfig's
    # defaults (model type llava_onevision2, kept as attributes by the harness's stand-in)
    "LlavaOnevision2ForConditionalGeneration": ("llava_onevision2_moe", {
        "_raw": True,
        "text_config": {"model_type": "qwen3_moe", "num_hidden_layers": 4},
        "vision_config": {"model_type": "llava_onevision2", "hidden_size": 1024,
                          "intermediate_size": 4096, "num_hidden_layers": 24,
                          "num_attention_heads": 16, "num_channels": 3, "image_size": 448,
                          "patch_size": 14, "hidden_act": "gelu", "layer_norm_eps": 1e-6,
                          "layer_norm_type": "layer_norm", "attention_dropout": 0.0,
                          "initializer_range": 0.02, "rope_theta": 10000.0, "use_head": False,
                          "out_hidden_size": 1024, "spatial_merge_size": 2,
                          "tokens_per_second": 1, "temporal_patch_size": 1,
                          "frame_windows_size": 4, "use_patch_position_encoding": False,
                          "patch_position_encoding_type": "absolute",
                          "max_position_embeddings": 8192},
        "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
        "vision_end_token_id": 151653, "output_router_logits": False,
        "router_aux_loss_coef": 0.001}),
    # Molmo2 (molmo2.py:2367-2402, :1156-1170): allenai's remote Molmo2Config holds vit_config,
    # adapter_config and text_config with the fields of vLLM's VitConfig / AdapterConfig /
    # TextConfig dataclasses (molmo2.py:165-260), whose defaults these are (the text model cut to
    # 4 layers), and the special-token ids (transformers' Molmo2Config defaults; image_col_id as
    # a public test's config writes it, SOURCES.md); read by the harness's forced molmo2 stand-in
    "Molmo2ForConditionalGeneration": ("molmo2", {
        "_raw": True,
        "vit_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                       "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72,
                       "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-06,
                       "image_default_input_size": [378, 378], "image_patch_size": 14,
                       "image_num_pos": 577},
        "adapter_config": {"vit_layers": [-3, -9], "pooling_attention_mask": False,
                           "hidden_size": 1152, "num_attention_heads": 16,
                           "num_key_value_heads": 16, "head_dim": 72, "hidden_act": "silu",
                           "intermediate_size": 18944, "text_hidden_size": 3584},
        "text_config": {"hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
                        "head_dim": 128, "vocab_size": 152064, "additional_vocab_size": 128,
                        "qkv_bias": True, "num_hidden_layers": 4, "intermediate_size": 18944,
                        "hidden_act": "silu", "max_position_embeddings": 4096,
                        "rope_theta": 1000000.0, "use_qk_norm": False, "qk_norm_type": "olmo",
                        "layer_norm_eps": 1e-06, "norm_after": False,
                        "rope_scaling_layers": None},
        "image_start_token_id": 151936, "low_res_image_start_token_id": 151940,
        "image_end_token_id": 151937, "image_patch_id": 151938, "image_col_id": 151939,
        "frame_start_token_id": 151943, "frame_end_token_id": 151944,
        "use_frame_special_tokens": True, "tie_word_embeddings": False}),
    # Intern-S1's remote InternS1Config (configuration_interns1.py) holds InternVLConfig's
    # defaults under model type interns1, its vision_config an InternS1VisionConfig (a subclass
    # of InternVLVisionConfig, model type interns1_vision, adding drop_path_rate 0.0); the text
    # model a Qwen3 (Intern-S1-mini's language model); read by the harness's interns1 stand-in
    "InternS1ForConditionalGeneration": ("internvl", {
        "text_config": _text("qwen3"),
        "_written": {"": {"model_type": "interns1"},
                     "vision_config": {"model_type": "interns1_vision", "drop_path_rate": 0.0}}}),
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


_GLM5_NEXT_READS: dict[str, Any] = {"mhc": True, "mla_use_nope": True, "indexer_rope_interleave": False,
                                    "topk_method": "noaux_tc", "scoring_func": "sigmoid"}
"""The fields vLLM's GLM-5.3 (glm5next) model reads that Glm5NextTextConfig leaves unset."""


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
    # vLLM's own InklingModelConfig (inkling_model): local (sliding) layers as the published
    # Inkling-Small's pattern (every sixth global), one dense layer, the MoE's shared sink
    # experts it asserts (moe.py:421), smaller sliding-layer heads than the global ones
    "InklingForCausalLM": ("inkling_model", {
        "num_hidden_layers": 8, "local_layer_ids": [0, 1, 2, 4, 5, 6], "dense_mlp_idx": 1,
        "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
        "shared_expert_sink": True, "use_sconv": True, "swa_num_key_value_heads": 2,
        "swa_head_dim": 64}),
    # transformers' Qwen4ExpTextConfig's defaults (8 layers: layer_types from
    # full_attention_interval 4, attention at 3 and 7; no indexer_n_heads, so those are
    # Qwen3NextAttention, vllm/models/qwen4_exp/nvidia/model.py:227-245; no PLE layers) with
    # output_gate_type silu: the class's None means hidden_act (validate_architecture), which
    # vLLM's GDN layer refuses as written (qwen_gdn_linear_attn.py:659-664); layer_types
    # spelled full_attention as the checkpoints write them (the class's __post_init__ reads
    # them as indexed_attention, which to_dict writes and the releases before 0.32.0 refuse:
    # the -indexed file); the vision tower 2 deep with no deepstack levels
    # (model.py:1005-1008 reads deepstack_visual_indexes, which Qwen4ExpVisionConfig lacks)
    "Qwen4ExpForCausalLM": ("qwen4_exp_text", {
        **_QWEN4_EXP_8, **_QWEN4_EXP_WRITTEN}),
    "Qwen4ExpForCausalLM-indexed": ("qwen4_exp_text", {
        "_arch": "Qwen4ExpForCausalLM", **_QWEN4_EXP_8}),
    "Qwen4ExpForConditionalGeneration": ("qwen4_exp", {
        "text_config": {"model_type": "qwen4_exp_text", **_QWEN4_EXP_8},
        "vision_config": {"model_type": "qwen4_exp_vision", "depth": 2,
                          "deepstack_visual_indexes": []},
        "_written": {"text_config": {"layer_types": _QWEN4_EXP_LAYERS}}}),
    # the same with QSA on the indexed_attention layers (indexer_* set: Qwen4ExpQSAAttention,
    # model.py:238-245, its fields' checks in Qwen4ExpTextConfig.validate_architecture: one
    # index KV head, budget divisible by the compression ratio, RoPE within the index head:
    # the default full rotary head of 256), with PLE on linear_attention layers 1 and 6
    # (one-indexed ids; eos_token_id required), and with both (the answers for the layers
    # attn-select does not model yet: the family's unmodelled_when)
    "Qwen4ExpForCausalLM-qsa": ("qwen4_exp_text", {
        "_arch": "Qwen4ExpForCausalLM", **_QWEN4_EXP_8, **_QWEN4_EXP_QSA,
        **_QWEN4_EXP_WRITTEN}),
    "Qwen4ExpForCausalLM-ple": ("qwen4_exp_text", {
        "_arch": "Qwen4ExpForCausalLM", **_QWEN4_EXP_8, **_QWEN4_EXP_PLE,
        **_QWEN4_EXP_WRITTEN}),
    "Qwen4ExpForCausalLM-qsa-ple": ("qwen4_exp_text", {
        "_arch": "Qwen4ExpForCausalLM", **_QWEN4_EXP_8, **_QWEN4_EXP_QSA, **_QWEN4_EXP_PLE,
        **_QWEN4_EXP_WRITTEN}),
    # HY-V4's defaults: no layer_types, so every layer is dense MLA (with a learnable sink)
    "HYV4ForCausalLM": ("hy_v4", {"num_hidden_layers": 8}),
    # Step5Config's defaults carry no sparse_config section, which vLLM refuses
    # (step5/nvidia/model.py:1853-1857): Step5SparseConfig's defaults (sparse on
    # full_attention layers) with index_tp_size = the KV groups (:397-400), 8 query heads
    # per KV group (:426-427), three sliding layers before each full one, the head-wise gate
    # its DSA layers require (:1051-1054), the MoE's router bias and fp32 gate
    # (kept as tests/fixtures/hf_configs/model_driven/synthetic--Step5ForCausalLM.json)
    "Step5ForCausalLM": ("step5", {
        "num_hidden_layers": 8, "sparse_config": {"index_tp_size": 8}, "sliding_window": 512,
        "num_attention_heads": 64, "head_dim": 192, "use_head_wise_attn_gate": True,
        "use_moe_router_bias": True, "need_fp32_gate": True,
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"]
        + ["sliding_attention"] * 3 + ["full_attention"]}),
    "BailingMoeV3ForCausalLM": ("bailing_hybrid", {
        "num_hidden_layers": 8, "no_kda_lora": True, "use_bias": False, "n_group": 1,
        "num_experts_per_tok": 2, "moe_shared_expert_intermediate_size": 1024}),
    # vLLM's BailingMoeV3VLConfig: its text_config a BailingMoeV3TextConfig (bailing_hybrid)
    # of 8 layers (layer_group_size 5: KDA layers 0-3, MLA layers 4-7), the vision tower 2 deep
    "BailingMoeV3VLForConditionalGeneration": ("bailing_moe_v3_vl", {
        "text_config": {"num_hidden_layers": 8, "no_kda_lora": True, "use_bias": False,
                        "n_group": 1, "num_experts_per_tok": 2,
                        "moe_shared_expert_intermediate_size": 1024},
        "vision_config": {"depth": 2}}),
    # transformers' Glm5NextTextConfig (8 layers: KDA where i % 4 != 3, DSA-indexed MLA at
    # 3 and 7) plus the fields vLLM's glm5next model reads that the class does not define
    # (mhc, mla_use_nope: vllm/models/glm5next/common/model.py:380, :411; topk_method,
    # scoring_func: :256, :312; indexer_rope_interleave: attention.py:510-514)
    "Glm5NextForCausalLM": ("glm5_next_text", {"num_hidden_layers": 8, **_GLM5_NEXT_READS}),
    "Glm5NextForConditionalGeneration": ("glm5_next", {
        "text_config": {"model_type": "glm5_next_text", "num_hidden_layers": 8, **_GLM5_NEXT_READS},
        "vision_config": {"depth": 2}}),
    # Ring-2.5 / Ling-2.5 (model type bailing_hybrid, vllm/transformers_utils/
    # model_arch_config_convertor.py:317): transformers' BailingHybridConfig with the values of
    # inclusionAI/Ring-V2.5 models/configuration_bailing_moe_v2_5.py's defaults where they
    # differ, and its fields the class lacks (8 layers; layer_group_size 5: lightning layers
    # 0-3 and 5-7, MLA layer 4)
    "BailingMoeV2_5ForCausalLM": ("bailing_hybrid", {
        "num_hidden_layers": 8, "hidden_size": 2048, "intermediate_size": 5120,
        "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128,
        "layer_group_size": 5, "group_norm_size": 4, "linear_silu": False, "use_bias": False,
        "use_qkv_bias": False, "partial_rotary_factor": 0.5, "num_experts": 256,
        "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4, "moe_intermediate_size": 512,
        "moe_shared_expert_intermediate_size": 512, "first_k_dense_replace": 1,
        "max_position_embeddings": 32768}),
    "SarvamMLAForCausalLM": ("sarvam_mla", {"num_hidden_layers": 4}),
    "SarvamMoEForCausalLM": ("sarvam_moe", {
        "num_hidden_layers": 4, "embedding_dropout": 0.0, "use_bias": False, "num_experts": 8,
        "num_experts_per_tok": 2, "moe_shared_expert_intermediate_size": 1024}),
    "IQuestLoopCoderForCausalLM": ("iquestcoder", {"num_hidden_layers": 4}),
    # longcat_flash_ngram.py:38-40, :58-70: the n-gram embedding when ngram_vocab_size_ratio
    # is set (LongcatFlashConfig has no such fields): emb_split_num * (emb_neighbor_num - 1)
    # tables of ratio * vocab_size + 2i + 1 rows; no public LongCat-Flash-Lite config.json was
    # found: ratio 78, 4 neighbours, 4 splits are the n-gram fields a public LongCat-Next
    # hashing fixture pins for its config (LongCat-Next's backbone is this FlashNgramModel)
    "LongcatFlashNgramForCausalLM": ("longcat_flash", {
        "num_layers": 2, "mla_scale_q_lora": True, "mla_scale_kv_lora": True,
        "zero_expert_num": 2, "zero_expert_type": "identity", "vocab_size": 4096,
        "ngram_vocab_size_ratio": 78, "emb_neighbor_num": 4, "emb_split_num": 4}),
    "MuseGlimmerForCausalLM": ("muse_glimmer", {"text_config": {"model_type": "muse_glimmer_text",
                                                                "num_hidden_layers": 8}}),
    # Muse Spark: vLLM's MuseSparkConfig (vllm/transformers_utils/configs/muse_spark.py:381-430)
    # has no defaults at init; transformers' MuseSparkConfig's defaults (its 62-layer text
    # stack's first 8 layers: sliding, full, sliding x 3, full, sliding x 2) and the
    # num_shared_experts vLLM's MuseSparkTextConfig reads (:333, shared experts refused)
    "MuseSparkForConditionalGeneration": ("muse_spark", {
        "_defaults_of": "transformers.models.muse_spark.configuration_muse_spark.MuseSparkConfig",
        "text_config": {
            "num_hidden_layers": 8, "num_shared_experts": 0,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                            "sliding_attention", "sliding_attention", "full_attention",
                            "sliding_attention", "sliding_attention"],
            "layer_rope_theta": [500000.0, 0, 500000.0, 500000.0, 500000.0, 0, 500000.0,
                                 500000.0],
            "mlp_layer_types": ["sparse"] * 8}}),
    # the multimodal registry's name for the same class (registry.py:555): the same config
    "MuseGlimmerForConditionalGeneration": ("muse_glimmer", {"text_config": {
        "model_type": "muse_glimmer_text", "num_hidden_layers": 8}}),
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
    # vLLM's own FireRedLIDConfig (vllm/transformers_utils/configs/fireredlid.py, vLLM
    # 0.25.1-0.28.0; written with 0.28.0's venv): a 4-layer decoder and encoder
    "FireRedLIDForConditionalGeneration": ("fireredlid", {"n_layers_lid_dec": 4, "n_layers_enc": 4}),
}
SPECS.update(TEXT_SPECS)
# issue 24: the multimodal classes that read the tokenizer while they are built (the
# reference's tokenizer stand-in, tools/vllm_model_reference.py TOKENIZER_STAND_INS):
# vLLM's DeepseekVLV2Config (vllm/transformers_utils/configs/deepseek_vl2.py) with a 4-layer
# DeepSeek-V2 language model (its language_config, the key the class reads) and the SigLIP
# tower's defaults; DeepSeek-OCR's checkpoints are the same model type
# (the model type and architecture DeepSeek-VL2's and DeepSeek-OCR's checkpoints write there)
_DEEPSEEK_VL2_LANGUAGE = {"model_type": "deepseek_v2", "architectures": ["DeepseekV2ForCausalLM"],
                          "num_hidden_layers": 4, "n_group": 1, "topk_group": 1,
                          "max_position_embeddings": 4096}
SPECS.update({
    "DeepseekVLV2ForCausalLM": ("deepseek_vl_v2", {
        "language_config": _DEEPSEEK_VL2_LANGUAGE, "tile_tag": "2D", "_drop": ["text_config"]}),
    # ColQwen3.5: a Qwen3.5 config named ColQwen3_5, which declares its attention contract
    # (vllm/model_executor/models/config.py:1081-1115 ColQwen3_5Config refuses a checkpoint
    # without retrieval_attention_contract, and sets is_causal from it): both contracts
    "ColQwen3_5": ("qwen3_5", {
        "text_config": {"model_type": "qwen3_5_text", "num_hidden_layers": 4},
        "_written": {"": {"retrieval_attention_contract": "causal"}}}),
    "ColQwen3_5-bidirectional": ("qwen3_5", {
        "_arch": "ColQwen3_5", "text_config": {"model_type": "qwen3_5_text", "num_hidden_layers": 4},
        "_written": {"": {"retrieval_attention_contract": "bidirectional"}}}),
    # transformers' HunYuanVLConfig (HunyuanOCR), whose text config defaults no head_dim (the
    # checkpoint's 128, as _EXTRA gives HunYuan's dense text models)
    "HunYuanVLForConditionalGeneration": ("hunyuan_vl", {"text_config": {
        "model_type": "hunyuan_vl_text", "num_hidden_layers": 4, "head_dim": 128}}),
    # transformers' Emu3Config: a checkpoint's vocabulary_map names the image and end-of-line
    # tokens the model reads while it is built (modeling_emu3.py:1059-1062, :1334; its visual
    # tokens only when an image is encoded): those two, with stand-in ids
    "Emu3ForConditionalGeneration": ("emu3", {
        "text_config": {"model_type": "emu3_text_model", "num_hidden_layers": 4},
        "vocabulary_map": {"<image>": 151646, "<|extra_200|>": 151846}}),
    # the Transformers backend's multimodal classes named in architectures: a small LLaVA
    # (transformers' LlavaConfig: a Llama, or for the MoE classes a Qwen3-MoE, text model
    # and a two-layer CLIP tower), served with llava-1.5's processor files
    # (tools/vllm_model_reference.py PROCESSOR_STAND_INS)
    **{arch: ("llava", {"text_config": {"model_type": "llama", **_SMALL, "vocab_size": 32064},
                        "vision_config": {"model_type": "clip_vision_model", "num_hidden_layers": 2}})
       for arch in ("TransformersMultiModalForCausalLM", "TransformersMultiModalEmbeddingModel")},
    # transformers has no sequence-classification head for LLaVA (vLLM's answer for one is
    # AutoModelForSequenceClassification's ValueError): Gemma-3's, six text layers (five
    # sliding, one full) and a two-layer SigLIP tower, with gemma-3-27b-it's processor files
    "TransformersMultiModalForSequenceClassification": ("gemma3", {
        "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 6},
        "vision_config": {"model_type": "siglip_vision_model", "num_hidden_layers": 2}}),
    "TransformersMultiModalMoEForCausalLM": ("llava", {
        "text_config": {"model_type": "qwen3_moe", **_SMALL, "vocab_size": 32064, "head_dim": 64,
                        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 256},
        "vision_config": {"model_type": "clip_vision_model", "num_hidden_layers": 2}}),
    # vLLM's UnlimitedOCRConfig (vllm/transformers_utils/configs/unlimited_ocr.py: the
    # DeepSeek-OCR layout, a DeepSeek-V2 MoE language model without MLA, rswa_window 128): plain
    # multi-head attention, deepseek_v2.py:1280-1288 (qk_nope / qk_rope head dims 0)
    "UnlimitedOCRForCausalLM": ("unlimited_ocr", {
        "language_config": {**_DEEPSEEK_VL2_LANGUAGE, "use_mla": False, "kv_lora_rank": None,
                            "q_lora_rank": None, "qk_nope_head_dim": 0, "qk_rope_head_dim": 0,
                            "v_head_dim": 0}, "_drop": ["text_config"]}),
    # DeepSeek-OCR-2's model class reads vLLM's DeepseekVLV2Config too (deepseek_ocr2.py:51,
    # :70-71, :257-265: projector_config, tile_tag), not transformers' DeepseekOcr2Config
    "DeepseekOCR2ForCausalLM": ("deepseek_vl_v2", {
        "language_config": _DEEPSEEK_VL2_LANGUAGE, "tile_tag": "2D", "_drop": ["text_config"]}),
    "DeepseekOCRForCausalLM": ("deepseek_vl_v2", {
        "language_config": _DEEPSEEK_VL2_LANGUAGE, "tile_tag": "2D", "_drop": ["text_config"]}),
})

_BASE = {**_SMALL, "head_dim": 64, "rms_norm_eps": 1e-6, "hidden_act": "silu", "rope_theta": 10000.0,
         "tie_word_embeddings": False, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
"""A small decoder for a config class that is the model's remote code."""

_MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
        "moe_shared_expert_intermediate_size": 256, "num_shared_experts": 1,
        "first_k_dense_replace": 1, "norm_topk_prob": True}


_RADIO = {"patch_size": 16, "max_resolution": 2048,
          "args": {"model": "vit_huge_patch16_224", "register_multiple": 8,
                   "cls_token_per_teacher": True,
                   "teachers": [{"name": "clip", "use_summary": True},
                                {"name": "siglip", "use_summary": True},
                                {"name": "dino_v2", "use_summary": True}]}}
"""The RADIO vision encoder nemotron_parse.py builds from ``config.encoder.args``
(RadioConfig(model_name=args.model, ...): a ViT-H/16)."""

_MBART = {"model_type": "mbart", "d_model": 1024, "decoder_layers": 4, "decoder_attention_heads": 16,
          "decoder_ffn_dim": 4096, "encoder_ffn_dim": 4096, "activation_function": "gelu",
          "scale_embedding": True, "vocab_size": 4096, "max_position_embeddings": 4096}
"""The MBart decoder (``config.decoder``; vLLM's type hint is BartConfig): 4 layers of 16
heads of 64 (vLLM derives the maximum length from it: transformers' get_text_config)."""

_PARSE = {"image_size": [2048, 1664], "tie_word_embeddings": False,
          "encoder": _RADIO, "decoder": _MBART}
"""Nemotron-Parse: a RADIO encoder and an MBart decoder with cross-attention
(nemotron_parse.py:626-670)."""

_PARSE_3_5 = {**_PARSE, "navit_packing": True,
              "decoder": {**_MBART, "causal_vision_prefix": True, "add_cross_attention": False,
                          "self_attention_kv_heads": 4}}
"""Parse 3.5: the visual prefix in the decoder's own causal attention, no cross-attention
(nemotron_parse3_5.py:657-700 refuses a config without ``causal_vision_prefix``, with
``add_cross_attention`` (default true) or without ``navit_packing``); grouped K/V heads
from ``self_attention_kv_heads`` (:209-216)."""

_COHERE_ASR = {
    # the NeMo-style config vLLM's cohere_asr.py reads (transformers' CohereAsrConfig keeps
    # the extra keys): a FastConformer encoder (the config class's parakeet defaults:
    # d_model 1280, 8 heads, ff x4, kernel 9, subsampling 8 over 256 channels, 128 mels),
    # 4 layers here, and the transformer decoder in transf_decoder.config_dict
    "encoder": {"feat_in": 128, "n_layers": 4, "d_model": 1280, "feat_out": -1,
                "causal_downsampling": False, "subsampling": "dw_striding",
                "subsampling_factor": 8, "subsampling_conv_chunking_factor": 1,
                "subsampling_conv_channels": 256, "ff_expansion_factor": 4,
                "self_attention_model": "rel_pos", "n_heads": 8, "att_context_size": [-1, -1],
                "xscaling": True, "untie_biases": True, "pos_emb_max_len": 5000,
                "conv_kernel_size": 9, "conv_norm_type": "batch_norm", "conv_context_size": None},
    "transf_decoder": {"config_dict": {"hidden_size": 1024, "inner_size": 4096,
                                       "num_attention_heads": 8, "num_layers": 4,
                                       "max_sequence_length": 1024, "hidden_act": "relu"}},
    "head": {"num_classes": 16384, "hidden_size": 1024},
    "preprocessor": {"sample_rate": 16000, "features": 128, "window_size": 0.025,
                     "window_stride": 0.01, "n_fft": 512},
    "max_audio_clip_s": 35, "overlap_chunk_second": 5, "sample_rate": 16000,
    "vocab_size": 16384, "max_position_embeddings": 1024}

_PLAMO2_1B = {
    "hidden_size": 2048, "num_hidden_layers": 16, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True, "num_attention_heads": 16, "num_key_value_heads": 1,
    "hidden_size_per_head": 128, "max_position_embeddings": 10485760,
    "attention_window_size": 2048, "mamba_d_state": 64, "mamba_d_conv": 4,
    "mamba_num_heads": 32, "mamba_step": 2, "mamba_chunk_size": 256, "mamba_enabled": True,
    "intermediate_size": 8192, "vocab_size": 100000,
    # plamo2.py:589-599 reads config.rope_parameters (transformers 5's standardised rope),
    # which the quoted values leave out: the default rope
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
"""pfnet/plamo-2-1b's config values as two public copies quote them (SOURCES.md)."""

RAW: dict[str, tuple[str, dict[str, Any]]] = {
    # Nemotron Nano VL v2's remote config (model_type NemotronH_Nano_VL_V2, carried by the
    # harness's stand-in config class): the top-level keys a published config holds as a
    # public loader test writes them (exact-string search of the code corpus,
    # "model_type": "NemotronH_Nano_VL_V2": force_image_size, patch_size, downsample_ratio,
    # the image tokens, vit / projector hidden sizes, CLIP norm mean / std), the fields
    # nano_nemotron_vl.py:964-1010 reads besides (template, ps_version, image_tag_type), a
    # small NemotronH llm_config (Mamba, attention, Mamba, MLP; its dtype, which :992 asserts)
    # and the RADIO ViT-H/16
    # vision_config (get_vit_model_from_radio_config, :1691-1721)
    "NemotronH_Nano_VL_V2": ("NemotronH_Nano_VL_V2", {
        "force_image_size": 512, "patch_size": 16, "downsample_ratio": 0.5,
        "use_thumbnail": True, "template": "nemotron-h-5p5", "ps_version": "v2",
        "image_tag_type": "internvl", "img_context_token_id": 18,
        "img_context_token": "<image>", "img_start_token": "<img>", "img_end_token": "</img>",
        "vit_hidden_size": 1280, "projector_hidden_size": 20480,
        "norm_mean": [0.48145466, 0.4578275, 0.40821073],
        "norm_std": [0.26862954, 0.26130258, 0.27577711],
        "llm_config": {"model_type": "nemotron_h", "num_hidden_layers": 4, "hidden_size": 512,
                       "max_position_embeddings": 32768, "num_attention_heads": 8,
                       "num_key_value_heads": 2, "head_dim": 64, "layer_norm_epsilon": 1e-5,
                       "conv_kernel": 4, "ssm_state_size": 128, "mamba_num_heads": 16,
                       "mamba_head_dim": 32, "n_groups": 8, "hybrid_override_pattern": "M*M-",
                       "intermediate_size": 1024, "vocab_size": 4096, "torch_dtype": "bfloat16"},
        "vision_config": _RADIO}),
    # Ovis2.5's remote config (model_type ovis2_5, carried by the harness's stand-in config
    # class): the keys of the published checkpoints' config.json as a transformers conversion
    # test writes them (exact-string search of the code corpus, "model_type": "ovis2_5"),
    # the Qwen3 llm_config and the SigLIP2-NaViT vit_config shrunk (ovis2_5.py:446-467 reads
    # text_config, vit_config, visual_vocab_size, hidden_size)
    "Ovis2_5": ("ovis2_5", {
        "visual_vocab_size": 65536, "hidden_size": 512,
        "llm_config": _text("qwen3", head_dim=64, max_position_embeddings=40960,
                            rope_theta=1000000, rms_norm_eps=1e-6, hidden_act="silu",
                            attention_bias=False, tie_word_embeddings=False),
        "vit_config": {"model_type": "siglip2_navit", "hidden_size": 1152,
                       "intermediate_size": 4304, "num_hidden_layers": 2,
                       "num_attention_heads": 16, "num_channels": 3, "num_patches": -1,
                       "image_size": 512, "patch_size": 16, "hidden_act": "gelu_pytorch_tanh",
                       "layer_norm_eps": 1e-6, "attention_dropout": 0.0, "hidden_stride": 2,
                       "fullatt_block_indexes": None, "temporal_patch_size": 1,
                       "window_size": 112, "preserve_original_pe": True, "use_rope": True}}),
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
    # molmo.py:403-460, :813-860: a MolmoModel of its own on the top-level config (allenai's
    # remote MolmoConfig); the vision backbone's sizes are vLLM's VisionBackboneConfig
    "MolmoForCausalLM": ("molmo", {**_BASE, "attention_layer_norm": False, "embedding_size": 4096,
                                   "layer_norm_eps": 1e-6, "layer_norm_type": "rms", "norm_after": False,
                                   "qkv_bias": True, "weight_tying": False,
                                   "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}),
    # ouro.py:105-195 (0.25.1-0.26.0): the stack runs total_ut_steps times, each step with its
    # own caches named layers.<step * L + i>
    "OuroForCausalLM": ("ouro", {**_BASE, "total_ut_steps": 3, "max_window_layers": 4,
                                 "use_sliding_window": False, "sliding_window": None,
                                 "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}),
    # arctic.py:229-270 (0.25.1-0.28.0): num_key_value_heads of hidden_size // heads; the
    # release's own ArcticConfig (vllm/transformers_utils/configs/arctic.py) reads it
    "ArcticForCausalLM": ("arctic", {**_BASE, "num_local_experts": 4, "num_experts_per_tok": 2,
                                     "moe_layer_frequency": 2, "parallel_attn_mlp_res": False,
                                     "use_residual": True}),  # arctic.py reads it; the class has no default
    "PanguUltraMoEForCausalLM": ("pangu_ultra_moe", {
        **_BASE, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "first_k_dense_replace": 1,
        "moe_intermediate_size": 256, "n_routed_experts": 4, "n_shared_experts": 1,
        "norm_topk_prob": True, "num_experts_per_tok": 2, "routed_scaling_factor": 2.5,
        "router_enable_expert_bias": True, "torch_dtype": "bfloat16"}),
    # openpangu.py:522-700 (OpenPanguSinkAttention when param_sink_number > 0: head size
    # qk_nope_dim + qk_rope_dim, V head size v_channels, param_sink_number sink tokens; the
    # KV-cache manager asserts sink_len % block_size == 0, single_type_kv_cache_manager.py:2220)
    # and :150-200 (OpenPanguMoE after first_k_dense_replace)
    "PanguProMoEV2ForCausalLM": ("pangu_pro_moe_v2", {
        **_BASE, "qk_nope_dim": 128, "qk_rope_dim": 64, "v_channels": 128,
        "param_sink_number": 128, "param_sink_with_value": True, "first_k_dense_replace": 1,
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
    # plamo3.py:164-206: layer_types[i] picks the rope, interleaved_sliding_window[i] the
    # layer's window (null: full attention)
    "Plamo3ForCausalLM": ("plamo3", {
        **_BASE, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                                 "full_attention"],
        "interleaved_sliding_window": [512, 512, 512, None], "sliding_window": 512,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        "rope_local_theta": 10000.0}),
    # encoder-decoders whose decoder is a sub-config (vLLM reads config.decoder /
    # transf_decoder.config_dict); no public config.json the search found
    "NemotronParseForConditionalGeneration": ("nemotron_parse", _PARSE),
    "RadioMBartPrefixForCausalLM": ("nemotron_parse", _PARSE_3_5),
    "CohereAsrForConditionalGeneration": ("cohere_asr", _COHERE_ASR),
    # plamo2.py (vLLM 0.25.1):101-107 is_mamba (attention where i % mamba_step ==
    # mamba_step // 2; a stack of at most mamba_step // 2 layers: its last layer),
    # :546-626 Plamo2AttentionMixer (num_key_value_heads of hidden_size_per_head), :115-135
    # and :470-479 Plamo2MambaMixer (mamba2_state_shape of mamba_num_heads *
    # hidden_size_per_head, n_groups 0, mamba_d_state, mamba_d_conv); the values are
    # pfnet/plamo-2-1b's (SOURCES.md)
    "Plamo2ForCausalLM": ("plamo2", _PLAMO2_1B),
    # the rule's other branches: mamba_step 4 over 8 layers (attention at 2 and 6), and a
    # stack of mamba_step // 2 layers (attention in the last only)
}


_SIGLIP = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
           "num_hidden_layers": 2, "num_attention_heads": 16, "num_channels": 3, "image_size": 980,
           "patch_size": 14, "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6}
"""MiniCPM-V's SigLIP tower (the published configs' vision_config), two layers deep."""

_MINICPMV = {"query_num": 64, "image_size": 448, "patch_size": 14, "drop_vision_last_layer": False,
             "batch_vision_input": True, "use_image_id": True, "slice_mode": True,
             "slice_config": {"max_slice_nums": 9, "patch_size": 14, "scale_resolution": 448},
             "vision_config": _SIGLIP}
"""The wrapper fields of the remote MiniCPMVConfig that minicpmv.py reads (query_num, the
vision tower, the slicing)."""

_QWEN2 = {**_BASE, "max_window_layers": 4, "use_sliding_window": False, "sliding_window": None,
          "rope_theta": 1000000.0}
_QWEN3 = {**_BASE, "head_dim": 128, "attention_bias": False, "max_window_layers": 4,
          "use_sliding_window": False, "sliding_window": None, "rope_theta": 1000000.0}

VARIANTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # Ovis2.6 (vLLM builds Ovis2_6ForCausalLM and Ovis2_6_MoeForCausalLM as Ovis2_5,
    # registry.py:567-569): Ovis2.5's remote config (no public Ovis2.6 config.json found
    # within the search budget), a Qwen3 / Qwen3-MoE llm_config
    "Ovis2_6ForCausalLM": ("Ovis2_6ForCausalLM", "ovis2_5", RAW["Ovis2_5"][1]),
    "Ovis2_6_MoeForCausalLM": ("Ovis2_6_MoeForCausalLM", "ovis2_5", {
        **RAW["Ovis2_5"][1],
        "llm_config": _text("qwen3_moe", head_dim=64, max_position_embeddings=40960,
                            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256,
                            tie_word_embeddings=False)}),
    # file name: (architecture, model_type, fields): remote-code configs (the harness's
    # stand-in class) of one architecture whose language model a version field picks
    # (minicpmv.py:2434-2489, minicpmo.py:993-1046): each version's decoder, a small stack
    # PLaMo-2's is_mamba branches (plamo2.py, vLLM 0.25.1:101-107): mamba_step 4 over 8
    # layers (attention at 2 and 6), and a stack of mamba_step // 2 layers (attention in the
    # last only)
    "Plamo2ForCausalLM-step4": ("Plamo2ForCausalLM", "plamo2",
                                {**_PLAMO2_1B, "num_hidden_layers": 8, "mamba_step": 4}),
    "Plamo2ForCausalLM-short": ("Plamo2ForCausalLM", "plamo2",
                                {**_PLAMO2_1B, "num_hidden_layers": 2, "mamba_step": 4}),
    # HY-V4's sparse layers (vllm/models/hy_v4/nvidia/attention.py:318-341 in 0.33.0): the
    # layer_types entries that are sparse, each with an indexer unless indexer_types makes it
    # "shared" (HYV4Config's default: "full" at layer 0 and every 4th from 1); a dense layer
    # whose indexer_types entry is "shared" stays dense
    "HYV4ForCausalLM-sparse": ("HYV4ForCausalLM", "hy_v4", {
        "num_hidden_layers": 6, "layer_types": [
            "full_attention", "sparse_attention", "sparse", "deepseek_sparse_attention",
            "full_attention", "deepseek_sparse_attention"]}),
    # every layer sparse, indexer_types stated, no sink
    "HYV4ForCausalLM-shared": ("HYV4ForCausalLM", "hy_v4", {
        "num_hidden_layers": 4, "layer_types": ["deepseek_sparse_attention"] * 4,
        "indexer_types": ["full", "shared", "full", "shared"], "learnable_sink": False}),
    # dense layers before sparse ones only (an own indexer each): the sparse layers' backend
    # rewrites the shared KV-cache dtype (mla_attention.py:523-528 in 0.33.0) after the dense
    # layers are built, so with fp8 the model builds, its layers stored in two dtypes
    "HYV4ForCausalLM-dense-first": ("HYV4ForCausalLM", "hy_v4", {
        "num_hidden_layers": 4, "layer_types": [
            "full_attention", "full_attention", "deepseek_sparse_attention",
            "deepseek_sparse_attention"], "indexer_types": ["full", "full", "full", "full"]}),
    # indexer_types that a sparse layer's compute_skip_topk_layers refuses (attention.py:84-94)
    "HYV4ForCausalLM-indexer-types-length": ("HYV4ForCausalLM", "hy_v4", {
        "num_hidden_layers": 4, "layer_types": ["deepseek_sparse_attention"] * 4,
        "indexer_types": ["full", "shared", "full"], "learnable_sink": False}),
    "HYV4ForCausalLM-indexer-types-value": ("HYV4ForCausalLM", "hy_v4", {
        "num_hidden_layers": 4, "layer_types": ["deepseek_sparse_attention"] * 4,
        "indexer_types": ["full", "shared", "skip", "shared"], "learnable_sink": False}),
    "MiniCPMV-2_5": ("MiniCPMV", "minicpmv", {**_BASE, **_MINICPMV, "version": 2.5}),
    "MiniCPMV-2_6": ("MiniCPMV", "minicpmv", {**_QWEN2, **_MINICPMV, "version": 2.6}),
    "MiniCPMV-4_0": ("MiniCPMV", "minicpmv", {**_BASE, **_MINICPMV, "version": 4.0}),
    "MiniCPMV-4_5": ("MiniCPMV", "minicpmv", {**_QWEN3, **_MINICPMV, "version": 4.5}),
    # a version vLLM's dispatch does not build: its ValueError
    "MiniCPMV-4_6": ("MiniCPMV", "minicpmv", {**_QWEN3, **_MINICPMV, "version": 4.6}),
    # a version part that is no integer: int()'s ValueError (minicpmv.py:2463)
    "MiniCPMV-2_x": ("MiniCPMV", "minicpmv", {**_QWEN2, **_MINICPMV, "version": "2.x"}),
    # no version field: (2, 5) unless hidden_size 2304 and query_num 64 (minicpmv.py:2457-2461)
    "MiniCPMV-noversion": ("MiniCPMV", "minicpmv", {**_BASE, **_MINICPMV}),
    "MiniCPMO-2_6": ("MiniCPMO", "minicpmo", {
        **_QWEN2, **_MINICPMV, "version": "2.6",
        "audio_config": {"model_type": "whisper", "d_model": 512, "encoder_layers": 2,
                         "encoder_attention_heads": 8, "encoder_ffn_dim": 1024,
                         "num_mel_bins": 80, "max_source_positions": 1500},
        "audio_pool_step": 2, "init_audio": True, "init_tts": False}),
    "MiniCPMO-4_5": ("MiniCPMO", "minicpmo", {
        **_QWEN3, **_MINICPMV, "version": "4.5",
        "audio_config": {"model_type": "whisper", "d_model": 512, "encoder_layers": 2,
                         "encoder_attention_heads": 8, "encoder_ffn_dim": 1024,
                         "num_mel_bins": 80, "max_source_positions": 1500},
        "audio_pool_step": 5, "init_audio": True, "init_tts": False}),
    # minicpmo.py:1016-1041: a version of one part, (4,), is refused; so is one that is no
    # dotted integers
    "MiniCPMO-4": ("MiniCPMO", "minicpmo", {**_QWEN3, **_MINICPMV, "version": 4}),
    "MiniCPMO-v4_5": ("MiniCPMO", "minicpmo", {**_QWEN3, **_MINICPMV, "version": "v4.5"}),
    # ernie45_vl.py:1395-1424, ernie45_vl_moe.py: the remote Ernie4_5_VLMoEConfig's flat
    # fields (baidu/ERNIE-4.5-VL-28B-A3B-PT's names), a small MoE stack of text and vision
    # experts from layer 1 on and a two-block DFNRope vision tower
    "Ernie4_5_VLMoeForConditionalGeneration": ("Ernie4_5_VLMoeForConditionalGeneration", "ernie4_5_moe_vl", {
        **_BASE, "vocab_size": 103424, "rope_theta": 500000.0, "freq_allocation": 20, "rope_3d": True,
        "use_bias": False, "tie_word_embeddings": True, "im_patch_id": 100295,
        "image_start_token_id": 101304, "image_end_token_id": 101305,
        "video_start_token_id": 101306, "video_end_token_id": 101307,
        "moe_num_experts": [4, 4], "moe_layer_start_index": [1, 1], "moe_layer_end_index": [3, 3],
        "moe_intermediate_size": [256, 128], "moe_k": 2, "moe_num_shared_experts": 1,
        "moe_layer_interval": 1, "moe_use_aux_free": True,
        "pixel_hidden_size": 1280, "spatial_conv_size": 2, "temporal_conv_size": 2,
        "use_temporal_conv": True,
        "vision_config": {"depth": 2, "embed_dim": 1280, "hidden_size": 1280, "hidden_act": "quick_gelu",
                          "mlp_ratio": 4, "num_heads": 16, "in_channels": 3, "patch_size": 14,
                          "spatial_merge_size": 2}}),
}


_MAPPED_DEFAULTS: dict[str, str] = {
    # as _MAPPED: architectures whose config class's defaults (a 4-layer stack) suffice
    "ColPaliForRetrieval": "colpali",
    "Cosmos3ForConditionalGeneration": "cosmos3_omni",
    "Gemma3nForConditionalGeneration": "gemma3n",
    # issue 24: the processor / tokenizer readers (the reference writes their processor
    # files or a tokenizer stand-in beside the config)
    "IsaacForConditionalGeneration": "isaac",
    "ColQwen3": "colqwen3",
    "OpsColQwen3Model": "ops_colqwen3",
    "Qwen3VLNemotronEmbedModel": "qwen3_vl_nemotron_embed",
    "VibeVoiceAsrForConditionalGeneration": "vibevoice_asr",
}


DEFAULTS: dict[str, str] = {
    **_MAPPED_DEFAULTS,
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
    "MossTranscribeDiarizeForConditionalGeneration": "moss_transcribe_diarize",
    "NemotronHPuzzleForCausalLM": "nemotron_h",
    "OlmoeForCausalLM": "olmoe",
    "PaliGemmaForConditionalGeneration": "paligemma",
    "PersimmonForCausalLM": "persimmon",  # written with vLLM 0.25.1's venv (its last release)
    "MptForCausalLM": "mpt",
    "CheersForConditionalGeneration": "umm",  # vLLM 0.28.0's CheersConfig (written with its venv)
    "MPTForCausalLM": "mpt",
    "Fairseq2LlamaForCausalLM": "llama",
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
    if arch in VARIANTS:
        name, (arch, model_type, fields) = arch, VARIANTS[arch]
    else:
        name, (model_type, fields) = arch, RAW[arch]
    raw = {**fields, "architectures": [arch], "model_type": model_type}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(raw, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _plain(value: Any) -> Any:
    """A sub-config ``to_dict`` leaves as a dataclass (vLLM's MossAudioEncoderConfig): its fields."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _class_at(dotted: str) -> Any:
    import importlib

    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def write(arch: str) -> Path:
    if arch in RAW or arch in VARIANTS:
        return _write_raw(arch)
    model_type, overrides = SPECS[arch] if arch in SPECS else _default_spec(arch)
    overrides = dict(overrides)
    name, arch = arch, overrides.pop("_arch", arch)  # a second config of one architecture
    written = overrides.pop("_written", {})  # as a checkpoint writes them, not to_dict
    drop = overrides.pop("_drop", [])
    if "_from" in overrides:  # a collected real config (tests/fixtures/hf_configs/)
        raw = json.loads((OUT.parent / overrides.pop("_from")).read_text(encoding="utf-8"))
        raw.update(overrides)
    elif overrides.pop("_raw", False):  # the config.json as written (the class reads it)
        raw = json.loads(json.dumps(overrides))
    elif "_defaults_of" in overrides:  # vLLM's class has no defaults: another class's
        raw = deep_merge(_class_at(overrides.pop("_defaults_of"))().to_dict(), overrides)
    else:
        raw = _config_class(model_type)(**overrides).to_dict()
    for key, value in overrides.items():  # a sub-config to_dict renames (Ultravox)
        raw.setdefault(key, value)
    raw.pop("wrapped_model_config", None)
    for section, fields in written.items():  # {"": top-level fields, "text_config": ...}
        (raw[section] if section else raw).update(fields)
    for key in drop:  # what to_dict writes beside the key the class reads (DeepSeek-VL2)
        raw.pop(key, None)
    raw["architectures"] = [arch]
    raw.setdefault("model_type", model_type)
    raw.pop("transformers_version", None)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(raw, indent=1, sort_keys=True, default=_plain) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = (argv if argv is not None else sys.argv[1:]) or sorted({*SPECS, *DEFAULTS, *RAW, *VARIANTS})
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
