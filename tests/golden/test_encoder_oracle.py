"""The multimodal encoder's start-up as vLLM answers it, in every release recorded.

The expected answers are vLLM's own (``tests/golden/oracle/vllm-<version>/encoder.json.gz``,
written by ``tools/encoder_oracle.py`` with each release's oracle interpreter): the ViT
attention backend ``get_vit_attn_backend`` returns for each emulated capability, head
size and dtype, its assertion for an explicit ``--mm-encoder-attn-backend``, and for each
multimodal config the processing info's tokens per item, the prefix-LM flag, the floor
of vLLM's raise of the default ``max_num_batched_tokens`` and ``compute_mm_encoder_budget``'s
refusal or budget. The data compared is ``schemas/engines/vllm-0.33.0/encoder.yaml``:
every recorded release answers as it states (0.25.1-0.33.0 for the ViT selection;
0.30.0-0.33.0 for the budget, where the oracle environments import those modules).
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.memory.encoder import (
    EncoderData,
    encoder_data,
    encoder_report,
    is_mm_prefix_lm,
    max_tokens_per_item,
    vit_backend,
    vit_refusal,
)

ROOT = Path(__file__).parent / "oracle"
REPO = Path(__file__).resolve().parents[2]
ENGINE = "vllm==0.33.0"


def _golden_files() -> list[Path]:
    return sorted(ROOT.glob("vllm-*/encoder.json.gz"))


@cache
def _answers(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def _data() -> EncoderData:
    data = encoder_data(load_catalog(), ENGINE)
    assert data is not None
    return data


def _cc(capability: str) -> int:
    major, minor = capability.split(".")
    return int(major) * 10 + int(minor)


def _raw(row: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((REPO / row["config"]).read_text(encoding="utf-8"))
    return raw


def test_every_release_with_the_encoder_is_recorded() -> None:
    versions = {path.parent.name for path in _golden_files()}
    assert {"vllm-0.30.0", "vllm-0.31.0", "vllm-0.32.0", "vllm-0.33.0"} <= versions


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.parent.name)
def test_vit_backend_is_vllms(path: Path) -> None:
    data = _data()
    answers = _answers(path)["vit"]
    for row in answers["auto"]:
        assert row["error"] is None, row
        got = vit_backend(data, head_size=row["head_size"], dtype=row["dtype"],
                          cc=_cc(row["capability"]))
        assert got == row["backend"], row
    for capability, supported in answers["supported"].items():
        assert list(data.vit_attention.order(_cc(capability))) == supported, capability


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.parent.name)
def test_explicit_encoder_backend_is_refused_in_vllms_words(path: Path) -> None:
    catalog, data = load_catalog(), _data()
    for row in _answers(path)["vit"]["explicit"]:
        if row["error"] == "not an AttentionBackendEnum member":
            continue
        issue = vit_refusal(catalog, data, row["choice"], _cc(row["capability"]))
        if row["error"] is None:
            assert issue is None and row["backend"] == row["choice"], row
        else:
            assert issue is not None and issue.message == row["error"], row


def test_the_backend_names_are_vllms() -> None:
    """The names --mm-encoder-attn-backend takes: every AttentionBackendEnum member."""
    answers = _answers(ROOT / "vllm-0.33.0" / "encoder.json.gz")["vit"]
    assert list(_data().vit_attention.enum_members) == answers["enum_members"]


def _budget_rows() -> list[tuple[str, dict[str, Any]]]:
    return [(path.parent.name, row) for path in _golden_files()
            for row in _answers(path).get("budget") or () if "harness_error" not in row]


@pytest.mark.parametrize(("release", "row"), _budget_rows(),
                         ids=lambda v: v if isinstance(v, str) else v["id"])
def test_tokens_per_item_and_the_budget_check_are_vllms(release: str, row: dict[str, Any]) -> None:
    catalog, data = load_catalog(), _data()
    raw, kwargs = _raw(row), row["kwargs"]
    limits = kwargs.get("limit_mm_per_prompt", {})
    processor = kwargs.get("mm_processor_kwargs", {})
    tokens, _ = max_tokens_per_item(data, raw, limit_mm_per_prompt=limits,
                                    mm_processor_kwargs=processor)
    assert tokens == row["max_tokens_per_item"]
    assert is_mm_prefix_lm(data.budget, raw) == row["is_mm_prefix_lm"]
    every, _ = max_tokens_per_item(data, raw, limit_mm_per_prompt=limits,
                                   mm_processor_kwargs=processor, every_modality=True)
    floor = row["default_raise_floor"]
    if floor is None:
        assert every is None
    else:
        assert every is not None and max(every.values()) == floor[0]
        assert max(every, key=every.__getitem__) == floor[1]
    for batched, answer in row["budget_check"].items():
        report = encoder_report(
            catalog, data, raw, cc=90, dtype="bfloat16", model_name=row["id"],
            mm_encoder_attn_backend=None, limit_mm_per_prompt=limits,
            mm_processor_kwargs=processor, disable_chunked_mm_input=True,
            max_num_batched_tokens=int(batched), default_max_num_batched_tokens=8192)
        assert report is not None
        refusals = [i.message for i in report.issues if i.code == data.budget.refusal_code]
        if answer["error"] is None:
            assert not refusals and report.encoder_cache_size == answer["encoder_cache_size"]
        else:
            assert refusals == [answer["error"]], release
