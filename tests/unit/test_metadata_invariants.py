"""The invariant checker finds deliberately broken metadata and names the invariant."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from selector.smoke.invariants import (
    INVARIANTS,
    LayerBinding,
    MetadataIdentity,
    Violation,
    check_bindings,
    check_common,
    check_flash_attn,
    check_flashinfer,
    check_graph_addresses,
    check_length_views,
    check_metadata,
)
from selector.smoke.metadata import (
    BatchSpec,
    build_common_metadata,
    build_flash_attn_metadata,
    build_flashinfer_metadata,
    load_batch_file,
)

BATCHES = Path(__file__).resolve().parents[1] / "fixtures" / "batches"


@pytest.fixture
def seed() -> BatchSpec:
    return load_batch_file(BATCHES / "seed.json")


@pytest.fixture
def mixed() -> BatchSpec:
    return load_batch_file(BATCHES / "reordered.json")


def numbers(violations: list[Violation]) -> set[int]:
    return {violation.invariant for violation in violations}


def test_nine_invariants_numbered_in_order() -> None:
    assert [invariant.number for invariant in INVARIANTS] == list(range(1, 10))
    assert len({invariant.name for invariant in INVARIANTS}) == 9


def test_query_start_loc_not_starting_at_zero(seed: BatchSpec) -> None:
    common = build_common_metadata(seed)
    broken = dataclasses.replace(common, query_start_loc=[1, 1, 5, 8])
    found = check_common(seed, broken)
    assert found[0].invariant == 3
    assert found[0].name == "query-start-loc"
    assert found[0].index == 0


def test_query_start_loc_decreasing(seed: BatchSpec) -> None:
    common = build_common_metadata(seed)
    broken = dataclasses.replace(common, query_start_loc=[0, 5, 1, 8])
    found = check_common(seed, broken)
    assert found[0].invariant == 3
    assert found[0].request_id == "B"
    assert found[0].index == 2


def test_query_start_loc_wrong_total(seed: BatchSpec) -> None:
    common = build_common_metadata(seed)
    broken = dataclasses.replace(common, query_start_loc=[0, 1, 5, 9])
    assert 3 in numbers(check_common(seed, broken))


def test_seq_len_minus_query_len_is_context(seed: BatchSpec) -> None:
    common = build_common_metadata(seed)
    broken = dataclasses.replace(common, seq_lens=[128, 4, 36], max_seq_len=128)
    found = check_common(seed, broken)
    assert [(v.invariant, v.request_id, v.index) for v in found] == [(4, "C", 2)]
    assert "32 tokens were cached" in found[0].message


def test_block_table_entry_of_another_request(seed: BatchSpec) -> None:
    common = build_common_metadata(seed)
    table = [list(row) for row in common.block_table]
    table[2][1] = 5  # page 5 is B's
    found = check_common(seed, dataclasses.replace(common, block_table=table))
    assert [(v.invariant, v.request_id, v.index) for v in found] == [(5, "C", 1)]
    assert "belongs to request(s) B" in found[0].message
    assert found[0].array == "block_table[2]"


def test_block_table_wrong_page_geometry(seed: BatchSpec) -> None:
    found = check_common(seed, build_common_metadata(seed), cache_block_size=64)
    assert numbers(found) == {5}
    assert "page size 64" in found[0].message


def test_slot_outside_owned_page(seed: BatchSpec) -> None:
    common = build_common_metadata(seed)
    slots = list(common.slot_mapping)
    slots[6] = 5 * 16 + 9  # C's token written into B's page
    found = check_common(seed, dataclasses.replace(common, slot_mapping=slots))
    assert [(v.invariant, v.request_id, v.index) for v in found] == [(6, "C", 6)]
    assert "owned by B" in found[0].message


def test_slot_at_wrong_offset(seed: BatchSpec) -> None:
    common = build_common_metadata(seed)
    slots = list(common.slot_mapping)
    slots[0] = 174
    found = check_common(seed, dataclasses.replace(common, slot_mapping=slots))
    assert [(v.invariant, v.request_id, v.index) for v in found] == [(6, "A", 0)]


def test_real_token_with_padding_slot_and_padding_with_real_slot(seed: BatchSpec) -> None:
    common = build_common_metadata(seed, pad_tokens_to=10)
    slots = list(common.slot_mapping)
    slots[3], slots[9] = -1, 12
    found = check_common(seed, dataclasses.replace(common, slot_mapping=slots))
    assert [(v.invariant, v.request_id, v.index) for v in found] == [(6, "B", 3), (6, None, 9)]


def test_written_page_shared_with_another_request() -> None:
    batch = load_batch_file(BATCHES / "shared-written-page.json")
    found = check_metadata(batch, build_flash_attn_metadata(batch))
    assert numbers(found) == {6}
    assert found[0].request_id == "P"
    assert "must not be shared" in found[0].message


def test_read_only_prefix_pages_may_be_shared() -> None:
    batch = load_batch_file(BATCHES / "shared-prefix.json")
    assert check_metadata(batch, build_flash_attn_metadata(batch)) == []
    assert check_metadata(batch, build_flashinfer_metadata(batch)) == []


def test_flash_attn_renamed_arrays_must_match(seed: BatchSpec) -> None:
    fa = build_flash_attn_metadata(seed)
    assert numbers(check_flash_attn(seed, dataclasses.replace(fa, seqused_k=[128, 4, 34]))) == {4}
    assert numbers(check_flash_attn(seed, dataclasses.replace(fa, cu_seqlens_q=[0, 1, 4, 8]))
                   ) == {3}
    assert numbers(check_flash_attn(seed, dataclasses.replace(fa, max_k=64))) == {4}


def test_permutation_not_applied_to_block_table(mixed: BatchSpec) -> None:
    fi = build_flashinfer_metadata(mixed)
    # a reorder that forgot the block table: rows still in the original order
    original_rows = build_common_metadata(mixed).block_table
    broken = dataclasses.replace(fi, common=dataclasses.replace(fi.common,
                                                                block_table=original_rows))
    found = check_flashinfer(mixed, broken)
    assert numbers(found) == {5}
    assert found[0].request_id == "decode-full-page"


def test_permutation_not_applied_to_token_rows(mixed: BatchSpec) -> None:
    fi = build_flashinfer_metadata(mixed)
    broken = dataclasses.replace(fi, token_permutation=list(range(27)))
    found = check_flashinfer(mixed, broken)
    assert [(v.invariant, v.array) for v in found] == [(7, "token_permutation")]


def test_permutation_that_is_not_a_permutation(mixed: BatchSpec) -> None:
    fi = build_flashinfer_metadata(mixed)
    found = check_flashinfer(mixed, dataclasses.replace(fi, permutation=[1, 1, 0, 2]))
    assert [(v.invariant, v.array) for v in found] == [(7, "permutation")]


def test_decode_prefill_split_must_cover_every_token(mixed: BatchSpec) -> None:
    fi = build_flashinfer_metadata(mixed)
    found = check_flashinfer(mixed, dataclasses.replace(fi, num_prefill_tokens=24))
    assert [(v.invariant, v.array) for v in found] == [(7, "num_prefill_tokens")]
    found = check_flashinfer(mixed, dataclasses.replace(fi, num_decodes=1, num_prefills=3))
    assert found[0].invariant == 7
    assert found[0].request_id == "decode"


def test_csr_last_page_len_zero_is_a_violation(seed: BatchSpec) -> None:
    fi = build_flashinfer_metadata(seed)
    found = check_flashinfer(seed, dataclasses.replace(fi, paged_kv_last_page_len=[0, 4, 3]))
    assert [(v.invariant, v.request_id, v.array) for v in found] == [
        (5, "A", "paged_kv_last_page_len")]
    assert "never 0" in found[0].message


def test_csr_indices_and_indptr(seed: BatchSpec) -> None:
    fi = build_flashinfer_metadata(seed)
    indices = list(fi.paged_kv_indices)
    indices[9] = 8
    found = check_flashinfer(seed, dataclasses.replace(fi, paged_kv_indices=indices))
    assert [(v.invariant, v.request_id, v.index) for v in found] == [(5, "C", 9)]
    found = check_flashinfer(seed, dataclasses.replace(fi, paged_kv_indptr=[0, 7, 9, 12]))
    assert 5 in numbers(found)


def test_prefill_qo_indptr_must_be_rebased(seed: BatchSpec) -> None:
    fi = build_flashinfer_metadata(seed)
    found = check_flashinfer(seed, dataclasses.replace(fi, qo_indptr=[1, 5, 8]))
    assert [(v.invariant, v.array) for v in found] == [(3, "qo_indptr")]


def _binding(name: str, key: str = "g0", **changes: object) -> LayerBinding:
    values: dict[str, object] = {
        "layer_name": name, "metadata_key": key, "backend": "FLASHINFER", "block_size": 16,
        "kv_layout": "HND", "num_kv_heads": 8, "head_size": 128, "kv_cache_dtype": "auto",
        "num_q_heads": 32}
    values.update(changes)
    return LayerBinding(**values)  # type: ignore[arg-type]


IDENTITY = {"g0": MetadataIdentity("FLASHINFER", 16, "HND", 8, 128, "auto")}


def test_layer_bindings_agree() -> None:
    assert check_bindings([_binding("layers.0"), _binding("layers.1")], IDENTITY) == []


def test_layer_bound_to_metadata_of_another_backend() -> None:
    found = check_bindings([_binding("layers.0", backend="FLASH_ATTN")], IDENTITY)
    assert numbers(found) == {1}
    assert "layers.0" in found[0].message
    assert numbers(check_bindings([_binding("layers.0", key="nope")], IDENTITY)) == {1}


def test_sharing_layers_with_different_q_heads() -> None:
    found = check_bindings([_binding("layers.0"), _binding("layers.1", num_q_heads=16)],
                           IDENTITY)
    assert numbers(found) == {2}


def test_graph_buffer_moved() -> None:
    assert check_graph_addresses({"q": 0x1000}, {"q": 0x1000}) == []
    found = check_graph_addresses({"q": 0x1000, "out": 0x2000}, {"q": 0x1000, "out": 0x3000})
    assert [(v.invariant, v.array) for v in found] == [(8, "out")]
    assert numbers(check_graph_addresses({"q": 1}, {})) == {8}


def test_cpu_upper_bound_lengths() -> None:
    assert check_length_views(["a"], [10], [12], needs_exact=False) == []
    found = check_length_views(["a"], [10], [12], needs_exact=True)
    assert [(v.invariant, v.request_id) for v in found] == [(9, "a")]
    assert numbers(check_length_views(["a"], [10], [9], needs_exact=False)) == {9}


def test_violation_renders_invariant_request_and_index(seed: BatchSpec) -> None:
    violation = Violation(6, "slot 85 lies in page 5", request_id="C", index=6,
                          array="slot_mapping")
    assert violation.render() == ("invariant 6 slot-in-owned-page (request 'C', "
                                  "slot_mapping[6]): slot 85 lies in page 5")
    assert violation.to_json()["name"] == "slot-in-owned-page"
