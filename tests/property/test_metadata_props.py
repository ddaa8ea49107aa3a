"""Hypothesis: random batches, page sizes and orders always satisfy the invariants."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selector.smoke.batch import BatchSpec, pages_needed
from selector.smoke.invariants import check_metadata
from selector.smoke.metadata import (
    build_common_metadata,
    build_flash_attn_metadata,
    build_flashinfer_metadata,
)

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def batches(draw: st.DrawFn) -> BatchSpec:
    """Random batches: random page sizes, decodes/prefills/extends, shuffled physical pages."""
    block_size = draw(st.sampled_from([1, 2, 3, 8, 16, 32, 64]))
    count = draw(st.integers(min_value=1, max_value=8))
    shapes: list[tuple[int, int, int]] = []
    for _ in range(count):
        context = draw(st.integers(min_value=0, max_value=200))
        query = draw(st.one_of(st.just(1), st.integers(min_value=1, max_value=70)))
        spare = draw(st.integers(min_value=0, max_value=2))
        shapes.append((context, query, pages_needed(context + query, block_size) + spare))
    total_pages = sum(pages for _, _, pages in shapes)
    pool = draw(st.permutations(list(range(1, total_pages + 1))))
    requests: list[dict[str, Any]] = []
    cursor = 0
    for index, (context, query, pages) in enumerate(shapes):
        requests.append({"id": f"r{index}", "context_len": context, "query_len": query,
                         "block_ids": list(pool[cursor:cursor + pages])})
        cursor += pages
    return BatchSpec.model_validate({"block_size": block_size, "requests": requests})


@SETTINGS
@given(batches())
def test_flash_attn_metadata_satisfies_invariants(batch: BatchSpec) -> None:
    assert check_metadata(batch, build_flash_attn_metadata(batch)) == []


@SETTINGS
@given(batches(), st.integers(min_value=1, max_value=80))
def test_flashinfer_metadata_satisfies_invariants(batch: BatchSpec, threshold: int) -> None:
    fi = build_flashinfer_metadata(batch, reorder_batch_threshold=threshold)
    assert check_metadata(batch, fi) == []
    assert fi.num_decode_tokens + fi.num_prefill_tokens == batch.num_tokens
    assert all(1 <= value <= batch.block_size for value in fi.paged_kv_last_page_len)
    assert fi.qo_indptr[0] == 0


@SETTINGS
@given(batches(), st.randoms(use_true_random=False))
def test_scheduler_order_does_not_change_per_request_facts(batch: BatchSpec,
                                                           rng: Any) -> None:
    order = list(range(len(batch.requests)))
    rng.shuffle(order)
    shuffled = batch.permuted(order)
    original = build_flashinfer_metadata(batch)
    reshuffled = build_flashinfer_metadata(shuffled)
    assert check_metadata(shuffled, reshuffled) == []

    def pages_by_id(metadata: Any) -> dict[str, list[int]]:
        ids = metadata.common.request_ids
        indptr = metadata.paged_kv_indptr
        return {ids[i]: metadata.paged_kv_indices[indptr[i]:indptr[i + 1]]
                for i in range(len(ids))}

    assert pages_by_id(original) == pages_by_id(reshuffled)
    assert sorted(original.common.slot_mapping) == sorted(reshuffled.common.slot_mapping)


@SETTINGS
@given(batches(), st.data())
def test_any_corrupted_slot_is_caught(batch: BatchSpec, data: st.DataObject) -> None:
    common = build_common_metadata(batch)
    row = data.draw(st.integers(min_value=0, max_value=common.num_actual_tokens - 1))
    delta = data.draw(st.integers(min_value=1, max_value=5))
    slots = list(common.slot_mapping)
    slots[row] += delta
    fa = build_flash_attn_metadata(batch)
    broken = dataclasses.replace(fa, common=dataclasses.replace(common, slot_mapping=slots))
    found = check_metadata(batch, broken)
    assert found and found[0].invariant == 6 and found[0].index == row


@SETTINGS
@given(batches(), st.data())
def test_any_wrong_seq_len_is_caught(batch: BatchSpec, data: st.DataObject) -> None:
    common = build_common_metadata(batch)
    index = data.draw(st.integers(min_value=0, max_value=common.num_reqs - 1))
    seq_lens = list(common.seq_lens)
    seq_lens[index] += data.draw(st.sampled_from([-1, 1, 7]))
    found = check_metadata(batch, dataclasses.replace(
        build_flash_attn_metadata(batch),
        common=dataclasses.replace(common, seq_lens=seq_lens, max_seq_len=max(seq_lens))))
    assert any(v.invariant == 4 and v.request_id == batch.requests[index].id for v in found)
