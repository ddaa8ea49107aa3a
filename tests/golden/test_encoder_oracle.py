"""The multimodal encoder's start-up as vLLM answers it, in every release recorded.

The expected answers are vLLM's own (``tests/golden/oracle/vllm-<version>/encoder.json.gz``,
written by ``tools/encoder_oracle.py`` with each release's oracle interpreter): the ViT
attention backend ``get_vit_attn_backend`` returns for each emulated capability, head
size and dtype, its assertion for an explicit ``--mm-encoder-attn-backend``, and for each
multimodal config the processing info's tokens per item, the prefix-LM flag, the floor
of vLLM's raise of the default ``max_num_batched_tokens`` and ``compute_mm_encoder_budget``'s
refusal or budget, and the profile run's encoder pass (``MultiModalBudget``: the
modality, the items per batch, the encoder budget). The data compared is each
release's own ``schemas/engines/vllm-<version>/encoder.yaml`` (inheritance applied):
every profiled release is recorded and answers as its data states.
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
    profile_run_items,
    vit_backend,
    vit_refusal,
)

ROOT = Path(__file__).parent / "oracle"
REPO = Path(__file__).resolve().parents[2]


def _golden_files() -> list[Path]:
    return sorted(ROOT.glob("vllm-*/encoder.json.gz"))


@cache
def _answers(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def _data(path: Path) -> EncoderData:
    """The encoder data of the release ``path`` records."""
    data = encoder_data(load_catalog(), "vllm==" + _answers(path)["vllm_version"])
    assert data is not None
    return data


def _cc(capability: str) -> int:
    major, minor = capability.split(".")
    return int(major) * 10 + int(minor)


def _raw(row: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((REPO / row["config"]).read_text(encoding="utf-8"))
    return raw


def test_every_profiled_release_is_recorded_with_its_own_data() -> None:
    catalog = load_catalog()
    versions = {path.parent.name for path in _golden_files()}
    assert {"vllm-" + name.split("==")[1] for name in catalog.engine_names} <= versions
    for path in _golden_files():
        data = _data(path)
        assert data.engine == "vllm==" + _answers(path)["vllm_version"], path
        assert _answers(path).get("budget") is not None, path  # the budget harness ran


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.parent.name)
def test_vit_backend_is_vllms(path: Path) -> None:
    data = _data(path)
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
    catalog, data = load_catalog(), _data(path)
    for row in _answers(path)["vit"]["explicit"]:
        if row["error"] == "not an AttentionBackendEnum member":
            continue
        issue = vit_refusal(catalog, data, row["choice"], _cc(row["capability"]))
        if row["error"] is None:
            assert issue is None and row["backend"] == row["choice"], row
        else:
            assert issue is not None and issue.message == row["error"], row


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.parent.name)
def test_the_backend_names_are_vllms(path: Path) -> None:
    """The names --mm-encoder-attn-backend takes: every AttentionBackendEnum member of
    the release."""
    answers = _answers(path)["vit"]
    assert list(_data(path).vit_attention.enum_members) == answers["enum_members"]


def _budget_rows() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, row) for path in _golden_files()
            for row in _answers(path).get("budget") or () if "harness_error" not in row]


def _row_id(value: object) -> str:
    return value.parent.name if isinstance(value, Path) else str(value["id"])  # type: ignore[index]


def _vllm_tokens(row: dict[str, Any]) -> dict[str, int] | None:
    """The tokens per item vLLM's encoder budget takes (``MultiModalBudget``; the records
    before it was asked: the processing info's answer)."""
    if "budget_tokens" in row:
        tokens: dict[str, int] | None = row["budget_tokens"]["tokens"]
        return tokens
    return row.get("max_tokens_per_item")  # type: ignore[no-any-return]  # None: not multimodal there


