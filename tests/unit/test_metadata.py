"""Metadata builders: the seed's worked example and a reordered batch, value by value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.errors import InputError
from selector.smoke.invariants import check_metadata
from selector.smoke.metadata import (
    BatchSpec,
    build_common_metadata,
    build_flash_attn_metadata,
    build_flashinfer_metadata,
    last_page_len,
    load_batch_file,
    parse_batch,
)

REPO = Path(__file__).resolve().parents[2]
BATCHES = REPO / "tests" / "fixtures" / "batches"
SEED = REPO / "examples" / "batch-seed.json"


@pytest.fixture
def seed() -> BatchSpec:
    return load_batch_file(SEED)


def test_seed_example_file_matches_fixture() -> None:
    assert json.loads(SEED.read_text()) == json.loads((BATCHES / "seed.json").read_text())


def test_seed_common_metadata(seed: BatchSpec) -> None:
    common = build_common_metadata(seed)
    assert common.query_start_loc == [0, 1, 5, 8]
    assert common.seq_lens == [128, 4, 35]
    assert common.max_query_len == 4
    assert common.max_seq_len == 128
    assert common.num_actual_tokens == 8
    assert common.slot_mapping == [175, 80, 81, 82, 83, 192, 193, 194]
    assert common.block_table == [
        [7, 2, 9, 4, 11, 6, 3, 10],
        [5, 0, 0, 0, 0, 0, 0, 0],
        [1, 8, 12, 0, 0, 0, 0, 0],
    ]


def test_seed_flash_attn_metadata(seed: BatchSpec) -> None:
    fa = build_flash_attn_metadata(seed)
    assert fa.cu_seqlens_q == [0, 1, 5, 8]
    assert fa.seqused_k == [128, 4, 35]
    assert fa.max_q == 4
    assert fa.max_k == 128
    assert len(fa.block_table) == 3
    assert check_metadata(seed, fa) == []


def test_seed_flashinfer_metadata(seed: BatchSpec) -> None:
    fi = build_flashinfer_metadata(seed)
    assert fi.permutation == [0, 1, 2]
    assert (fi.num_decodes, fi.num_decode_tokens) == (1, 1)
    assert (fi.num_prefills, fi.num_prefill_tokens) == (2, 7)
    assert fi.paged_kv_indptr == [0, 8, 9, 12]
    assert fi.paged_kv_indices == [7, 2, 9, 4, 11, 6, 3, 10, 5, 1, 8, 12]
    assert fi.paged_kv_last_page_len == [16, 4, 3]
    assert fi.qo_indptr == [0, 4, 7]
    assert fi.decode_paged_kv_indptr == [0, 8]
    assert fi.prefill_paged_kv_indptr == [8, 9, 12]
    assert fi.common.slot_mapping == [175, 80, 81, 82, 83, 192, 193, 194]
    assert check_metadata(seed, fi) == []


def test_reorder_applies_one_permutation() -> None:
    batch = load_batch_file(BATCHES / "reordered.json")
    fi = build_flashinfer_metadata(batch)
    assert fi.permutation == [1, 3, 0, 2]
    assert fi.common.request_ids == ["decode-full-page", "decode", "prefill", "extend"]
    assert fi.token_permutation == [20, 26, *range(20), *range(21, 26)]
    assert fi.common.seq_lens == [32, 17, 20, 19]
    assert fi.common.query_start_loc == [0, 1, 2, 22, 27]
    assert fi.paged_kv_indptr == [0, 2, 4, 6, 8]
    assert fi.paged_kv_indices == [7, 2, 6, 5, 4, 1, 3, 8]
    assert fi.paged_kv_last_page_len == [16, 1, 4, 3]
    assert fi.qo_indptr == [0, 20, 25]
    assert (fi.num_decodes, fi.num_decode_tokens, fi.num_prefills, fi.num_prefill_tokens) == (
        2, 2, 2, 25)
    # the reordered slot mapping is the original one, rows permuted
    original = build_common_metadata(batch).slot_mapping
    assert fi.common.slot_mapping == [original[row] for row in fi.token_permutation]
    assert check_metadata(batch, fi) == []


def test_reorder_threshold_moves_short_extends_into_decodes() -> None:
    batch = load_batch_file(BATCHES / "reordered.json")
    fi = build_flashinfer_metadata(batch, reorder_batch_threshold=5)
    assert fi.permutation == [1, 2, 3, 0]
    assert (fi.num_decodes, fi.num_decode_tokens) == (3, 7)
    assert fi.qo_indptr == [0, 20]
    assert check_metadata(batch, fi) == []


def test_reorder_threshold_below_one_is_rejected(seed: BatchSpec) -> None:
    with pytest.raises(ValueError, match="reorder_batch_threshold"):
        build_flashinfer_metadata(seed, reorder_batch_threshold=0)


@pytest.mark.parametrize(("seq_len", "block_size", "expected"), [
    (1, 16, 1), (16, 16, 16), (17, 16, 1), (128, 16, 16), (35, 16, 3), (64, 64, 64)])
def test_last_page_len_is_never_zero(seq_len: int, block_size: int, expected: int) -> None:
    assert last_page_len(seq_len, block_size) == expected


def test_padding_tokens_get_pad_slot(seed: BatchSpec) -> None:
    common = build_common_metadata(seed, pad_tokens_to=12)
    assert common.slot_mapping[8:] == [-1, -1, -1, -1]
    assert common.num_actual_tokens == 8
    with pytest.raises(ValueError, match="pad_tokens_to"):
        build_common_metadata(seed, pad_tokens_to=4)


def test_extra_allocated_pages_stay_in_block_table_but_not_csr() -> None:
    batch = parse_batch({"block_size": 4, "requests": [
        {"id": "r", "context_len": 3, "query_len": 2, "block_ids": [9, 4, 7]}]})
    fi = build_flashinfer_metadata(batch)
    assert fi.common.block_table == [[9, 4, 7]]
    assert fi.paged_kv_indices == [9, 4]
    assert fi.common.slot_mapping == [39, 16]
    assert check_metadata(batch, fi) == []


@pytest.mark.parametrize(("data", "field", "fragment"), [
    ({"requests": []}, "block_size", "Field required"),
    ({"block_size": 16, "requests": []}, "requests", "at least 1"),
    ({"block_size": "16", "requests": [{"id": "a", "context_len": 0, "query_len": 1,
                                        "block_ids": [1]}]}, "block_size", "integer"),
    ({"block_size": 16, "requests": [{"id": "a", "context_len": 0, "query_len": 0,
                                      "block_ids": [1]}]},
     "requests[0] (id 'a').query_len", "greater than or equal to 1"),
    ({"block_size": 16, "requests": [{"id": "a", "context_len": 0, "query_len": 1,
                                      "block_ids": [1], "extra": 1}]},
     "requests[0] (id 'a').extra", "unknown field"),
    ({"block_size": 16, "requests": [{"id": "a", "context_len": 16, "query_len": 1,
                                      "block_ids": [1]}]},
     "requests[0] (id 'a').block_ids", "need 2 page(s)"),
    ({"block_size": 16, "requests": [{"id": "a", "context_len": 0, "query_len": 1,
                                      "block_ids": [1, 1]}]},
     "requests[0] (id 'a').block_ids[1]", "listed twice"),
    ({"block_size": 16, "requests": [
        {"id": "a", "context_len": 0, "query_len": 1, "block_ids": [1]},
        {"id": "a", "context_len": 0, "query_len": 1, "block_ids": [2]}]},
     "requests[1] (id 'a').id", "appears twice"),
    ({"block_size": 16, "requests": [{"id": "a", "context_len": True, "query_len": 1,
                                      "block_ids": [1]}]},
     "requests[0] (id 'a').context_len", "integer"),
    ({"block_size": 16, "requests": [{"id": "a", "context_len": 0, "query_len": 1,
                                      "block_ids": [-3]}]},
     "requests[0] (id 'a').block_ids[0]", "greater than or equal to 0"),
])
def test_bad_batches_name_the_field(data: object, field: str, fragment: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_batch(data, source="b.json")
    assert raised.value.field == field
    assert fragment in raised.value.message
    assert raised.value.render().startswith("b.json: field ")


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_batch_file(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"block_size": 16,\n "requests": [}')
    with pytest.raises(InputError) as raised:
        load_batch_file(broken)
    assert raised.value.line == 2
    assert str(broken) in str(raised.value)
