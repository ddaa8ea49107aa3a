"""Per-layer KV-cache specs and page sizes, numbers worked by hand from
reference 2.2 / 7 (K and V packed; MLA one latent; Mamba from state shapes)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from selector.errors import InputError
from selector.kv.layer_specs import SpecContext, build_spec, customize, indexer_spec, mamba_spec
from selector.kv.specs import FullAttentionSpec, KVCacheSpec, MambaSpec
from selector.models import load_model, shard_model
from tests.unit.kv_stubs import DEEPSEEK_V32_INDEXER, FLASH_ATTN, FLASHINFER_SM90, FLASHMLA


def _ctx(**kw: object) -> SpecContext:
    base: dict[str, object] = {"model_dtype": "bfloat16", "block_size": 16, "mamba_block_size": 16}
    base.update(kw)
    return SpecContext(**base)  # type: ignore[arg-type]


def test_dense_page_k_and_v_packed() -> None:
    layer = load_model("llama-3.1-8b").layers[0]
    spec = build_spec(layer, FLASH_ATTN, _ctx())
    # 8 KV heads x 16 tokens x (128 + 128) x 2 bytes
    assert spec.page_size_bytes == 8 * 16 * 256 * 2 == 65536
    assert spec.kind == "full_attention"
    fp8 = build_spec(layer, FLASH_ATTN, _ctx(kv_cache_dtype="fp8"))
    assert fp8.page_size_bytes == 32768


def test_tp_shards_the_page() -> None:
    layer = shard_model(load_model("llama-3.1-8b"), 2).layers[0]
    assert build_spec(layer, FLASH_ATTN, _ctx(kv_cache_dtype="fp8_e4m3")).page_size_bytes == (
        4 * 16 * 256 * 1
    )


@pytest.mark.parametrize(
    ("kv_cache_dtype", "per_token"),
    [("auto", 576 * 2), ("fp8", 576), ("fp8_ds_mla", 656), ("nvfp4_ds_mla", 352)],
)
def test_mla_page(kv_cache_dtype: str, per_token: int) -> None:
    layer = load_model("deepseek-v3").layers[0]
    spec = build_spec(layer, FLASHMLA, _ctx(kv_cache_dtype=kv_cache_dtype, block_size=64))
    assert spec.kind == "mla_attention"
    assert spec.page_size_bytes == per_token * 64


def test_sparse_mla_backend_canonicalises_the_kv_dtype() -> None:
    layer = load_model("deepseek-v3.2").layers[0]
    sparse = FLASHMLA.model_copy(update={"canonical_kv_cache_dtype": "fp8_ds_mla"})
    spec = build_spec(layer, sparse, _ctx(kv_cache_dtype="fp8", block_size=64))
    assert spec.page_size_bytes == 656 * 64


def test_indexer_cache_rows() -> None:
    layer = load_model("deepseek-v3.2").layers[0]
    spec = customize(indexer_spec(layer, _ctx(block_size=64)), DEEPSEEK_V32_INDEXER)
    # fp8 values (128) + one fp32 scale per 128 values (4 bytes), one head, no V
    assert spec.page_size_bytes == (128 + 4) * 64 == 8448
    assert spec.cache_role == "indexer"
    assert spec.block_stride_alignment == 64  # only exact kernel sizes: MultipleOf(64)


def test_jamba_mamba_state_page() -> None:
    layer = load_model("jamba-v0.1").layers[0]
    spec = mamba_spec(layer, _ctx())
    # conv (d_conv-1, expand*hidden) + ssm (expand*hidden, d_state), bf16
    assert spec.shapes == ((3, 8192), (8192, 16))
    assert spec.page_size_bytes == (3 * 8192 + 8192 * 16) * 2 == 311296
    tp2 = mamba_spec(shard_model(load_model("jamba-v0.1"), 2).layers[0], _ctx(tp_size=2))
    assert tp2.page_size_bytes == 311296 // 2


def test_gdn_state_page_with_spec_decode_and_fp32_ssm() -> None:
    layer = load_model("qwen3-next-80b-a3b").layers[0]
    spec = mamba_spec(layer, _ctx())
    # conv (3, 16*128*2 + 32*128) + recurrent (32, 128, 128)
    assert spec.shapes == ((3, 8192), (32, 128, 128))
    assert spec.page_size_bytes == (3 * 8192 + 32 * 128 * 128) * 2 == 1097728
    spec2 = mamba_spec(layer, _ctx(num_speculative_tokens=2, mamba_ssm_cache_dtype="float32"))
    assert spec2.shapes[0] == (5, 8192)
    assert spec2.page_size_bytes == 5 * 8192 * 2 + 32 * 128 * 128 * 4
    assert spec2.num_speculative_blocks == 2


def test_flashinfer_nvfp4_repacks_k_and_v_slots() -> None:
    layer = load_model("llama-3.1-8b").layers[0]
    spec = build_spec(layer, FLASHINFER_SM90, _ctx(kv_cache_dtype="nvfp4"))
    assert isinstance(spec, FullAttentionSpec)
    # 2 x 8 head slots of (128/2 fp4 bytes + 128/16 fp8 scales)
    assert (spec.num_heads, spec.content_bytes) == (16, 72)
    assert spec.page_size_bytes == 16 * 16 * 72


def test_exact_kernel_sizes_set_block_stride_alignment() -> None:
    layer = load_model("llama-3.1-8b").layers[0]
    assert build_spec(layer, FLASHINFER_SM90, _ctx()).block_stride_alignment == 64  # type: ignore[union-attr]
    assert build_spec(layer, FLASH_ATTN, _ctx()).block_stride_alignment is None  # type: ignore[union-attr]


def test_sliding_window_picks_its_own_block() -> None:
    layer = load_model("gpt-oss-20b").layers[0]
    assert build_spec(layer, FLASH_ATTN, _ctx(block_size=64)).block_size == 64
    # FlashInfer [16, 32, 64]: the largest kernel block whose page fits 128 tokens' budget
    assert build_spec(layer, FLASHINFER_SM90, _ctx(block_size=128)).block_size == 64


def test_unmodelled_kv_dtype_is_an_input_error() -> None:
    layer = load_model("llama-3.1-8b").layers[0]
    with pytest.raises(InputError, match="not modelled"):
        build_spec(layer, FLASH_ATTN, _ctx(kv_cache_dtype="turboquant_k8v4"))
    with pytest.raises(InputError, match="unknown kv_cache_dtype"):
        build_spec(layer, FLASH_ATTN, _ctx(kv_cache_dtype="fp7"))


def test_specs_round_trip_as_a_discriminated_union() -> None:
    adapter: TypeAdapter[KVCacheSpec] = TypeAdapter(KVCacheSpec)
    layer = load_model("jamba-v0.1").layers[0]
    spec = mamba_spec(layer, _ctx())
    again = adapter.validate_python(spec.model_dump())
    assert isinstance(again, MambaSpec) and again == spec
    with pytest.raises(ValidationError):
        spec.block_size = 5  # type: ignore[misc]


def test_unlimited_ocr_layers_are_rswa_specs_of_the_full_page() -> None:
    """vLLM 0.33.0's answer (tests/golden/vllm_models/vllm-0.33.0-nbproc.jsonl.gz): every
    layer an RSWAAttention whose RSWASpec has a 262144-byte page at block 16 (32 KV heads x
    16 x (128 + 128) x 2 bytes), the window UnlimitedOCRConfig's 128."""
    from pathlib import Path

    from selector.kv.specs import RSWASpec

    config = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "synthetic"
    model = load_model(config / "UnlimitedOCRForCausalLM.json")
    assert model.rswa_window == 128
    for layer in model.layers:
        spec = build_spec(layer, FLASH_ATTN, _ctx())
        assert isinstance(spec, RSWASpec)
        assert (spec.rswa_window, spec.page_size_bytes) == (128, 262144)