@pytest.mark.parametrize(("path", "row"), _budget_rows(), ids=_row_id)
def test_tokens_per_item_and_the_budget_check_are_vllms(path: Path, row: dict[str, Any]) -> None:
    release = path.parent.name
    catalog, data = load_catalog(), _data(path)
    raw, kwargs = _raw(row), row["kwargs"]
    if not row["is_multimodal_model"]:  # the release has no multimodal model of the config
        assert data.budget.tokens_per_item.get(str(raw.get("model_type"))) is None, release
        return
    limits = kwargs.get("limit_mm_per_prompt", {})
    processor = kwargs.get("mm_processor_kwargs", {})
    tokens, gaps = max_tokens_per_item(data, raw, limit_mm_per_prompt=limits,
                                       mm_processor_kwargs=processor,
                                       max_model_len=row["max_model_len"])
    vllms = _vllm_tokens(row)
    family = data.budget.tokens_per_item.get(str(raw.get("model_type")))
    if "budget_tokens" not in row and family is not None and not family.from_info:
        # recorded before the budget's own count was asked: the processing info has none
        # for a family vLLM counts by its dummy inputs, and no budget was checked
        assert vllms is None and not row["budget_check"], release
        return
    if vllms is None or tokens is None:
        assert tokens == vllms, release
    else:  # every modality vLLM counts: equal, or left out with a gap that names it
        for modality, count in vllms.items():
            if modality in tokens:
                assert tokens[modality] == count, (release, modality)
            else:
                assert any(gap.startswith(modality) for gap in gaps), (release, modality, gaps)
        assert set(tokens) <= set(vllms), release
    assert is_mm_prefix_lm(data.budget, raw) == row["is_mm_prefix_lm"]
    every, every_gaps = max_tokens_per_item(data, raw, limit_mm_per_prompt=limits,
                                            mm_processor_kwargs=processor, every_modality=True,
                                            max_model_len=row["max_model_len"])
    floor = row["default_raise_floor"]
    if floor is None:
        assert every is None
    elif every is not None and floor[1] not in every:  # the largest one is not modelled, named
        assert any(gap.startswith(floor[1]) for gap in every_gaps), (release, floor)
    else:
        assert every is not None and max(every.values()) == floor[0]
        assert max(every, key=every.__getitem__) == floor[1]
    if tokens != vllms:  # a modality not modelled: the budget check is not compared
        return
    for batched, answer in row["budget_check"].items():
        report = encoder_report(
            catalog, data, raw, cc=90, dtype="bfloat16", model_name=row["id"],
            mm_encoder_attn_backend=None, limit_mm_per_prompt=limits,
            mm_processor_kwargs=processor, disable_chunked_mm_input=True,
            max_num_batched_tokens=int(batched), default_max_num_batched_tokens=8192,
            max_model_len=row["max_model_len"])
        assert report is not None
        refusals = [i.message for i in report.issues if i.code == data.budget.refusal_code]
        if answer["error"] is None:
            assert not refusals and report.encoder_cache_size == answer["encoder_cache_size"]
        else:
            assert refusals == [answer["error"]], release


def test_every_family_with_a_vision_encoder_has_recorded_tokens() -> None:
    """Each multimodal model type the encoder data maps has vLLM's tokens per item
    recorded in the newest release, but Kimi-K2.5 (its image processor is the checkpoint's
    remote code)."""
    catalog = load_catalog()
    newest = max(catalog.engine_names, key=lambda name: tuple(
        int(part) for part in name.split("==")[1].split(".")))
    data = encoder_data(catalog, newest)
    assert data is not None
    assert set(data.encoders) - set(data.budget.tokens_per_item) == {"kimi_k25"}
    answers = _answers(ROOT / ("vllm-" + newest.split("==")[1]) / "encoder.json.gz")
    recorded = {str(_raw(row).get("model_type")) for row in answers["budget"]
                if _vllm_tokens(row)}
    assert set(data.budget.tokens_per_item) <= recorded


@pytest.mark.parametrize(("path", "row"), [(p, r) for p, r in _budget_rows() if r.get("profile_run")],
                         ids=_row_id)
