"""Hypothesis strategies for request facts (vLLM 0.33.0 vocabulary)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from selector.schema.types import KV_CACHE_DTYPES

CAPABILITIES = [70, 75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121]
HEAD_SIZES = [32, 40, 64, 72, 80, 96, 100, 112, 128, 160, 192, 256, 320, 512, 576]
FLAGS = [
    "use_mla", "has_sink", "use_sparse", "use_mm_prefix", "use_per_head_quant_scales",
    "has_sliding_window", "use_non_causal", "use_batch_invariant", "use_kv_connector",
    "use_pcp", "use_dcp", "use_adaptive_verification", "use_rswa",
]


@st.composite
def facts(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {
        "cc": draw(st.sampled_from(CAPABILITIES)),
        "head_size": draw(st.sampled_from(HEAD_SIZES) | st.integers(1, 1024)),
        "dtype": draw(st.sampled_from(["bfloat16", "float16", "float32"])),
        "kv_cache_dtype": draw(st.sampled_from([*KV_CACHE_DTYPES, None])),
        "block_size": draw(st.none() | st.sampled_from([1, 8, 16, 32, 64, 128, 256, 1024]) | st.integers(1, 2048)),
        "attn_type": draw(st.sampled_from(["decoder", "encoder", "encoder_only", "encoder_decoder"])),
        "num_heads": draw(st.none() | st.sampled_from([8, 16, 32, 64, 128])),
        "dcp_size": draw(st.sampled_from([1, 2, 4])),
        "pcp_size": draw(st.sampled_from([1, 2])),
        "num_speculative_tokens": draw(st.sampled_from([0, 1, 3])),
        "flash_attn_version": draw(st.sampled_from([None, None, 2, 3, 4])),
        "use_trtllm_attention": draw(st.sampled_from([None, None, True, False])),
    }
    for flag in FLAGS:
        out[flag] = draw(st.booleans())
    if draw(st.booleans()):
        q = draw(st.sampled_from([8, 16, 32, 64, 128]))
        out.update({
            "model_present": True, "model_num_q_heads": q,
            "model_num_kv_heads": draw(st.sampled_from([d for d in (1, 2, 4, 8, q) if q % d == 0])),
            "kv_lora_rank": draw(st.sampled_from([None, 448, 512])),
            "qk_rope_head_dim": draw(st.sampled_from([None, 0, 64])),
            "qk_nope_head_dim": draw(st.sampled_from([None, 64, 128, 192, 256])),
            "v_head_dim": draw(st.sampled_from([None, 128])),
            "index_topk": draw(st.sampled_from([None, 2048, 1000])),
        })
    return out
