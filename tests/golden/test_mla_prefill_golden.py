"""vLLM's own MLA prefill-backend answers (tests/golden/oracle/vllm-0.33.0/mla_prefill.jsonl.gz,
written by tools/mla_prefill_oracle.py with the real vLLM code) must equal attn-select's."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.solver.mla_prefill import load_mla_prefill, select_mla_prefill

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import mla_prefill_oracle  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "oracle" / "vllm-0.33.0" / "mla_prefill.jsonl.gz"
ENGINE = "vllm==0.33.0"


def _answers() -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(GOLDEN.read_bytes()).decode().splitlines() if line.strip()]


def test_golden_agrees_exactly() -> None:
    answers = _answers()
    assert len(answers) >= 400
    diffs = mla_prefill_oracle.compare(answers)
    assert not diffs, f"{len(diffs)} differences, first: {diffs[0]}"


def test_golden_covers_every_outcome() -> None:
    answers = _answers()
    selected = {a["selected"] for a in answers}
    assert {"FLASH_ATTN", "FLASHINFER", "TRTLLM_RAGGED", "TOKENSPEED_MLA", "CPU", None} <= selected
    errors = " ".join(a["error"] or "" for a in answers)
    for text in ("No valid MLA prefill backend found with MLAPrefillSelectorConfig(",
                 "Selected MLA prefill backend FLASHINFER is not valid for this configuration. Reason: [",
                 "CONFIG: Unknown MLA prefill backend: 'AUTO'. Valid options are: FLASH_ATTN,",
                 "MLA prefill backend CUSTOM must be registered before use"):
        assert text in errors
    caps = {a["input"]["device_capability"] for a in answers}
    assert {"7.0", "8.0", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"} <= caps


def test_golden_inputs_are_the_tool_grid() -> None:
    grid = {json.dumps(c, sort_keys=True) for c in mla_prefill_oracle.grid()}
    assert all(json.dumps(a["input"], sort_keys=True) in grid for a in _answers())


@pytest.mark.parametrize(("cc", "dims", "expected"), [
    (90, (128, 64, 128), ("FLASH_ATTN",)),
    (100, (128, 64, 128), ("FLASH_ATTN", "TRTLLM_RAGGED", "FLASHINFER", "TOKENSPEED_MLA")),
    (100, (192, 64, 256), ("TRTLLM_RAGGED", "FLASH_ATTN", "FLASHINFER", "TOKENSPEED_MLA")),
    (103, (192, 64, 256), ("TRTLLM_RAGGED", "FLASH_ATTN", "FLASHINFER", "TOKENSPEED_MLA")),
    (120, (128, 64, 128), ("FLASH_ATTN",)),
    (121, (192, 64, 256), ("FLASH_ATTN",)),
])
def test_priority_lists(cc: int, dims: tuple[int, int, int], expected: tuple[str, ...]) -> None:
    catalog = load_catalog()
    engine = catalog.engine(ENGINE)
    facts = {"cc": cc, "dtype": "bfloat16", "use_mla": True, "qk_nope_head_dim": dims[0],
             "qk_rope_head_dim": dims[1], "v_head_dim": dims[2]}
    result = select_mla_prefill(facts, engine, catalog=catalog)
    assert result.priority == expected
    assert result.selected == expected[0]
    assert result.dimensions == dims


def test_unknown_name_is_vllms_config_error() -> None:
    catalog = load_catalog()
    engine = catalog.engine(ENGINE)
    with pytest.raises(InputError) as info:
        select_mla_prefill({"cc": 90, "dtype": "bfloat16"}, engine, "auto", catalog=catalog)
    assert info.value.message.startswith("Unknown MLA prefill backend: 'AUTO'. Valid options are: FLASH_ATTN, ")
    assert select_mla_prefill({"cc": 90, "dtype": "bfloat16"}, engine, "flash_attn",
                              catalog=catalog).requested == "FLASH_ATTN"


@pytest.mark.parametrize(("facts", "decode", "consulted", "fatal"), [
    ({"use_sparse": False, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64},
     "FLASH_ATTN_MLA", True, True),
    ({"use_sparse": True, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64},
     "FLASHMLA_SPARSE", True, False),
    ({"use_sparse": True, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64},
     "FLASHINFER_MLA_SPARSE_SM120", False, False),
    ({"use_sparse": True, "qk_nope_head_dim": 256, "qk_rope_head_dim": 0, "v_head_dim": 256,
      "kv_cache_dtype": "fp8"}, "FLASHMLA_SPARSE", False, False),
    ({"use_sparse": True, "qk_nope_head_dim": 256, "qk_rope_head_dim": 0, "v_head_dim": 256,
      "kv_cache_dtype": "nvfp4_ds_mla"}, "FLASHMLA_SPARSE", True, False),
])
def test_when_a_layer_consults_the_prefill_selector(facts: dict[str, Any], decode: str, consulted: bool,
                                                    fatal: bool) -> None:
    """mla_attention.py:622-655: sparse impls without a dense-MHA prefill never ask; a
    sparse layer falls back to its top-k path when nothing is valid (a warning)."""
    catalog = load_catalog()
    engine = catalog.engine(ENGINE)
    result = select_mla_prefill({"cc": 90, "dtype": "bfloat16", "use_mla": True, **facts}, engine,
                                decode_backend=decode, catalog=catalog)
    assert result.consulted is consulted
    assert result.fatal is fatal
    if consulted and result.error is not None and not fatal:
        assert result.warning is not None and result.warning.code == "MP012"


def test_data_loads_and_lists_every_registry_member() -> None:
    catalog = load_catalog()
    data = load_mla_prefill(catalog.engine(ENGINE), catalog)
    assert data is not None
    assert [b.name for b in data.backends] == ["FLASH_ATTN", "FLASHINFER", "TRTLLM_RAGGED", "TOKENSPEED_MLA",
                                               "ROCM_AITER_FA", "CPU", "ZEN_CPU", "CUSTOM"]
