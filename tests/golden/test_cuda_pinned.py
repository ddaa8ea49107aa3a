"""A backend no CUDA priority list holds, pinned on an NVIDIA GPU (``--attention-backend``):
vLLM's CUDA platform validates it alone (0.33.0 ``vllm/platforms/cuda.py:429-449``): its
reasons in vLLM's words, the refusal ("Selected backend ... is not valid for this
configuration. Reason: [...]"), the registry's ValueError for a member without a class, or
the member accepted. The recorded answers (``tools/cuda_pinned_oracle.py``: a dense GQA
layer, KV auto and fp8, an MLA layer, on SM90 and SM100) equal the profile's CUDA answer,
every reason list, the selection and the error text."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from tests.golden.oracle_sweep import sweep_mismatches

ROOT = Path(__file__).resolve().parent / "oracle"
FILES = sorted(ROOT.glob("vllm-*/cuda-pinned.jsonl.gz"))
_FIELDS = ("device_capability", "head_size", "dtype", "kv_cache_dtype", "block_size",
           "use_mla", "attn_type", "attention_backend")

_RELEASES = ("0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0",
             "0.32.0", "0.33.0")
NOT_MODELLED: dict[str, dict[str, str]] = {f"vllm=={v}": {} for v in _RELEASES}
"""release -> pinned members whose CUDA answer the profile does not model yet, with why."""


def _engine(path: Path) -> str:
    return path.parent.name.replace("vllm-", "vllm==", 1)


def read_cases(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def flat_case(case: Mapping[str, Any]) -> dict[str, Any]:
    """One recorded answer in the shape the sweep comparison reads (vLLM's message without
    the exception type the oracle records)."""
    error = case["error"]
    return {"input": {k: case["input"][k] for k in _FIELDS},
            "backends": case["backends"], "selected": case["selected"],
            "error": error.removeprefix("ValueError: ") if error else None}


def test_0_33_0_is_recorded() -> None:
    assert any(p.parent.name == "vllm-0.33.0" for p in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name)
def test_pinned_cuda_backends_agree_with_vllm(path: Path) -> None:
    engine = _engine(path)
    data = load_catalog().engine(engine, "cuda")
    cases = read_cases(path)
    assert {c["vllm_version"] for c in cases} == {engine.split("==", 1)[1]}
    pinned = {c["input"]["attention_backend"] for c in cases}
    listed = {n: why for n, why in NOT_MODELLED.get(engine, {}).items() if n in pinned}
    unknown = {n for n in pinned if n not in data.backends}
    assert unknown == set(listed), (f"not modelled and not listed: {sorted(unknown - set(listed))}; "
                                    f"modelled now: {sorted(set(listed) - unknown)}")
    compared = [flat_case(c) for c in cases if c["input"]["attention_backend"] not in unknown]
    assert compared
    mismatches = sweep_mismatches(compared, data)
    assert mismatches == [], (f"{len(mismatches)} of {len(compared)} differ, first: "
                              + json.dumps(mismatches[:3], default=str)[:2500])


NAMES = sorted(ROOT.glob("vllm-*/attention-backend-names.json"))


@pytest.mark.parametrize("path", NAMES, ids=lambda p: p.parent.name)
def test_a_word_no_enum_member_is_refused_in_vllms_words(path: Path) -> None:
    """``--attention-backend WORD``: argparse takes any string; vLLM converts it at start-up
    (``AttentionConfig.validate_backend_before``): ``auto`` in any case is automatic
    selection, a member in any case is that member, anything else vLLM's ValueError listing
    the release's members, which the tool gives word for word."""
    from selector.inputs.serve.config_flags import backend_name

    catalog = load_catalog()
    data = catalog.engine(_engine(path), "cuda")
    answers = json.loads(path.read_text(encoding="utf-8"))["answers"]
    for answer in answers:
        word = answer["name"]
        if answer["error"] is not None:
            assert data.unknown_backend(word) == (
                f"{data.label} refuses it at start-up: {answer['error']}"), word
            members = answer["error"].rsplit("Valid options are: ", 1)[1].split(", ")
            assert list(data.profile.attention_backend_enum) == members
        else:
            assert backend_name("--attention-backend", word, catalog, data) == answer["backend"], word
