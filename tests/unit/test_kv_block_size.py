"""Block-size negotiation: 8.1 (manager block size, hybrid alignment) and 8.3
(select_common_block_size), with vLLM's exact ValueError texts."""

from __future__ import annotations

import pytest

from selector.kv import (
    EngineStartupError,
    align_hybrid_block_size,
    preferred_block_size,
    select_common_block_size,
)
from selector.kv.block_size import check_aligned_block_size, largest_kernel_block_within
from tests.unit.kv_stubs import (
    CUTLASS_MLA,
    DEEPSEEK_V32_INDEXER,
    FLASH_ATTN,
    FLASHINFER_SM90,
    FLASHMLA,
    FLASHMLA_SPARSE_SM90,
    TURBOQUANT,
)


@pytest.mark.parametrize(
    ("manager", "backends", "kernel"),
    [
        (16, [FLASH_ATTN], 16),
        (544, [FLASH_ATTN], 544),  # MultipleOf(16) takes the manager size as is
        (128, [FLASHMLA], 64),  # exact [64]: 128 is split into two kernel blocks
        (544, [FLASHINFER_SM90], 32),  # 544 = 17 x 32; 64 does not divide 544
        (80, [FLASHINFER_SM90], 16),  # 80 = 5 x 16
        (64, [FLASH_ATTN, FLASHMLA], 64),
        (64, [DEEPSEEK_V32_INDEXER, FLASHMLA_SPARSE_SM90], 64),
        (256, [TURBOQUANT, FLASHINFER_SM90], 64),
    ],
)
def test_select_common_block_size(manager: int, backends: list, kernel: int) -> None:  # type: ignore[type-arg]
    assert select_common_block_size(manager, backends) == kernel
    assert manager % kernel == 0


def test_select_common_block_size_error_text() -> None:
    with pytest.raises(EngineStartupError) as info:
        select_common_block_size(24, [FLASHMLA])
    assert info.value.message == "No common block size for 24 (FLASHMLA: [64])."
    assert info.value.exc_type == "ValueError"
    with pytest.raises(EngineStartupError) as info:
        select_common_block_size(128, [FLASHINFER_SM90, CUTLASS_MLA])
    assert info.value.message == (
        "No common block size for 128 (FLASHINFER: [16, 32, 64]; CUTLASS_MLA: [128])."
    )
    with pytest.raises(EngineStartupError) as info:
        select_common_block_size(40, [FLASH_ATTN])
    assert info.value.message == "No common block size for 40 (FLASH_ATTN: [MultipleOf(16)])."


@pytest.mark.parametrize(
    ("backends", "size"),
    [
        ([FLASH_ATTN], 16),
        ([FLASHMLA], 64),  # one backend: its smallest declared size when 16 is rejected
        ([CUTLASS_MLA], 128),
        ([FLASH_ATTN, FLASHINFER_SM90], 16),  # everyone takes the default
        ([FLASH_ATTN, FLASHMLA], 64),  # lcm(16, 64)
        ([DEEPSEEK_V32_INDEXER, FLASHMLA_SPARSE_SM90], 64),
        ([FLASHINFER_SM90, CUTLASS_MLA], 128),  # lcm(16, 128) is the first accepted candidate
    ],
)
def test_preferred_block_size(backends: list, size: int) -> None:  # type: ignore[type-arg]
    assert preferred_block_size(backends) == size


def test_check_aligned_block_size_error_text() -> None:
    check_aligned_block_size([FLASHMLA], 128, 64)  # 128 is a multiple of 64: fine
    check_aligned_block_size([FLASHMLA], 16, 16)  # unchanged sizes are not re-checked
    with pytest.raises(EngineStartupError) as info:
        check_aligned_block_size([FLASH_ATTN, FLASHMLA], 80, 64)
    assert info.value.message == (
        "Aligned KV cache block size 80 is not supported by attention backend(s): FLASHMLA."
    )


def test_largest_kernel_block_within() -> None:
    per_token = 2048
    assert largest_kernel_block_within(FLASH_ATTN, per_token, per_token * 16, 16) == 16
    assert largest_kernel_block_within(FLASH_ATTN, per_token, per_token * 100, 100) == 96
    assert largest_kernel_block_within(FLASHINFER_SM90, per_token, per_token * 64, 64) == 64
    assert largest_kernel_block_within(FLASHINFER_SM90, per_token, per_token * 8, 8) == 16


def test_hybrid_alignment_qwen3_next() -> None:
    # GDN page 1_097_728 B; attention 2 KV heads x (256 + 256) x 2 B = 2048 B/token
    result = align_hybrid_block_size(
        block_size=16,
        first_backend=FLASH_ATTN,
        backends=[FLASH_ATTN],
        attention_bytes_per_token=2048,
        mamba_page_bytes=1097728,
        use_mla=False,
        mamba_cache_mode="align",
    )
    # 16 * ceil(1_097_728 / (16 * 2048)) = 16 * 34
    assert result.block_size == 544
    assert result.mamba_page_size_padded == 544 * 2048 == 1114112
    assert result.messages == (
        "Setting attention block size to 544 tokens to ensure that attention page size is "
        ">= mamba page size.",
        "Padding mamba page size by 1.49% to ensure that mamba page size and attention page "
        "size are exactly equal.",
    )


def test_hybrid_alignment_user_block_checkpoint_and_mla() -> None:
    common = {
        "first_backend": FLASHINFER_SM90,
        "backends": [FLASHINFER_SM90],
        "attention_bytes_per_token": 2048,
        "mamba_page_bytes": 1097728,
    }
    # a user block of 64 becomes the alignment unit: 64 * ceil(1_097_728 / 131_072) = 576
    assert (
        align_hybrid_block_size(
            block_size=64,
            use_mla=False,
            mamba_cache_mode="none",
            **common,  # type: ignore[arg-type]
        ).block_size
        == 576
    )
    # FlashInfer GDN prefill checkpoints every 64 tokens in align mode: lcm(16, 64) = 64
    assert (
        align_hybrid_block_size(
            block_size=16,
            use_mla=False,
            mamba_cache_mode="align",
            prefill_checkpoint_alignment=64,
            **common,  # type: ignore[arg-type]
        ).block_size
        == 576
    )
    # MLA hybrids align to at least 128 tokens
    assert (
        align_hybrid_block_size(
            block_size=16,
            use_mla=True,
            mamba_cache_mode="none",
            **common,  # type: ignore[arg-type]
        ).block_size
        == 640
    )


def test_hybrid_alignment_keeps_a_large_enough_user_block() -> None:
    result = align_hybrid_block_size(
        block_size=1024,
        first_backend=FLASH_ATTN,
        backends=[FLASH_ATTN],
        attention_bytes_per_token=4096,
        mamba_page_bytes=311296,
        use_mla=False,
        mamba_cache_mode="none",
    )
    assert result.block_size == 1024 and len(result.messages) == 1  # padding only
