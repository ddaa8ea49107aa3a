"""KV-cache grouping (reference 8.2 steps 3, 4, 7, 8), by hand."""

from __future__ import annotations

import pytest

from selector.kv import EngineStartupError, group_layers, unify_page_sizes
from selector.kv.specs import (
    AnySpec,
    FullAttentionSpec,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    SlidingWindowSpec,
)


def full(block: int = 16, heads: int = 8, head: int = 128, nbytes: int = 2) -> FullAttentionSpec:
    return FullAttentionSpec(
        block_size=block,
        num_kv_heads=heads,
        head_size=head,
        head_size_v=head,
        kv_cache_dtype="bfloat16" if nbytes == 2 else "fp8",
        dtype_bytes=nbytes,
    )


def sw(window: int = 128, block: int = 16, heads: int = 8, head: int = 128) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=block,
        num_kv_heads=heads,
        head_size=head,
        head_size_v=head,
        kv_cache_dtype="bfloat16",
        dtype_bytes=2,
        sliding_window=window,
    )


def mla(block: int = 64, head: int = 576, role: str = "sparse") -> MLAAttentionSpec:
    return MLAAttentionSpec(
        block_size=block,
        num_kv_heads=1,
        head_size=head,
        head_size_v=0,
        kv_cache_dtype="bfloat16",
        dtype_bytes=2,
        cache_role=role,  # type: ignore[arg-type]
    )


def mamba(page: int = 1000) -> MambaSpec:
    return MambaSpec(
        block_size=16, shapes=((page,),), dtype_bytes=(1,), dtypes=("int8",), mamba_type="mamba1"
    )


def named(specs: list[AnySpec]) -> dict[str, AnySpec]:
    return {f"layers.{i}": s for i, s in enumerate(specs)}


def test_uniform_model_is_one_group() -> None:
    result = group_layers(named([full()] * 4))
    assert result.path == "uniform_spec" and len(result.groups) == 1
    assert result.groups[0].merged_spec == full()


def test_same_type_different_heads_is_one_uniform_type_group() -> None:
    result = group_layers(named([full(heads=8), full(heads=4), full(heads=8)]))
    assert result.path == "uniform_type" and len(result.groups) == 1
    assert result.groups[0].merged_spec is None  # per-layer specs kept


def test_mla_and_indexer_share_one_uniform_type_group() -> None:
    indexer = mla(head=132, role="indexer")
    result = group_layers(named([indexer, mla(), indexer, mla()]))
    assert result.path == "uniform_type"
    assert {s.page_size_bytes for s in result.groups[0].layer_specs} == {132 * 2 * 64, 1152 * 64}


def test_gpt_oss_eagle_12_sw_13_full_pads_to_13() -> None:
    # max (13) < 1.5 * min (12): the group size is 13 and SW gets one padding layer
    specs = named([sw()] * 12 + [full()] * 13)
    result = group_layers(specs)
    assert result.path == "uniform_page_size"
    assert [len(g.layer_names) for g in result.groups] == [12, 13]
    assert result.warnings == ("Add 1 padding layers, may waste at most 8.33% KV cache memory",)


def test_round_robin_split() -> None:
    # 2 full + 3 SW -> (full.0, full.1), (sw.0, sw.2), (sw.1, padding)  (vLLM's docstring)
    specs = {"f0": full(), "s0": sw(), "s1": sw(), "f1": full(), "s2": sw()}
    result = group_layers(specs)
    assert [g.layer_names for g in result.groups] == [("f0", "f1"), ("s0", "s2"), ("s1",)]
    assert result.warnings == ("Add 1 padding layers, may waste at most 33.33% KV cache memory",)


def test_different_windows_are_different_groups() -> None:
    result = group_layers(named([sw(window=512), sw(window=1024)] * 2))
    assert [g.merged_spec.sliding_window for g in result.groups] == [512, 1024]  # type: ignore[union-attr]


