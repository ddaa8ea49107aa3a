"""Attention metadata for one batch, built the way vLLM's runner and builders build it.

Three layers, each a frozen dataclass of plain Python lists:

* :class:`CommonMetadata` -- what the runner hands every backend (``query_start_loc``,
  ``seq_lens``, the padded 2-D ``block_table``, ``slot_mapping``, ...);
* :class:`FlashAttentionMetadata` -- one varlen paged call for the whole batch;
* :class:`FlashInferMetadata` -- the batch reordered decode-first, then split into a
  decode plan and a prefill plan over a CSR page table.

Pure Python: no torch, no numpy, so ``attn-select metadata`` runs anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from selector.smoke.batch import (
    BatchRequest,
    BatchSpec,
    load_batch_file,
    pages_needed,
    parse_batch,
)

__all__ = [
    "BLOCK_TABLE_PAD",
    "PAD_SLOT_ID",
    "BatchRequest",
    "BatchSpec",
    "CommonMetadata",
    "FlashAttentionMetadata",
    "FlashInferMetadata",
    "build_common_metadata",
    "build_flash_attn_metadata",
    "build_flashinfer_metadata",
    "decode_first_permutation",
    "last_page_len",
    "load_batch_file",
    "pages_needed",
    "parse_batch",
]

BLOCK_TABLE_PAD = 0
"""Value of unused block-table entries (vLLM's reserved null block is page 0)."""

PAD_SLOT_ID = -1
"""Value of ``slot_mapping`` entries for padding tokens (vLLM's ``PAD_SLOT_ID``)."""


def last_page_len(seq_len: int, block_size: int) -> int:
    """Valid tokens in the last page, 1..block_size: a remainder of 0 means a full page."""
    return (seq_len - 1) % block_size + 1


@dataclass(frozen=True)
class CommonMetadata:
    """The runner's backend-independent facts about the batch (vLLM's common metadata)."""

    block_size: int
    request_ids: list[str]
    query_start_loc: list[int]
    seq_lens: list[int]
    context_lens: list[int]
    max_query_len: int
    max_seq_len: int
    num_actual_tokens: int
    block_table: list[list[int]]
    """One row per request: its pages in logical order, padded with ``BLOCK_TABLE_PAD``."""
    slot_mapping: list[int]
    """Per token: ``page * block_size + offset``; ``PAD_SLOT_ID`` for padding tokens."""

    @property
    def num_reqs(self) -> int:
        return len(self.request_ids)

    @property
    def query_lens(self) -> list[int]:
        starts = self.query_start_loc
        return [starts[i + 1] - starts[i] for i in range(self.num_reqs)]

    def to_json(self) -> dict[str, Any]:
        return {
            "block_size": self.block_size,
            "request_ids": self.request_ids,
            "num_reqs": self.num_reqs,
            "query_start_loc": self.query_start_loc,
            "seq_lens": self.seq_lens,
            "max_query_len": self.max_query_len,
            "max_seq_len": self.max_seq_len,
            "num_actual_tokens": self.num_actual_tokens,
            "block_table": self.block_table,
            "block_table_pad": BLOCK_TABLE_PAD,
            "slot_mapping": self.slot_mapping,
        }


def build_common_metadata(batch: BatchSpec, *, pad_tokens_to: int | None = None) -> CommonMetadata:
    """Build the common metadata; ``pad_tokens_to`` pads ``slot_mapping`` (CUDA-graph shapes)."""
    block_size = batch.block_size
    query_start_loc = [0]
    slot_mapping: list[int] = []
    for request in batch.requests:
        query_start_loc.append(query_start_loc[-1] + request.query_len)
        for position in range(request.context_len, request.seq_len):
            page = request.block_ids[position // block_size]
            slot_mapping.append(page * block_size + position % block_size)
    num_actual_tokens = query_start_loc[-1]
    if pad_tokens_to is not None:
        if pad_tokens_to < num_actual_tokens:
            raise ValueError(f"pad_tokens_to={pad_tokens_to} < {num_actual_tokens} real tokens")
        slot_mapping.extend([PAD_SLOT_ID] * (pad_tokens_to - num_actual_tokens))
    width = max(len(request.block_ids) for request in batch.requests)
    block_table = [
        request.block_ids + [BLOCK_TABLE_PAD] * (width - len(request.block_ids))
        for request in batch.requests
    ]
    return CommonMetadata(
        block_size=block_size,
        request_ids=[request.id for request in batch.requests],
        query_start_loc=query_start_loc,
        seq_lens=[request.seq_len for request in batch.requests],
        context_lens=[request.context_len for request in batch.requests],
        max_query_len=max(request.query_len for request in batch.requests),
        max_seq_len=max(request.seq_len for request in batch.requests),
        num_actual_tokens=num_actual_tokens,
        block_table=block_table,
        slot_mapping=slot_mapping,
    )


@dataclass(frozen=True)
class FlashAttentionMetadata:
    """FlashAttention's view: the common facts renamed for one varlen paged call."""

    common: CommonMetadata
    cu_seqlens_q: list[int]
    seqused_k: list[int]
    block_table: list[list[int]]
    max_q: int
    max_k: int

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": "FLASH_ATTN",
            **self.common.to_json(),
            "cu_seqlens_q": self.cu_seqlens_q,
            "seqused_k": self.seqused_k,
            "max_q": self.max_q,
            "max_k": self.max_k,
        }


def build_flash_attn_metadata(batch: BatchSpec) -> FlashAttentionMetadata:
    """FlashAttention metadata (the non-cascade path): one call covers every request."""
    common = build_common_metadata(batch)
    return FlashAttentionMetadata(
        common=common,
        cu_seqlens_q=list(common.query_start_loc),
        seqused_k=list(common.seq_lens),
        block_table=[list(row) for row in common.block_table],
        max_q=common.max_query_len,
        max_k=common.max_seq_len,
    )


def decode_first_permutation(batch: BatchSpec, reorder_batch_threshold: int) -> list[int]:
    """Stable decode-first order: requests with ``query_len <= threshold`` go to the front.

    Returns ``permutation`` with ``permutation[new_position] = original_position``.
    """
    decodes = [i for i, r in enumerate(batch.requests) if r.query_len <= reorder_batch_threshold]
    prefills = [i for i, r in enumerate(batch.requests) if r.query_len > reorder_batch_threshold]
    return decodes + prefills


@dataclass(frozen=True)
class FlashInferMetadata:
    """FlashInfer's view: decode-first reordered batch, CSR page table, two plans."""

    reorder_batch_threshold: int
    permutation: list[int]
    """``permutation[i]`` is the original position of the request now at position ``i``."""
    token_permutation: list[int]
    """``token_permutation[t]`` is the original flat row of the query token now at row ``t``."""
    common: CommonMetadata
    """The common metadata of the *reordered* batch (one permutation for every array)."""
    num_decodes: int
    num_decode_tokens: int
    num_prefills: int
    num_prefill_tokens: int
    paged_kv_indptr: list[int]
    paged_kv_indices: list[int]
    paged_kv_last_page_len: list[int]
    qo_indptr: list[int]
    """Prefill query offsets, rebased so the first prefill starts at 0."""
    decode_paged_kv_indptr: list[int] = field(default_factory=list)
    decode_paged_kv_last_page_len: list[int] = field(default_factory=list)
    prefill_paged_kv_indptr: list[int] = field(default_factory=list)
    """Not rebased: it indexes the full ``paged_kv_indices`` array, as vLLM passes it."""
    prefill_paged_kv_last_page_len: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": "FLASHINFER",
            "reorder_batch_threshold": self.reorder_batch_threshold,
            "permutation": self.permutation,
            "token_permutation": self.token_permutation,
            **self.common.to_json(),
            "num_decodes": self.num_decodes,
            "num_decode_tokens": self.num_decode_tokens,
            "num_prefills": self.num_prefills,
            "num_prefill_tokens": self.num_prefill_tokens,
            "paged_kv_indptr": self.paged_kv_indptr,
            "paged_kv_indices": self.paged_kv_indices,
            "paged_kv_last_page_len": self.paged_kv_last_page_len,
            "qo_indptr": self.qo_indptr,
            "decode": {
                "paged_kv_indptr": self.decode_paged_kv_indptr,
                "paged_kv_last_page_len": self.decode_paged_kv_last_page_len,
            },
            "prefill": {
                "qo_indptr": self.qo_indptr,
                "paged_kv_indptr": self.prefill_paged_kv_indptr,
                "paged_kv_last_page_len": self.prefill_paged_kv_last_page_len,
            },
        }


