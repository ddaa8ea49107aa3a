"""The nine metadata invariants, checked against the batch they were built from.

Every check compares metadata with the batch description (the truth) and returns
structured :class:`Violation` records; nothing raises and nothing prints. The checks
are independent of the builders in :mod:`selector.smoke.metadata`, so they catch
builder bugs as well as hand-edited or corrupted metadata.

Pure Python: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selector.smoke.batch import BatchSpec, pages_needed
from selector.smoke.metadata import (
    BLOCK_TABLE_PAD,
    PAD_SLOT_ID,
    CommonMetadata,
    FlashAttentionMetadata,
    FlashInferMetadata,
    last_page_len,
)

__all__ = [
    "INVARIANTS",
    "Invariant",
    "LayerBinding",
    "MetadataIdentity",
    "Violation",
    "check_bindings",
    "check_common",
    "check_flash_attn",
    "check_flashinfer",
    "check_graph_addresses",
    "check_length_views",
    "check_metadata",
]


@dataclass(frozen=True)
class Invariant:
    """One invariant: its number (1..9, the seed's order) and a short name."""

    number: int
    name: str
    statement: str


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(1, "layer-metadata-match",
              "every layer name maps to metadata built for its backend and KV-cache spec"),
    Invariant(2, "group-sharing",
              "layers sharing one metadata have the same backend, cache spec and q heads"),
    Invariant(3, "query-start-loc",
              "query_start_loc starts at 0, never decreases, ends at the real token count"),
    Invariant(4, "context-length",
              "seq_len - query_len equals the context cached before the step"),
    Invariant(5, "block-table-ownership",
              "every valid block-table entry is owned by its request, in the cache's page "
              "geometry"),
    Invariant(6, "slot-in-owned-page",
              "every non-padding slot lies in a writable page the request owns"),
    Invariant(7, "one-permutation",
              "a reorder applies one permutation to every per-request and per-token array, "
              "and the decode/prefill split covers every token once"),
    Invariant(8, "graph-address-stability",
              "buffers a CUDA graph replays keep the addresses they had at capture"),
    Invariant(9, "exact-lengths",
              "a backend needing exact lengths gets device truth, not a CPU upper bound"),
)
_BY_NUMBER = {invariant.number: invariant for invariant in INVARIANTS}


@dataclass(frozen=True)
class Violation:
    """A broken invariant, located as precisely as the check can."""

    invariant: int
    message: str
    request_id: str | None = None
    index: int | None = None
    array: str | None = None

    @property
    def name(self) -> str:
        return _BY_NUMBER[self.invariant].name

    def render(self) -> str:
        where = []
        if self.request_id is not None:
            where.append(f"request '{self.request_id}'")
        if self.array is not None:
            where.append(self.array if self.index is None else f"{self.array}[{self.index}]")
        elif self.index is not None:
            where.append(f"index {self.index}")
        location = f" ({', '.join(where)})" if where else ""
        return f"invariant {self.invariant} {self.name}{location}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "name": self.name,
            "request_id": self.request_id,
            "array": self.array,
            "index": self.index,
            "message": self.message,
        }


def _compare(invariant: int, array: str, actual: Sequence[object], expected: Sequence[object],
             request_ids: Sequence[str] | None = None) -> list[Violation]:
    """Element-wise comparison; the first mismatch only, to keep reports short."""
    if len(actual) != len(expected):
        return [Violation(invariant, f"has {len(actual)} entries, expected {len(expected)}",
                          array=array)]
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        if got != want:
            request = request_ids[index] if request_ids and index < len(request_ids) else None
            return [Violation(invariant, f"is {got}, expected {want}", request_id=request,
                              index=index, array=array)]
    return []


def _check_query_start_loc(batch: BatchSpec, common: CommonMetadata) -> list[Violation]:
    starts = common.query_start_loc
    ids = [r.id for r in batch.requests]
    if len(starts) != len(batch.requests) + 1:
        return [Violation(3, f"has {len(starts)} entries for {len(batch.requests)} requests "
                             f"(expected {len(batch.requests) + 1})", array="query_start_loc")]
    found: list[Violation] = []
    if starts[0] != 0:
        found.append(Violation(3, f"starts at {starts[0]}, not 0", index=0,
                               array="query_start_loc"))
    for index in range(1, len(starts)):
        if starts[index] < starts[index - 1]:
            found.append(Violation(3, f"decreases from {starts[index - 1]} to {starts[index]}",
                                   request_id=ids[index - 1], index=index,
                                   array="query_start_loc"))
            break
    if starts[-1] != batch.num_tokens or common.num_actual_tokens != batch.num_tokens:
        found.append(Violation(3, f"ends at {starts[-1]} with num_actual_tokens="
                                  f"{common.num_actual_tokens}, but the batch has "
                                  f"{batch.num_tokens} query tokens",
                               index=len(starts) - 1, array="query_start_loc"))
    if not found:
        found += _compare(3, "query_lens", common.query_lens,
                          [r.query_len for r in batch.requests], ids)
    if not found and common.max_query_len != max(r.query_len for r in batch.requests):
        found.append(Violation(3, f"max_query_len is {common.max_query_len}, expected "
                                  f"{max(r.query_len for r in batch.requests)}",
                               array="max_query_len"))
    return found


