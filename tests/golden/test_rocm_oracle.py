"""vLLM's ROCm platform: every release's recorded answers (real ``RocmPlatform`` code,
``tools/rocm_oracle_sample.py``: 10,000 standard + 5,000 MLA configs per release over the
catalog's gfx architectures, AITER installed or not and the ``VLLM_ROCM_*`` switches)
equal the profile's ROCm selection: every backend's reason list (vLLM's strings, in
order), the selected backend and the error text, 100%; and the agreement page
(docs/platforms/rocm-agreement.md) states those counts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from tests.golden.oracle_sweep import sweep_mismatches
from tests.golden.rocm_oracle import ROOT, golden_files, pinned_files, prefill_mismatches, read_cases

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import rocm_agreement

FAMILY_SIZES = {"rocm-standard.jsonl.gz": 10000, "rocm-mla.jsonl.gz": 5000}
NOT_RECORDED: set[str] = set()
"""Profiled releases whose ROCm answers are not recorded yet (each one's ROCm data is
then unchecked, and the agreement page says so)."""


def test_every_profiled_release_has_rocm_answers() -> None:
    have = {p.parent.name.replace("vllm-", "vllm==", 1) for p in golden_files()}
    missing = {n for n in load_catalog().engine_names if n not in have}
    assert missing == NOT_RECORDED, (
        f"ROCm oracle answers missing for {sorted(missing - NOT_RECORDED)} "
        f"(tools/rocm_oracle_sample.py X); recorded now: {sorted(NOT_RECORDED - missing)}")


@pytest.mark.parametrize("path", golden_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rocm_release_agrees_with_vllm(path: Path) -> None:
    engine = path.parent.name.replace("vllm-", "vllm==", 1)
    cases = read_cases(path)
    assert len(cases) == FAMILY_SIZES[path.name]
    assert {c["vllm_version"] for c in cases} == {engine.split("==", 1)[1]}
    counts = rocm_agreement.agreement(path)
    if counts["lists_agree"] == counts["lists"] and \
            counts["selected_agree"] == counts["error_agree"] == counts["configs"]:
        return
    mismatches = sweep_mismatches(rocm_agreement.flat_cases(cases),
                                  load_catalog().engine(engine, "rocm"))
    pytest.fail(f"{counts}; {len(mismatches)} differences, first: "
                + json.dumps(mismatches[0], default=str)[:1500])


def test_the_agreement_page_states_the_counts() -> None:
    page = rocm_agreement.PAGE.read_text(encoding="utf-8")
    assert page == rocm_agreement.page(), "python tools/rocm_agreement.py"


@pytest.mark.parametrize("path", sorted(ROOT.glob("vllm-*/rocm-cases.jsonl.gz")),
                         ids=lambda p: p.parent.name)
def test_named_rocm_cases_agree_with_vllm(path: Path) -> None:
    """The named configs of tools/rocm_acceptance_cases.json (an encoder-decoder model's
    list, the ROCm MLA prefill choice, ...): every reason list, the selection, the error
    and, where vLLM answered it, the MLA prefill choice, as the release recorded them."""
    catalog = load_catalog()
    engine = catalog.engine(path.parent.name.replace("vllm-", "vllm==", 1), "rocm")
    cases = read_cases(path)
    assert sweep_mismatches(rocm_agreement.flat_cases(cases), engine) == []
    assert prefill_mismatches(cases, engine, catalog) == []


NOT_MODELLED: dict[str, str] = {}
"""``AttentionBackendEnum`` members vLLM's ROCm platform validates when pinned but a
release's ROCm profile does not model (no backend file for the platform), with the reason;
their pinned configs are not compared, every other one is (reasons, selection, error:
100%)."""


def _engine_name(path: Path) -> str:
    return path.parent.name.replace("vllm-", "vllm==", 1)


@pytest.mark.parametrize("path", pinned_files(), ids=lambda p: p.parent.name)
def test_pinned_rocm_backends_agree_with_vllm(path: Path) -> None:
    """A backend pinned on an AMD GPU: vLLM's ROCm platform validates it alone
    (``get_attn_backend_cls``, 0.33.0 ``rocm.py:775-840``): its reasons (an
    ``ImportError`` included), the refusal's words, or vLLM's ValueError for a member
    without a class; the profile's ROCm answer equals the recorded one."""
    data = load_catalog().engine(_engine_name(path), "rocm")
    cases = read_cases(path)
    pinned = {c["input"]["attention_backend"] for c in cases}
    unknown = {name for name in pinned if name not in data.backends}
    assert unknown <= set(NOT_MODELLED), f"not modelled and not listed: {sorted(unknown - set(NOT_MODELLED))}"
    compared = [c for c in cases if c["input"]["attention_backend"] not in unknown]
    assert compared
    mismatches = sweep_mismatches(rocm_agreement.flat_cases(compared), data)
    assert mismatches == [], (f"{len(mismatches)} differences, first: "
                              + json.dumps(mismatches[0], default=str)[:1500])


def test_every_unmodelled_pinned_backend_is_unmodelled_somewhere() -> None:
    catalog = load_catalog()
    unknown = {name for path in pinned_files()
               for name in {c["input"]["attention_backend"] for c in read_cases(path)}
               if name not in catalog.engine(_engine_name(path), "rocm").backends}
    assert set(NOT_MODELLED) <= unknown, f"modelled now: {sorted(set(NOT_MODELLED) - unknown)}"


PINNED_NOT_RECORDED: set[str] = set()
"""Profiled releases whose pinned family is not recorded yet (tools/rocm_oracle_sample.py X
--standard 0 --mla 0 --pinned 600)."""


def test_every_profiled_release_has_pinned_rocm_answers() -> None:
    have = {_engine_name(p) for p in pinned_files()}
    missing = set(load_catalog().engine_names) - have
    assert missing == PINNED_NOT_RECORDED, (
        f"pinned answers missing for {sorted(missing - PINNED_NOT_RECORDED)}; "
        f"recorded now: {sorted(PINNED_NOT_RECORDED - missing)}")
