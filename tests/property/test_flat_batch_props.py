"""The batch reader of flat configs (``FlatEvaluator.read_batch``, column-wise) equals the
per-config reader (``FlatEvaluator.request``).

Hypothesis draws batches of flat configs, valid and broken the ways input files are (a
field of another type, a value out of range, a missing or unknown field, a vocabulary fact
of the profile, a pinned backend, a model object, something that is not an object); every
config gives through the batch reader exactly the request facts (values and types), the
pinned backend or the input error (its text) of the per-config reader, and ``sweep`` gives
the same lines both ways.  The batch path's JSON parser gives what ``json.loads`` gives
for every text it accepts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.inputs.flat import FLAT_FIELDS
from selector.pipeline.flat import FlatEvaluator, FlatRequest
from selector.sweep import _json_fast, sweep_lines, sweep_lines_per_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import make_sample

CATALOG = load_catalog()
ENGINES = sorted(CATALOG.engines)
BASES = [*make_sample.generate("standard", 40, 7), *make_sample.generate("mla", 40, 8),
         *make_sample.generate("all", 40, 9)]
"""Valid configs to start from (each drawn config is one of these, perhaps changed)."""

ODD = st.one_of(
    st.none(), st.booleans(), st.integers(-4, 1100), st.sampled_from([0, 2**70, -1]),
    st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([16.0, 128.0, -0.0]),
    st.sampled_from(["", "auto", "AUTO", "9.0", "sm_90", "10", "x", "bf16", "Half", "fp8",
                     "decoder", "encoder_only", "FLASH_ATTN", "flash_attn", "triton_attn",
                     "FLASHMLA", "nope", "bfloat16", "float32"]),
    st.text(max_size=4),
    st.lists(st.integers(0, 12), max_size=3),
    st.dictionaries(st.sampled_from(["num_attention_heads", "num_kv_heads", "hf_text_config",
                                     "x"]), st.integers(-1, 64), max_size=3),
)
"""Values of every JSON type, meaningful ones among them."""

FIELDS = sorted(FLAT_FIELDS | {"unknown_field", "tp_size", "env_fa3_built", "use_dcp"})
"""The flat fields, an unknown one and a few vocabulary facts."""


@st.composite
def configs(draw: st.DrawFn) -> Any:
    config: dict[str, Any] = dict(draw(st.sampled_from(BASES)))
    roll = draw(st.integers(0, 19))
    if roll == 0:  # not an object
        return draw(st.sampled_from([[1, 2], 3, "x", None, True]))
    for _ in range(draw(st.integers(0, 2)) if roll < 14 else 0):
        field = draw(st.sampled_from(FIELDS))
        if draw(st.integers(0, 4)) == 0:
            config.pop(field, None)
        else:
            config[field] = draw(ODD)
    if roll == 14:
        config["attention_backend"] = draw(st.sampled_from(
            ["auto", "FLASH_ATTN", "flash_attn", "TRITON_ATTN", "FLASHMLA", "FLASHINFER", "nope"]))
    if roll == 15:
        config["model"] = {"num_attention_heads": draw(st.sampled_from([8, 16, 32, 0])),
                           "num_kv_heads": draw(st.sampled_from([1, 2, 8, 3])),
                           "hf_text_config": draw(st.sampled_from(
                               [{}, {"kv_lora_rank": 512, "qk_rope_head_dim": 64},
                                {"attn_logit_softcapping": 30.0}, []]))}
    return config


def _typed(facts: Any) -> dict[str, tuple[type, Any]]:
    """A request's facts with their types (``True == 1``: a dict comparison alone would pass)."""
    return {name: (type(value), value) for name, value in dict(facts).items()}


def _one(evaluator: FlatEvaluator, config: Any) -> tuple[Any, ...]:
    try:
        request = evaluator.request(config)
    except InputError as error:
        return ("error", error.render())
    return ("read", _typed(request.facts.stated), request.forced)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ENGINES), st.lists(configs(), min_size=1, max_size=25))
def test_the_batch_reader_equals_the_per_config_reader(engine_name: str, batch: list[Any]) -> None:
    evaluator = FlatEvaluator(CATALOG.engine(engine_name), catalog=load_catalog())
    expected = [_one(evaluator, config) for config in batch]
    read = evaluator.read_batch(batch)
    assert len(read.rows) == len(batch) and len(read.columns) == len(read.forced)
    got = []
    for row in read.rows:
        if isinstance(row, InputError):
            got.append(("error", row.render()))
        elif isinstance(row, FlatRequest):
            got.append(("read", _typed(row.facts.stated), row.forced))
        else:
            got.append(("read", _typed(read.columns[row]), read.forced[row]))
    assert got == expected
    # the configs read column-wise are the batch's, in order, each once
    indices = [row for row in read.rows if isinstance(row, int)]
    assert indices == list(range(len(read.columns)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ENGINES), st.lists(configs(), min_size=1, max_size=30), st.integers(1, 12))
def test_sweep_gives_the_same_lines_for_drawn_configs(engine_name: str, batch: list[Any],
                                                      batch_size: int) -> None:
    lines = [json.dumps(config) for config in batch]
    engine = CATALOG.engine(engine_name)
    assert list(sweep_lines(lines, engine, batch_size=batch_size, catalog=load_catalog())) == list(
        sweep_lines_per_config(lines, engine, catalog=load_catalog()))


def test_the_usual_configs_are_read_column_wise() -> None:
    """The standard sample is read column-wise but for the configs pinning a backend that
    automatic selection does not evaluate (else sweep would quietly lose its speed)."""
    evaluator = FlatEvaluator(CATALOG.engine(), catalog=load_catalog())
    batch = make_sample.generate("standard", 300, 1)
    read = evaluator.read_batch(batch)
    alone = [config for config, row in zip(batch, read.rows, strict=True) if not isinstance(row, int)]
    assert all(config.get("attention_backend") and
               CATALOG.engine().backend(config["attention_backend"]).name not in evaluator.evaluated
               for config in alone)
    assert len(alone) < 30


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-2**80, 2**80) | st.floats()
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.booleans())
def test_the_fast_json_parser_reads_what_json_reads(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert repr(_json_fast(text)) == repr(json.loads(text))


JSON_CHARS = [*'{}[]",:0123456789.eE+-tfnrulasNIiy \\/\tu\x00\x1f', "\ud800", "é"]
"""Characters of JSON texts, and some that JSON refuses where they stand."""


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(JSON_CHARS), max_size=16)
       | st.builds(lambda v, cut: json.dumps(v)[:cut], JSON_VALUES, st.integers(0, 30)))
def test_the_fast_json_parser_accepts_only_what_json_accepts(text: str) -> None:
    try:
        fast = _json_fast(text)
    except Exception:  # refused: the line is read by json itself
        return
    assert repr(fast) == repr(json.loads(text))
