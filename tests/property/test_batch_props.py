"""The batch evaluator (``selector.solver.batch``) equals the per-request path.

For random batches of every engine profile (MLA and not, explicit backends, values
that cannot be merged into classes, values that raise, inputs that are not valid
configs), ``evaluate_batch`` gives exactly ``select`` per request, and ``sweep_lines``
gives exactly ``sweep_lines_per_config`` line for line.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.solver import SelectionOutcome, select
from selector.solver.batch import BatchEvaluator, evaluate_batch, evaluator_for
from selector.solver.compiled import compiled_for
from selector.sweep import sweep_lines, sweep_lines_per_config
from tests.property.strategies import facts

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import make_sample

CATALOG = load_catalog()
ENGINES = sorted(CATALOG.engines)
ODD_VALUES = [128.0, -0.0, 0.0, True, 1, [64], {"a": 1}, "128", None, 2**70, float("nan")]
"""Values of other types than the data expects: floats equal to ints, bools equal to
ints, lists and dicts (never merged into a class; some make the evaluator raise)."""


def _outcome(outcome: SelectionOutcome) -> tuple[Any, ...]:
    return outcome.reasons, outcome.order, outcome.selected, outcome.error


def _per_request(engine_name: str, batch: list[dict[str, Any]],
                 forced: list[str | None]) -> list[tuple[Any, ...]] | type[BaseException]:
    compiled = compiled_for(engine_name, catalog=load_catalog())
    out = []
    for one, backend in zip(batch, forced, strict=True):
        try:
            out.append(_outcome(select(compiled, one, backend)))
        except Exception as exc:  # the per-request path raises: so must the batch
            return type(exc)
    return out


@st.composite
def batches(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]], list[str | None]]:
    engine_name = draw(st.sampled_from(ENGINES))
    engine = CATALOG.engine(engine_name)
    defaults = compiled_for(engine_name, catalog=load_catalog()).defaults
    names = sorted(engine.backends)
    batch = []
    forced: list[str | None] = []
    for request in draw(st.lists(facts(), min_size=1, max_size=30)):
        full = {**defaults, **{k: v for k, v in request.items() if k in defaults}}
        if draw(st.integers(0, 9)) == 0:  # a value of an unexpected type
            full[draw(st.sampled_from(sorted(defaults)))] = draw(st.sampled_from(ODD_VALUES))
        batch.append(full)
        forced.append(draw(st.none() | st.sampled_from(names)))
    return engine_name, batch, forced


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_evaluate_batch_equals_select_per_request(
        case: tuple[str, list[dict[str, Any]], list[str | None]]) -> None:
    engine_name, batch, forced = case
    expected = _per_request(engine_name, batch, forced)
    engine = CATALOG.engine(engine_name)
    if isinstance(expected, type):
        with pytest.raises(expected):
            evaluate_batch(engine, batch, forced, catalog=load_catalog())
        return
    assert [_outcome(o) for o in evaluate_batch(engine, batch, forced, catalog=load_catalog())] == expected
    # a fresh evaluator (no classes or outcomes remembered) and the reason lists as well
    fresh = BatchEvaluator(compiled_for(engine_name, catalog=load_catalog())).evaluate(batch, forced)
    assert [_outcome(o) for o in fresh] == expected


def test_a_batch_too_varied_for_byte_columns_is_split_and_still_exact() -> None:
    """More than 256 distinct values of an input read as a whole (it cannot be merged
    into classes): the batch is halved until it fits, then request by request."""
    engine_name = ENGINES[-1]
    defaults = compiled_for(engine_name, catalog=load_catalog()).defaults
    batch = [{**defaults, "cc": 90, "dtype": "bfloat16", "model_present": True, "model_num_q_heads": 8 * (i + 1),
              "model_num_kv_heads": 8, "use_mla": True, "head_size": 576,
              "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 1 + i}
             for i in range(700)]
    forced: list[str | None] = [None] * len(batch)
    got = BatchEvaluator(compiled_for(engine_name, catalog=load_catalog())).evaluate(batch, forced)
    assert [_outcome(o) for o in got] == _per_request(engine_name, batch, forced)


def _mutated(rng: random.Random, config: dict[str, Any]) -> str:
    """A config line, now and then broken the ways real input files are."""
    roll = rng.random()
    if roll < 0.03:
        return "not json {"
    if roll < 0.06:
        return json.dumps({**config, "unknown_field": 1})
    if roll < 0.09:
        return json.dumps({k: v for k, v in config.items() if k != "device_capability"})
    if roll < 0.12:
        return json.dumps({**config, "head_size": rng.choice([128.0, "128", True, -4])})
    if roll < 0.15:
        return json.dumps({**config, "block_size": rng.choice([0, 16.0, [16]])})
    if roll < 0.17:
        return json.dumps({**config, "attention_backend": rng.choice(["auto", "nope", "flash_attn"])})
    if roll < 0.19:
        return ""
    if roll < 0.25:
        return json.dumps({**config, "id": rng.choice([1, "x", None, [1, 2]])})
    return json.dumps(config)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ENGINES), st.sampled_from(["standard", "mla", "all"]),
       st.integers(0, 2**32 - 1), st.integers(1, 64), st.integers(1, 120))
def test_sweep_lines_equal_the_per_config_path(engine_name: str, family: str, seed: int,
                                               batch_size: int, count: int) -> None:
    version = engine_name.split("==")[1]
    if version not in make_sample.VERSIONS:
        version = make_sample.VERSIONS[-1]
    rng = random.Random(seed)
    configs = make_sample.generate(family, count, seed, version)
    lines = [_mutated(rng, config) for config in configs]
    engine = CATALOG.engine(engine_name)
    expected = list(sweep_lines_per_config(lines, engine, catalog=load_catalog()))
    assert list(sweep_lines(lines, engine, batch_size=batch_size, catalog=load_catalog())) == expected


def test_sweep_evaluates_through_the_batch_evaluator(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = CATALOG.engine()
    calls: list[int] = []
    original = BatchEvaluator.evaluate_keyed

    def counted(self: BatchEvaluator, batch: Any, forced: Any = None) -> Any:
        calls.append(len(batch))
        return original(self, batch, forced)

    monkeypatch.setattr(BatchEvaluator, "evaluate_keyed", counted)
    lines = [json.dumps(c) for c in make_sample.generate("standard", 50, 1)]
    out = list(sweep_lines(lines, engine, batch_size=20, catalog=load_catalog()))
    assert len(out) == 50 and sum(calls) == 50 - sum(
        1 for c in map(json.loads, lines) if c.get("attention_backend")
        and engine.backend(c["attention_backend"]).name not in evaluator_for(
            engine, tuple(dict.fromkeys([*engine.auto_backends(), *engine.profile.reported_backends])), catalog=load_catalog()
        ).backends)
    assert len(calls) >= 3


@pytest.mark.parametrize("engine_name", ENGINES)
def test_every_profile_runs_column_wise(engine_name: str) -> None:
    """The generated evaluator of every shipped profile is of the subset the column-wise
    run covers (else sweep would quietly fall back to the per-config speed)."""
    assert evaluator_for(CATALOG.engine(engine_name), catalog=load_catalog()).program.supported