def build_flashinfer_metadata(
    batch: BatchSpec, *, reorder_batch_threshold: int = 1
) -> FlashInferMetadata:
    """FlashInfer metadata: reorder decode-first, build the CSR page table, split the plans."""
    if reorder_batch_threshold < 1:
        raise ValueError(f"reorder_batch_threshold must be >= 1, got {reorder_batch_threshold}")
    permutation = decode_first_permutation(batch, reorder_batch_threshold)
    original_starts = build_common_metadata(batch).query_start_loc
    token_permutation = [
        row
        for index in permutation
        for row in range(original_starts[index], original_starts[index + 1])
    ]
    common = build_common_metadata(batch.permuted(permutation))
    requests = [batch.requests[index] for index in permutation]
    num_decodes = sum(1 for r in requests if r.query_len <= reorder_batch_threshold)
    num_decode_tokens = common.query_start_loc[num_decodes]

    indptr = [0]
    indices: list[int] = []
    last_lens: list[int] = []
    for request in requests:
        num_pages = pages_needed(request.seq_len, batch.block_size)
        indices.extend(request.block_ids[:num_pages])
        indptr.append(indptr[-1] + num_pages)
        last_lens.append(last_page_len(request.seq_len, batch.block_size))

    prefill_starts = common.query_start_loc[num_decodes:]
    return FlashInferMetadata(
        reorder_batch_threshold=reorder_batch_threshold,
        permutation=permutation,
        token_permutation=token_permutation,
        common=common,
        num_decodes=num_decodes,
        num_decode_tokens=num_decode_tokens,
        num_prefills=len(requests) - num_decodes,
        num_prefill_tokens=common.num_actual_tokens - num_decode_tokens,
        paged_kv_indptr=indptr,
        paged_kv_indices=indices,
        paged_kv_last_page_len=last_lens,
        qo_indptr=[start - prefill_starts[0] for start in prefill_starts],
        decode_paged_kv_indptr=indptr[: num_decodes + 1],
        decode_paged_kv_last_page_len=last_lens[:num_decodes],
        prefill_paged_kv_indptr=indptr[num_decodes:],
        prefill_paged_kv_last_page_len=last_lens[num_decodes:],
    )
