"""Rules the oracle cannot reach (DCP/PCP, KV connector, batch invariance, adaptive
verification, R-SWA, environment switches, overrides), checked against the
reference's statements (../shared/reference/vllm-attention-selection.md)."""

from __future__ import annotations

from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.solver import solve

BASE: dict[str, Any] = {
    "cc": 90, "head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None,
    "model_present": True, "model_num_q_heads": 32, "model_num_kv_heads": 8,
}
MLA: dict[str, Any] = {
    **BASE, "head_size": 576, "use_mla": True, "num_heads": 128, "model_num_q_heads": 128,
    "model_num_kv_heads": 1, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128, "v_head_dim": 128,
}


def reasons(facts: dict[str, Any], backend: str, **kw: Any) -> list[str]:
    result = solve(facts, suggest=False, **kw, catalog=load_catalog())
    return [d.message for d in result.verdict(backend).reasons]


def codes(facts: dict[str, Any], backend: str) -> list[str]:
    return [d.code for d in solve(facts, suggest=False, catalog=load_catalog()).verdict(backend).reasons]


@pytest.mark.parametrize(("flag", "backend", "message"), [
    ("use_batch_invariant", "FLASHINFER", "batch invariance not supported"),
    ("use_pcp", "FLASH_ATTN", "PCP not supported"),
    ("use_dcp", "TRITON_ATTN", "DCP not supported"),
    ("use_rswa", "FLASHINFER", "R-SWA not supported"),
    ("use_adaptive_verification", "TRITON_FLASH_ATTN",
     "device-cpu query lens mismatch not supported, this is needed for adaptive verification"),
])
def test_validation_flags_the_oracle_cannot_set(flag: str, backend: str, message: str) -> None:
    assert message in reasons({**BASE, flag: True}, backend)
    assert message not in reasons(BASE, backend)


def test_dcp_is_supported_by_flash_attn_and_flashinfer_only_among_standard() -> None:
    facts = {**BASE, "use_dcp": True, "dcp_size": 2}
    assert "DCP not supported" not in reasons(facts, "FLASH_ATTN")
    assert "DCP not supported" not in reasons(facts, "FLASHINFER")
    for backend in ("TRITON_ATTN", "FLEX_ATTENTION"):
        assert "DCP not supported" in reasons(facts, backend)


def test_kv_connector_is_accepted_by_default() -> None:
    assert "KV connector not supported" not in reasons({**BASE, "use_kv_connector": True}, "FLASH_ATTN")


def test_non_causal_mla_with_dcp_needs_flashinfer_mla() -> None:
    facts = {**MLA, "cc": 100, "use_non_causal": True, "use_dcp": True, "dcp_size": 2}
    assert "non-causal MLA attention with DCP not supported" in reasons(facts, "TRITON_MLA")
    assert "non-causal MLA attention with DCP not supported" not in reasons(facts, "FLASHINFER_MLA")


def test_flashinfer_mla_sparse_rejects_pcp_plus_dcp() -> None:
    facts = {**MLA, "cc": 100, "use_sparse": True, "index_topk": 2048, "pcp_size": 2, "dcp_size": 2,
             "use_pcp": True, "use_dcp": True}
    assert reasons(facts, "FLASHINFER_MLA_SPARSE")[-1].startswith(
        "FLASHINFER_MLA_SPARSE does not support combined PCP+DCP")


def test_flash_attn_mla_sparse_rejects_dcp() -> None:
    facts = {**MLA, "use_sparse": True, "index_topk": 2048, "dcp_size": 2, "use_dcp": True}
    assert "FlashAttention MLA Sparse does not support DCP for now" in reasons(facts, "FLASH_ATTN_MLA_SPARSE")


@pytest.mark.parametrize(("env", "backend", "message"), [
    ("env_tokenspeed_mla", "TOKENSPEED_MLA",
     "tokenspeed_mla package is not installed. Install it with: `uv pip install tokenspeed-mla`"),
    ("env_flashmla_built", "FLASHMLA",
     "vllm._flashmla_C is not available, likely was not compiled due to insufficient nvcc version "
     "or a supported arch was not in the list of target arches to compile for."),
])
def test_missing_packages_are_explicit_environment_inputs(env: str, backend: str, message: str) -> None:
    facts = {**MLA, "cc": 100 if backend == "TOKENSPEED_MLA" else 90, "kv_cache_dtype": "fp8", env: False}
    assert message in reasons(facts, backend)


def test_flash_attn_version_override_and_rules() -> None:
    def fa(facts: dict[str, Any]) -> Any:
        result = solve(facts, suggest=False, catalog=load_catalog())
        return result.derived["fa_version"]

    assert fa(BASE) == 3                                     # Hopper default
    assert fa({**BASE, "cc": 100}) == 4                      # Blackwell default
    assert fa({**BASE, "cc": 80}) == 2                       # Ampere
    assert fa({**BASE, "cc": 120}) == 2                      # SM12x: FA2 only
    assert fa({**BASE, "head_size": 512}) == 4               # FA3 -> FA4 upgrade for head > 256 on SM90
    assert fa({**BASE, "flash_attn_version": 2}) == 2        # override
    assert fa({**BASE, "cc": 100, "flash_attn_version": 3}) == 4  # FA3 on Blackwell -> FA4
    assert fa({**BASE, "layer_alibi": True}) == 2            # ALiBi forces FA2
    assert fa({**BASE, "cc": 100, "use_batch_invariant": True}) == 2
    assert fa({**BASE, "cc": 100, "head_size": 256, "has_sink": True}) == 2   # hd256 kernel fallback
    assert fa({**BASE, "cc": 100, "head_size": 256, "block_size": 64}) == 2  # page not multiple of 128
    assert fa({**BASE, "cc": 100, "head_size": 256}) == 4
    assert fa({**BASE, "cc": 100, "head_size": 192}) == 2    # TMEM limit
    assert fa({**BASE, "cc": 75}) is None                    # nothing supported below 8.0