def _check_context_lengths(batch: BatchSpec, common: CommonMetadata) -> list[Violation]:
    found: list[Violation] = []
    if len(common.seq_lens) != len(batch.requests):
        return [Violation(4, f"has {len(common.seq_lens)} entries for {len(batch.requests)} "
                             "requests", array="seq_lens")]
    query_lens = common.query_lens
    for index, request in enumerate(batch.requests):
        context = common.seq_lens[index] - query_lens[index]
        if context != request.context_len:
            found.append(Violation(
                4, f"seq_len {common.seq_lens[index]} - query_len {query_lens[index]} = "
                   f"{context}, but {request.context_len} tokens were cached before the step",
                request_id=request.id, index=index, array="seq_lens"))
    if not found and common.max_seq_len != max(common.seq_lens):
        found.append(Violation(4, f"max_seq_len is {common.max_seq_len}, expected "
                                  f"{max(common.seq_lens)}", array="max_seq_len"))
    return found


def _page_owners(batch: BatchSpec) -> dict[int, list[str]]:
    owners: dict[int, list[str]] = {}
    for request in batch.requests:
        for page in request.block_ids:
            owners.setdefault(page, []).append(request.id)
    return owners


def _check_block_table(batch: BatchSpec, common: CommonMetadata,
                       cache_block_size: int | None) -> list[Violation]:
    found: list[Violation] = []
    if common.block_size != batch.block_size:
        found.append(Violation(5, f"metadata page size {common.block_size} differs from the "
                                  f"batch's {batch.block_size}", array="block_size"))
    if cache_block_size is not None and cache_block_size != common.block_size:
        found.append(Violation(5, f"metadata page size {common.block_size} differs from the KV "
                                  f"cache's page size {cache_block_size}", array="block_size"))
    if len(common.block_table) != len(batch.requests):
        found.append(Violation(5, f"has {len(common.block_table)} rows for "
                                  f"{len(batch.requests)} requests", array="block_table"))
        return found
    owners = _page_owners(batch)
    for row_index, (request, row) in enumerate(zip(batch.requests, common.block_table,
                                                   strict=True)):
        needed = pages_needed(request.seq_len, batch.block_size)
        array = f"block_table[{row_index}]"
        if len(row) < needed:
            found.append(Violation(5, f"row has {len(row)} entries but {needed} pages are "
                                      "needed", request_id=request.id, array=array))
            continue
        for column, page in enumerate(row):
            if column < len(request.block_ids):
                expected = request.block_ids[column]
                if page == expected:
                    continue
                if page in request.block_ids:
                    message = (f"page {page} is the request's logical page "
                               f"{request.block_ids.index(page)}, expected page {expected}")
                elif page in owners:
                    message = (f"page {page} belongs to request(s) "
                               f"{', '.join(owners[page])}, not to this one")
                else:
                    message = f"page {page} is not owned by any request in the batch"
                found.append(Violation(5, message, request_id=request.id, index=column,
                                       array=array))
                break
            if page != BLOCK_TABLE_PAD:
                found.append(Violation(5, f"padding entry is {page}, expected "
                                          f"{BLOCK_TABLE_PAD}", request_id=request.id,
                                       index=column, array=array))
                break
    return found