def test_unify_scales_the_smaller_block() -> None:
    unified = unify_page_sizes({"a": full(heads=8), "b": sw(heads=4)})
    assert unified["b"].block_size == 32 and unified["b"].page_size_bytes == 65536


def test_unify_pads_mamba_and_non_dividing_attention() -> None:
    unified = unify_page_sizes({"a": full(), "m": mamba(page=50000)})
    assert unified["m"].page_size_bytes == 65536
    unified = unify_page_sizes({"a": full(heads=8), "b": full(heads=3, block=16)})
    # 3 x 16 x 512 = 24576 does not divide 65536: padded page
    assert unified["b"].page_size_padded == 65536 and unified["b"].block_size == 16


def test_unify_cannot_pad_mla() -> None:
    with pytest.raises(EngineStartupError) as info:
        unify_page_sizes({"big": full(heads=8), "layers.1": mla(block=16)})
    assert info.value.exc_type == "NotImplementedError"
    assert info.value.message == (
        "Layer layers.1: page size is not divisible by the maximum page size and cannot be "
        "padded. Padding is only supported for non-MLA attention layers."
    )


def test_mla_plus_sliding_window_falls_back_to_full_allocation() -> None:
    # MLA page 1152 x 64 = 73728; SW page 8 x 16 x 512 = 65536 does not divide it;
    # the MLA page is smaller than the max, so unify raises and the fallback applies
    specs = {"m0": mla(block=16), "s0": sw(heads=8), "m1": mla(block=16)}
    result = group_layers(specs)
    assert result.path == "full_allocation_fallback"
    assert result.warnings[0].startswith("KV cache page sizes cannot be unified")


def test_grouping_is_deterministic() -> None:
    specs = named([sw(), full(), sw(), sw(), full(), sw()])
    assert group_layers(specs) == group_layers(dict(specs))


def rswa(window: int = 128, heads: int = 32, head: int = 128) -> RSWASpec:
    return RSWASpec(block_size=16, num_kv_heads=heads, head_size=head, head_size_v=head,
                    kv_cache_dtype="bfloat16", dtype_bytes=2, rswa_window=window)


# R-SWA (vllm/v1/kv_cache_interface.py:815-857, single_type_kv_cache_manager.py:2711-2713 in
# 0.33.0): the expected values are vLLM 0.33.0's own (RSWASpec.page_size_bytes,
# is_kv_cache_spec_uniform, merge and UniformTypeKVCacheSpecs.is_uniform_type run in its
# oracle venv on these specs: 262144; [r, r] uniform, merged an RSWASpec; [r, f] not uniform,
# one type; [f, r] uniform, merged a FullAttentionSpec; windows 128 and 64 not uniform, one
# type; R-SWA beside sliding-window not one type)


def test_rswa_page_is_the_full_attention_page() -> None:
    assert rswa().page_size_bytes == full(heads=32).page_size_bytes == 262144


def test_rswa_layers_of_one_window_are_one_rswa_group() -> None:
    result = group_layers(named([rswa()] * 4))
    assert result.path == "uniform_spec"
    assert isinstance(result.groups[0].merged_spec, RSWASpec)


def test_rswa_first_beside_full_is_one_uniform_type_group() -> None:
    result = group_layers(named([rswa(), full(heads=32)]))
    assert result.path == "uniform_type" and len(result.groups) == 1


def test_full_first_merges_rswa_as_full_attention() -> None:
    result = group_layers(named([full(heads=32), rswa()]))
    assert result.path == "uniform_spec"
    assert type(result.groups[0].merged_spec) is FullAttentionSpec


def test_rswa_windows_differ_is_one_uniform_type_group() -> None:
    result = group_layers(named([rswa(128), rswa(64)]))
    assert result.path == "uniform_type" and len(result.groups) == 1


def test_rswa_beside_sliding_window_is_not_one_type() -> None:
    from selector.kv.merge import is_uniform_type

    assert not is_uniform_type([rswa(), sw(window=64, heads=32)])