def test_fa_version_trace_names_the_rule_that_decided() -> None:
    result = solve({**BASE, "cc": 100, "head_size": 256, "has_sink": True}, suggest=False, catalog=load_catalog())
    assert result.selected == "FLASHINFER"
    explicit = solve({**BASE, "cc": 100, "head_size": 256, "has_sink": False},
                     attention_backend="FLASH_ATTN", suggest=False, catalog=load_catalog())
    assert explicit.runtime is not None
    trace = explicit.runtime.fact("fa_version")
    assert trace is not None and trace.value == 4


def test_use_trtllm_attention_false_disables_flashinfer_sinks() -> None:
    facts = {**BASE, "cc": 100, "has_sink": True}
    assert "attention sinks not supported" not in reasons(facts, "FLASHINFER")
    assert "attention sinks not supported" in reasons({**facts, "use_trtllm_attention": False}, "FLASHINFER")


def test_cudagraph_mode_resolution_per_backend_support() -> None:
    fa = solve(BASE, suggest=False, catalog=load_catalog()).runtime
    assert fa is not None and (fa.cudagraph_support, fa.cudagraph_mode) == ("ALWAYS", "FULL_AND_PIECEWISE")
    fi = solve(BASE, attention_backend="FLASHINFER", suggest=False, cudagraph_mode="FULL", catalog=load_catalog()).runtime
    assert fi is not None and fi.cudagraph_support == "UNIFORM_BATCH"
    assert fi.cudagraph_mode == "FULL_AND_PIECEWISE"
    assert fi.cudagraph_messages == (
        "CUDAGraphMode.FULL is not supported with FlashInferBackend backend (support: "
        "AttentionCGSupport.UNIFORM_BATCH); setting cudagraph_mode=FULL_AND_PIECEWISE",)
    cutlass = solve({**MLA, "cc": 100, "kv_cache_dtype": "fp8", "num_speculative_tokens": 2},
                    attention_backend="CUTLASS_MLA", suggest=False, catalog=load_catalog()).runtime
    assert cutlass is not None and cutlass.cudagraph_mode == "PIECEWISE"
    assert "spec-decode" in cutlass.cudagraph_messages[0]


def test_layouts_and_block_sizes_of_the_plan() -> None:
    flashinfer_sm100 = solve({**BASE, "cc": 100}, suggest=False, catalog=load_catalog())
    assert flashinfer_sm100.selected == "FLASHINFER"
    assert flashinfer_sm100.runtime is not None
    assert flashinfer_sm100.runtime.kv_layout == "LBHNC"
    assert flashinfer_sm100.runtime.kernel_block_sizes == ("16", "32", "64", "128", "256", "512", "1024")
    flashmla = solve({**MLA, "kv_cache_dtype": "fp8"}, attention_backend="FLASHMLA", suggest=False, catalog=load_catalog())
    assert flashmla.runtime is not None
    assert (flashmla.runtime.preferred_block_size, flashmla.runtime.block_size) == (64, 64)
    assert flashmla.runtime.reorder_batch_threshold == 128


def test_block_size_precluded_warning() -> None:
    result = solve({**MLA, "cc": 100, "block_size": 16}, suggest=False, catalog=load_catalog())
    assert result.selected == "TRITON_MLA"
    assert [w.code for w in result.warnings] == ["SE003"]
    assert result.warnings[0].message == (
        "--block-size 16 precluded higher-priority backend(s) FLASHINFER_MLA, CUTLASS_MLA. Using TRITON_MLA instead, "
        "which may result in reduced performance. Consider removing --block-size to auto-select the "
        "optimal block size.")


def test_explicit_selection_never_substitutes_and_suggests_rechecked_fixes() -> None:
    result = solve({**BASE, "cc": 89, "has_sink": True}, attention_backend="FLASH_ATTN", catalog=load_catalog())
    assert result.selected is None and result.error is not None
    assert result.error.message == (
        "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. "
        "Reason: ['attention sinks not supported', 'sink not supported on compute capability < 9.0']")
    assert result.suggestions
    for suggestion in result.suggestions:
        changed = dict(result.facts)
        backend = changed.pop("attention_backend", None)
        backend = suggestion.changes.get("attention_backend", "FLASH_ATTN")
        changed.update({k: v for k, v in suggestion.changes.items() if k != "attention_backend"})
        again = solve(changed, attention_backend=backend, suggest=False, catalog=load_catalog())
        assert again.selected == suggestion.selected