def _check_slots(batch: BatchSpec, common: CommonMetadata) -> list[Violation]:
    block_size = batch.block_size
    slots = common.slot_mapping
    if len(slots) < batch.num_tokens:
        return [Violation(6, f"has {len(slots)} entries for {batch.num_tokens} tokens",
                          array="slot_mapping")]
    owners = _page_owners(batch)
    found: list[Violation] = []
    row = 0
    for request in batch.requests:
        owned = set(request.block_ids)
        for position in range(request.context_len, request.seq_len):
            slot = slots[row]
            page, offset = divmod(slot, block_size) if slot >= 0 else (slot, 0)
            expected = request.block_ids[position // block_size] * block_size + (
                position % block_size)
            message = None
            if slot == PAD_SLOT_ID:
                message = f"real token at position {position} has the padding slot"
            elif page not in owned:
                holders = owners.get(page)
                message = (f"slot {slot} lies in page {page}, owned by "
                           f"{', '.join(holders)}" if holders
                           else f"slot {slot} lies in page {page}, owned by no request")
            elif len(owners[page]) > 1:
                others = [owner for owner in owners[page] if owner != request.id]
                message = (f"slot {slot} writes page {page}, which request(s) "
                           f"{', '.join(others)} also list: a written page must not be shared")
            elif slot != expected:
                message = (f"slot {slot} (page {page}, offset {offset}) is not position "
                           f"{position}'s address {expected}")
            if message is not None:
                found.append(Violation(6, message, request_id=request.id, index=row,
                                       array="slot_mapping"))
            row += 1
    for pad_row in range(batch.num_tokens, len(slots)):
        if slots[pad_row] != PAD_SLOT_ID:
            found.append(Violation(6, f"padding token has slot {slots[pad_row]}, expected "
                                      f"{PAD_SLOT_ID}", index=pad_row, array="slot_mapping"))
            break
    return found


def check_common(batch: BatchSpec, common: CommonMetadata, *,
                 cache_block_size: int | None = None) -> list[Violation]:
    """Invariants 3, 4, 5 and 6 for the common metadata of ``batch`` (in the same order)."""
    found = _check_query_start_loc(batch, common)
    if found:
        return found  # later checks index by query_start_loc
    found += _check_context_lengths(batch, common)
    found += _check_block_table(batch, common, cache_block_size)
    found += _check_slots(batch, common)
    return found


def check_flash_attn(batch: BatchSpec, metadata: FlashAttentionMetadata, *,
                     cache_block_size: int | None = None) -> list[Violation]:
    """Common invariants plus FlashAttention's renamed arrays."""
    found = check_common(batch, metadata.common, cache_block_size=cache_block_size)
    ids = metadata.common.request_ids
    found += _compare(3, "cu_seqlens_q", metadata.cu_seqlens_q, metadata.common.query_start_loc)
    found += _compare(4, "seqused_k", metadata.seqused_k, [r.seq_len for r in batch.requests],
                      ids)
    if metadata.block_table != metadata.common.block_table:
        found.append(Violation(5, "differs from the common block_table", array="block_table"))
    if metadata.max_q != metadata.common.max_query_len:
        found.append(Violation(3, f"max_q is {metadata.max_q}, expected "
                                  f"{metadata.common.max_query_len}", array="max_q"))
    if metadata.max_k != metadata.common.max_seq_len:
        found.append(Violation(4, f"max_k is {metadata.max_k}, expected "
                                  f"{metadata.common.max_seq_len}", array="max_k"))
    return found


def _check_permutation(batch: BatchSpec, metadata: FlashInferMetadata) -> list[Violation]:
    permutation = metadata.permutation
    if sorted(permutation) != list(range(len(batch.requests))):
        return [Violation(7, f"{permutation} is not a permutation of "
                             f"0..{len(batch.requests) - 1}", array="permutation")]
    reordered = [batch.requests[index] for index in permutation]
    found = _compare(7, "request_ids", metadata.common.request_ids, [r.id for r in reordered])
    starts: list[int] = [0]
    for request in batch.requests:
        starts.append(starts[-1] + request.query_len)
    expected_tokens = [row for index in permutation for row in range(starts[index],
                                                                     starts[index + 1])]
    found += _compare(7, "token_permutation", metadata.token_permutation, expected_tokens)
    return found


