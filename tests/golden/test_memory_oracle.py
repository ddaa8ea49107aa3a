"""vLLM 0.33.0's own ``check_enough_kv_cache_memory`` answers (tools/memory_oracle.py,
tests/golden/oracle/vllm-0.33.0/memory-fit.jsonl.gz) against ``selector.memory.kv_fit``
and the MM001 / MM002 messages, word for word, without vLLM installed."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from selector.catalog import load_catalog
from selector.kv import KVOptions, plan_model
from selector.memory import format_gib, kv_fit, startup_profile
from selector.models import load_model

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "oracle" / "vllm-0.33.0" / "memory-fit.jsonl.gz"


def _answers() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _fits(answers: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], tuple[str, int],
                                                          Any, KVOptions, Any]]:
    """Each answer with the tool's plan (one per preset and length, as the recorder
    planned it: tools/kv_oracle_backends.py SCENARIO) and its fit check on vLLM's memory."""
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from kv_oracle_backends import SCENARIO, SET  # type: ignore[import-not-found]

    plans: dict[tuple[str, int], Any] = {}
    for answer in answers:
        key = (answer["preset"], answer["max_model_len"])
        if key not in plans:
            options = KVOptions(**{**SCENARIO, "max_model_len": key[1]})
            plans[key] = (plan_model(load_model(key[0]), SET, (options).for_engine(load_catalog().engine())), options)
        plan, options = plans[key]
        specs = [e.spec for e in plan.entries if e.spec.kind != "encoder_only_attention"]
        yield answer, key, plan, options, kv_fit(
            specs, available_bytes=answer["available"],
            pool_block_bytes=plan.capacity.bytes_per_block,
            max_model_len=key[1], in_flight_tokens=options.max_in_flight_tokens)


def test_fit_check_matches_vllm() -> None:
    catalog = load_catalog()
    memory = startup_profile(catalog, "vllm==0.33.0").memory
    answers = _answers()
    assert len(answers) == 320
    for answer, key, _plan, _options, fit in _fits(answers):
        mine: str | None = None
        if fit.outcome == "no_memory":
            mine = catalog.code(memory.no_memory_code).message
        elif fit.outcome == "too_long":
            estimated = (memory.estimated_max_len.format(estimated=fit.estimated_max_len)
                         if fit.estimated_max_len > 0 else "")
            mine = catalog.code(memory.too_long_code).message.format(
                max_model_len=key[1], needed_gib=format_gib(fit.needed_bytes),
                available_gib=format_gib(fit.check_bytes), estimated_msg=estimated)
        assert mine == answer["vllm"], (key, answer["available"])


def test_auto_fit_matches_vllm() -> None:
    """``--max-model-len auto`` / -1: the length vLLM 0.33.0's ``_auto_fit_max_model_len``
    sets for each available-memory figure (the fit check's estimate on the memory less
    the null block), its log line word for word, or its refusal (MM006)."""
    from selector.memory.startup import auto_fit_log, auto_fit_tokens

    catalog = load_catalog()
    profile = startup_profile(catalog, "vllm==0.33.0")
    auto = profile.auto_fit()
    assert auto is not None
    refusal = catalog.code(auto.code).message
    for answer, key, plan, options, fit in _fits(_answers()):
        fitted = auto_fit_tokens(plan, fit.check_bytes, key[1], options.max_in_flight_tokens)
        if not fitted:
            assert answer["auto_fit"] == refusal, (key, answer["available"])
            continue
        assert answer["auto_fit"] == fitted, (key, answer["available"])
        assert auto_fit_log(profile, original=key[1], fitted=fitted,
                            check_bytes=fit.check_bytes) == answer["auto_fit_log"]
