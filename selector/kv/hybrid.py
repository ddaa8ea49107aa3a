"""Attention + Mamba block-size alignment (reference 8.1 step 2,
``Platform._align_hybrid_block_size``), with the steps the release takes
(``hybrid_alignment`` of the engine profile)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from selector.kv.backend_facts import BackendKVFacts, rule_base

__all__ = ["HybridAlignment", "align_hybrid_block_size"]


class HybridAlignment(BaseModel):
    """The outcome: the new block size and the padded Mamba page."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    block_size: int
    attention_page_bytes: int
    mamba_page_bytes: int
    mamba_page_size_padded: int | None
    padding_percent: float
    mamba_block_size: int | None = None
    """Mode ``all``: the Mamba block the alignment sets (``cache_config.mamba_block_size``)."""
    messages: tuple[str, ...]


def _smallest(backend: BackendKVFacts) -> int:
    return min((rule_base(rule) for rule in backend.kernel_block_sizes), default=1)


def align_hybrid_block_size(
    *,
    block_size: int,
    first_backend: BackendKVFacts,
    backends: Sequence[BackendKVFacts],
    attention_bytes_per_token: int,
    mamba_page_bytes: int,
    use_mla: bool,
    mamba_cache_mode: str,
    prefill_checkpoint_alignment: int | None = None,
    mla_min_block_size: int | None = 128,
    lcm_non_ssm_backends: bool = True,
    mamba_chunk_size: int = 2048,
) -> HybridAlignment:
    """The smallest kernel-aligned block whose attention page covers the largest
    Mamba page; the Mamba page is then padded up to the attention page.

    The alignment is max(the first backend's smallest kernel block, the block size),
    at least ``mla_min_block_size`` for MLA (0.27.0+), LCM'd with the prefill
    checkpoint alignment in align mode (0.33.0+); the block is then rounded up to a
    multiple of every non-SSM backend's smallest kernel block (0.32.0+). In mode
    ``all`` (0.25.1-0.31.0) the block is instead a multiple of lcm(Mamba chunk size,
    alignment) covering the state's tokens, and it is the Mamba block too."""
    if mamba_page_bytes == 0:
        return HybridAlignment(
            block_size=block_size,
            attention_page_bytes=block_size * attention_bytes_per_token,
            mamba_page_bytes=0,
            mamba_page_size_padded=None,
            padding_percent=0.0,
            messages=(),
        )
    alignment = max(_smallest(first_backend), block_size)
    backend_alignment = 1
    if lcm_non_ssm_backends:
        backend_alignment = math.lcm(*(_smallest(b) for b in backends if b.kernel_block_sizes))
    if use_mla and mla_min_block_size is not None:
        alignment = max(alignment, mla_min_block_size)
    if mamba_cache_mode == "align":
        alignment = math.lcm(alignment, prefill_checkpoint_alignment or 1)
    mamba_block: int | None = None
    if mamba_cache_mode == "all":
        # 0.25.1-0.31.0: align to the Mamba chunk size (lcm with the kernel alignment)
        chunk = math.lcm(mamba_chunk_size, alignment)
        state_tokens = -(-mamba_page_bytes // attention_bytes_per_token)
        aligned = chunk * -(-state_tokens // chunk)
        mamba_block = aligned
    else:
        aligned = alignment * -(-mamba_page_bytes // (alignment * attention_bytes_per_token))
        aligned = backend_alignment * -(-aligned // backend_alignment)
    messages: list[str] = []
    if block_size < aligned:
        block_size = aligned
        messages.append(
            f"Setting attention block size to {aligned} tokens to ensure that attention "
            "page size is >= mamba page size."
        )
    attention_page = block_size * attention_bytes_per_token
    padded: int | None = None
    percent = 0.0
    if attention_page != mamba_page_bytes:
        padded = attention_page
        percent = 100 * (attention_page - mamba_page_bytes) / mamba_page_bytes
        messages.append(
            f"Padding mamba page size by {percent:.2f}% to ensure that mamba page size and "
            "attention page size are exactly equal."
        )
    return HybridAlignment(
        block_size=block_size,
        attention_page_bytes=attention_page,
        mamba_page_bytes=mamba_page_bytes,
        mamba_page_size_padded=padded,
        padding_percent=percent,
        mamba_block_size=mamba_block,
        messages=tuple(messages),
    )