def _check_split(batch: BatchSpec, metadata: FlashInferMetadata) -> list[Violation]:
    common = metadata.common
    threshold = metadata.reorder_batch_threshold
    query_lens = common.query_lens
    found: list[Violation] = []
    if metadata.num_decodes + metadata.num_prefills != common.num_reqs:
        found.append(Violation(7, f"num_decodes {metadata.num_decodes} + num_prefills "
                                  f"{metadata.num_prefills} != {common.num_reqs} requests",
                               array="num_prefills"))
        return found
    for index, query_len in enumerate(query_lens):
        is_decode = index < metadata.num_decodes
        if is_decode != (query_len <= threshold):
            kind = "decode" if is_decode else "prefill"
            found.append(Violation(7, f"query_len {query_len} placed in the {kind} part with "
                                      f"reorder_batch_threshold {threshold}",
                                   request_id=common.request_ids[index], index=index,
                                   array="query_start_loc"))
            break
    decode_tokens = common.query_start_loc[metadata.num_decodes]
    if metadata.num_decode_tokens != decode_tokens:
        found.append(Violation(7, f"num_decode_tokens is {metadata.num_decode_tokens} but the "
                                  f"decode requests hold {decode_tokens} tokens",
                               array="num_decode_tokens"))
    if metadata.num_decode_tokens + metadata.num_prefill_tokens != batch.num_tokens:
        found.append(Violation(7, f"decode tokens {metadata.num_decode_tokens} + prefill "
                                  f"tokens {metadata.num_prefill_tokens} != "
                                  f"{batch.num_tokens} tokens: slices overlap or leave a gap",
                               array="num_prefill_tokens"))
    prefill_starts = common.query_start_loc[metadata.num_decodes:]
    found += _compare(3, "qo_indptr", metadata.qo_indptr,
                      [start - prefill_starts[0] for start in prefill_starts])
    return found


def _check_csr(batch: BatchSpec, metadata: FlashInferMetadata) -> list[Violation]:
    """The CSR page table is the block table in FlashInfer's form (invariant 5)."""
    reordered = [batch.requests[index] for index in metadata.permutation]
    block_size = batch.block_size
    indptr = metadata.paged_kv_indptr
    ids = [r.id for r in reordered]
    if len(indptr) != len(reordered) + 1 or indptr[0] != 0:
        return [Violation(5, f"must have {len(reordered) + 1} entries starting at 0, got "
                             f"{indptr}", array="paged_kv_indptr")]
    found: list[Violation] = []
    if indptr[-1] != len(metadata.paged_kv_indices):
        found.append(Violation(5, f"ends at {indptr[-1]} but paged_kv_indices has "
                                  f"{len(metadata.paged_kv_indices)} entries",
                               array="paged_kv_indptr"))
        return found
    for index, request in enumerate(reordered):
        needed = pages_needed(request.seq_len, block_size)
        count = indptr[index + 1] - indptr[index]
        if count != needed:
            found.append(Violation(5, f"gives {count} pages, {needed} needed for "
                                      f"{request.seq_len} tokens", request_id=request.id,
                                   index=index + 1, array="paged_kv_indptr"))
            continue
        segment = metadata.paged_kv_indices[indptr[index]:indptr[index + 1]]
        for offset, (page, expected) in enumerate(zip(segment, request.block_ids,
                                                      strict=False)):
            if page != expected:
                found.append(Violation(5, f"page {page}, expected the request's page "
                                          f"{expected}", request_id=request.id,
                                       index=indptr[index] + offset,
                                       array="paged_kv_indices"))
                break
    expected_last = [last_page_len(r.seq_len, block_size) for r in reordered]
    for index, value in enumerate(metadata.paged_kv_last_page_len):
        if not 1 <= value <= block_size:
            found.append(Violation(5, f"is {value}, outside 1..{block_size} (a full last page "
                                      f"is {block_size}, never 0)", request_id=ids[index]
                                   if index < len(ids) else None, index=index,
                                   array="paged_kv_last_page_len"))
            return found
    found += _compare(5, "paged_kv_last_page_len", metadata.paged_kv_last_page_len,
                      expected_last, ids)
    split = metadata.num_decodes
    found += _compare(5, "decode.paged_kv_indptr", metadata.decode_paged_kv_indptr,
                      indptr[: split + 1])
    found += _compare(5, "prefill.paged_kv_indptr", metadata.prefill_paged_kv_indptr,
                      indptr[split:])
    found += _compare(5, "decode.paged_kv_last_page_len",
                      metadata.decode_paged_kv_last_page_len,
                      metadata.paged_kv_last_page_len[:split])
    found += _compare(5, "prefill.paged_kv_last_page_len",
                      metadata.prefill_paged_kv_last_page_len,
                      metadata.paged_kv_last_page_len[split:])
    return found


def check_flashinfer(batch: BatchSpec, metadata: FlashInferMetadata, *,
                     cache_block_size: int | None = None) -> list[Violation]:
    """Invariant 7 (one permutation, exact split), then 3-6 on the reordered batch."""
    found = _check_permutation(batch, metadata)
    if found:
        return found
    reordered = batch.permuted(metadata.permutation)
    found += check_common(reordered, metadata.common, cache_block_size=cache_block_size)
    if found:
        return found
    found += _check_split(batch, metadata)
    found += _check_csr(batch, metadata)
    return found