def test_the_profile_runs_encoder_pass_is_vllms(path: Path, row: dict[str, Any]) -> None:
    """``MultiModalBudget`` as the profile run builds it: the modality encoded, how many
    items of it, the encoder budget; and its refusal where one item does not fit."""
    catalog, data = load_catalog(), _data(path)
    raw, kwargs = _raw(row), row["kwargs"]
    limits = kwargs.get("limit_mm_per_prompt", {})
    modelled, _ = max_tokens_per_item(data, raw, limit_mm_per_prompt=limits,
                                      mm_processor_kwargs=kwargs.get("mm_processor_kwargs", {}),
                                      max_model_len=row["max_model_len"])
    runs = [*row["profile_run"].items(), *row.get("profile_run_chunked", {}).items()]
    for batched, answer in runs:
        if answer["error"] is not None:
            if modelled != _vllm_tokens(row):  # a modality not modelled (named): no report
                continue
            report = encoder_report(
                catalog, data, raw, cc=90, dtype="bfloat16", model_name=row["id"],
                mm_encoder_attn_backend=None, limit_mm_per_prompt=limits,
                mm_processor_kwargs=kwargs.get("mm_processor_kwargs", {}),
                disable_chunked_mm_input=True, max_num_batched_tokens=int(batched),
                default_max_num_batched_tokens=8192, max_model_len=row["max_model_len"],
                max_num_seqs=256)
            assert report is not None and report.profile_run is None
            assert [i.message for i in report.issues] == [answer["error"]]
            continue
        tokens = _vllm_tokens(row)
        assert tokens is not None
        got = profile_run_items(data.budget, tokens,
                                max_num_batched_tokens=int(batched), limit_mm_per_prompt=limits,
                                max_model_len=answer["max_model_len"],
                                max_num_seqs=answer["max_num_seqs"])
        modality = answer["modality"]
        assert got == (modality, answer["max_items_per_batch"][modality],
                       answer["encoder_budget"]), (path.parent.name, batched)
        assert answer["encoder_budget"] == min(answer["encoder_compute_budget"],
                                               answer["encoder_cache_size"])


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.parent.name)
def test_every_recorded_family_of_a_release_has_vllms_answer_there(path: Path) -> None:
    """A family whose tokens a release's data states as recorded has vLLM's answer in that
    release's own record (an older release's row is not inherited unchecked: a release
    without one patches the row to null, a notice)."""
    data = _data(path)
    recorded = {str(_raw(row).get("model_type")) for row in _answers(path).get("budget") or ()
                if "harness_error" not in row and _vllm_tokens(row)}
    stated = {model_type for model_type, family in data.budget.tokens_per_item.items()
              if family is not None and family.recorded is not None}
    assert stated <= recorded, sorted(stated - recorded)


def test_a_family_not_recorded_in_a_release_is_not_modelled_there() -> None:
    """A family without vLLM's answer in a release (Aria in 0.26.0: the harness's
    transformers refuses the processor cache's text-only call there) has no row: no tokens
    per item, whatever a newer release recorded."""
    catalog = load_catalog()
    data = encoder_data(catalog, "vllm==0.26.0")
    assert data is not None and data.budget.tokens_per_item.get("aria") is None
    assert all("harness_error" in row for row in _answers(ROOT / "vllm-0.26.0" / "encoder.json.gz")["budget"]
               if row["id"] == "aria")
    raw = _raw({"config": "tests/fixtures/hf_configs/synthetic/AriaForConditionalGeneration.json"})
    assert max_tokens_per_item(data, raw, limit_mm_per_prompt={}, mm_processor_kwargs={}) == (None, [])


def test_a_recorded_count_holds_for_the_recorded_architecture_only() -> None:
    """InternVL's config (internvl_chat) is read by other model classes with processing
    infos of their own: the recorded count is stated for InternVLChatModel alone."""
    data = encoder_data(load_catalog(), "vllm==0.33.0")
    assert data is not None
    raw = _raw({"config": "tests/fixtures/processors/OpenGVLab--InternVL3-1B/config.json"})
    tokens, gaps = max_tokens_per_item(data, raw, limit_mm_per_prompt={}, mm_processor_kwargs={},
                                       max_model_len=65536)
    assert tokens == {"image": 3328, "video": 62208} and not gaps
    other = {**raw, "architectures": ["SkyworkR1VChatModel"]}
    tokens, gaps = max_tokens_per_item(data, other, limit_mm_per_prompt={}, mm_processor_kwargs={},
                                       max_model_len=65536)
    assert tokens == {} and len(gaps) == 2 and all("architectures" in gap for gap in gaps)