def check_metadata(batch: BatchSpec, metadata: FlashAttentionMetadata | FlashInferMetadata, *,
                   cache_block_size: int | None = None) -> list[Violation]:
    """Every batch-level invariant that applies to this backend's metadata."""
    if isinstance(metadata, FlashAttentionMetadata):
        return check_flash_attn(batch, metadata, cache_block_size=cache_block_size)
    return check_flashinfer(batch, metadata, cache_block_size=cache_block_size)


@dataclass(frozen=True)
class MetadataIdentity:
    """What one metadata object was built for: the backend and the cache spec it assumes."""

    backend: str
    block_size: int
    kv_layout: str
    num_kv_heads: int
    head_size: int
    kv_cache_dtype: str


@dataclass(frozen=True)
class LayerBinding:
    """A layer, the metadata object it is handed, and what the layer itself needs."""

    layer_name: str
    metadata_key: str
    backend: str
    block_size: int
    kv_layout: str
    num_kv_heads: int
    head_size: int
    kv_cache_dtype: str
    num_q_heads: int

    def cache_spec(self) -> tuple[int, str, int, int, str]:
        return (self.block_size, self.kv_layout, self.num_kv_heads, self.head_size,
                self.kv_cache_dtype)


def check_bindings(bindings: Iterable[LayerBinding],
                   identities: Mapping[str, MetadataIdentity]) -> list[Violation]:
    """Invariants 1 (layer ↔ metadata match) and 2 (sharing layers agree)."""
    found: list[Violation] = []
    by_key: dict[str, list[LayerBinding]] = {}
    for binding in bindings:
        by_key.setdefault(binding.metadata_key, []).append(binding)
        identity = identities.get(binding.metadata_key)
        if identity is None:
            found.append(Violation(1, f"layer {binding.layer_name} is bound to unknown "
                                      f"metadata '{binding.metadata_key}'",
                                   array="layer_bindings"))
            continue
        wanted = (identity.block_size, identity.kv_layout, identity.num_kv_heads,
                  identity.head_size, identity.kv_cache_dtype)
        if binding.backend != identity.backend or binding.cache_spec() != wanted:
            found.append(Violation(
                1, f"layer {binding.layer_name} ({binding.backend}, cache "
                   f"{binding.cache_spec()}) got metadata built for {identity.backend}, "
                   f"cache {wanted}", array="layer_bindings"))
    for key, group in by_key.items():
        first = group[0]
        for other in group[1:]:
            if (other.backend, other.cache_spec(), other.num_q_heads) != (
                    first.backend, first.cache_spec(), first.num_q_heads):
                found.append(Violation(
                    2, f"layers {first.layer_name} and {other.layer_name} share metadata "
                       f"'{key}' but differ in backend, cache spec or q heads",
                    array="layer_bindings"))
                break
    return found


def check_graph_addresses(captured: Mapping[str, int],
                          current: Mapping[str, int]) -> list[Violation]:
    """Invariant 8: every buffer recorded at capture still has its address at replay."""
    found: list[Violation] = []
    for name, address in captured.items():
        now = current.get(name)
        if now is None:
            found.append(Violation(8, f"buffer '{name}' captured at {address:#x} is gone",
                                   array=name))
        elif now != address:
            found.append(Violation(8, f"buffer '{name}' moved from {address:#x} to {now:#x} "
                                      "after capture", array=name))
    return found


def check_length_views(request_ids: Sequence[str], device_seq_lens: Sequence[int],
                       cpu_seq_lens: Sequence[int], *, needs_exact: bool) -> list[Violation]:
    """Invariant 9: CPU lengths are upper bounds; exact-length backends need them equal."""
    found: list[Violation] = []
    for index, (device, cpu) in enumerate(zip(device_seq_lens, cpu_seq_lens, strict=True)):
        request = request_ids[index] if index < len(request_ids) else None
        if cpu < device:
            found.append(Violation(9, f"CPU seq_len {cpu} is below the device truth {device}",
                                   request_id=request, index=index, array="seq_lens_cpu"))
        elif needs_exact and cpu != device:
            found.append(Violation(9, f"CPU seq_len {cpu} is only an upper bound of {device}, "
                                      "and this backend needs exact lengths",
                                   request_id=request, index=index, array="seq_lens_cpu"))
    return found
