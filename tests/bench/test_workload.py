"""The workload model and parser: shapes, defaults, and bad files -> exit 2 naming file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from selector.bench.workload import (
    MAX_TOKENS_PER_SHAPE,
    BenchWorkload,
    default_workload,
    load_workload,
    parse_workload,
)
from selector.errors import ExitCode, InputError
from selector.smoke.batch import pages_needed

REPO = Path(__file__).resolve().parents[2]


def test_example_workload_is_the_acceptance_grid() -> None:
    workload = load_workload(REPO / "examples" / "workloads" / "llama-chat.yaml")
    names = [shape.name for shape in workload.shapes()]
    assert names[:9] == [f"decode {b}x{c}" for b in (1, 32, 128) for c in ("1k", "4k", "16k")]
    assert names[9:] == ["prefill 1x8k", "mixed 32x4k+2k"]
    assert workload.settings.flush_l2 and workload.settings.graphs == "auto"


def test_default_workload_has_decode_prefill_and_mixed() -> None:
    kinds = {shape.kind for shape in default_workload().shapes()}
    assert kinds == {"decode", "prefill", "mixed"}


def test_decode_shape_holds_context_tokens_after_the_step() -> None:
    workload = parse_workload({"decode": {"batch_sizes": [3], "context_lengths": [100]}})
    (shape,) = workload.shapes()
    assert shape.requests == [(99, 1)] * 3
    assert shape.kv_tokens == 300 and shape.new_tokens == 3
    batch = shape.batch(16, seed=0)
    assert [r.seq_len for r in batch.requests] == [100] * 3
    pages = [p for r in batch.requests for p in r.block_ids]
    assert len(pages) == len(set(pages)) == 3 * pages_needed(100, 16)
    assert 0 not in pages  # page 0 is vLLM's null block


def test_mixed_step_puts_running_decodes_first() -> None:
    workload = parse_workload({"mixed": {"decodes": 2, "decode_context": 50,
                                         "prefill_lengths": [30, 7]}})
    (shape,) = workload.shapes()
    assert shape.name == "mixed 2x50+30+7"
    assert shape.requests == [(49, 1), (49, 1), (0, 30), (0, 7)]


def test_json_round_trip_of_a_shape() -> None:
    shape = default_workload().shapes()[-1]
    assert type(shape).from_json(json.loads(json.dumps(shape.to_json()))) == shape


def test_yaml_and_json_files(tmp_path: Path) -> None:
    data = {"decode": {"batch_sizes": [8], "context_lengths": [2048]}, "settings": {"seed": 3}}
    for suffix, text in ((".yaml", yaml.safe_dump(data)), (".json", json.dumps(data))):
        path = tmp_path / f"w{suffix}"
        path.write_text(text)
        assert load_workload(path).settings.seed == 3


@pytest.mark.parametrize(("text", "field", "fragment"), [
    ("decode: {batch_sizes: [0], context_lengths: [1]}\n", "decode.batch_sizes[0]", "greater"),
    ("decode: {batch_sizes: [1], context_length: [1]}\n", "decode.context_length",
     "unknown field"),
    ("prefil: {lengths: [8]}\n", "prefil", "unknown field"),
    ("prefill: {lengths: ['8k']}\n", "prefill.lengths[0]", "integer"),
    ("prefill: {lengths: [8.5]}\n", "prefill.lengths[0]", "integer"),
    ("prefill: {lengths: []}\n", "prefill.lengths", "at least 1"),
    ("mixed: {decodes: true}\n", "mixed.decodes", "integer"),
    ("settings: {min_repeats: 50, max_repeats: 10}\ndecode: {batch_sizes: [1], "
     "context_lengths: [8]}\n", "settings", "below min_repeats"),
    ("settings: {graphs: sometimes}\nprefill: {lengths: [8]}\n", "settings.graphs", "auto"),
    ("name: x\n", None, "no decode, prefill or mixed"),
    (f"decode: {{batch_sizes: [4096], context_lengths: [{1 << 20}]}}\n", None,
     str(MAX_TOKENS_PER_SHAPE)),
])
def test_bad_fields_name_file_and_field(tmp_path: Path, text: str, field: str | None,
                                        fragment: str) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        load_workload(path)
    error = raised.value
    assert error.exit_code == ExitCode.USAGE
    assert error.file == str(path)
    assert error.field == field
    assert fragment in error.render()


def test_unknown_field_has_a_suggestion_and_a_line(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("name: x\ndecode:\n  batch_sizes: [1]\n  context_lenghts: [8]\n")
    with pytest.raises(InputError) as raised:
        load_workload(path)
    assert raised.value.line == 4
    assert "context_lengths" in (raised.value.hint or "")


@pytest.mark.parametrize(("content", "fragment"), [
    (None, "file not found"),
    (b"\xff\xfe", "not UTF-8"),
    (b"decode: [", "invalid YAML"),
    (b"", "empty"),
    (b"- 1\n- 2\n", "mapping"),
])
def test_unreadable_files(tmp_path: Path, content: bytes | None, fragment: str) -> None:
    path = tmp_path / "w.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError) as raised:
        load_workload(path)
    assert fragment in str(raised.value)
    assert str(path) in str(raised.value)


def test_bad_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text('{"decode":\n {"batch_sizes": [1],}}')
    with pytest.raises(InputError) as raised:
        load_workload(path)
    assert raised.value.line == 2


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 1 << 30), st.floats(allow_nan=True),
                     st.text(max_size=8))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)
_keys = st.sampled_from(["decode", "prefill", "mixed", "settings", "name", "batch_sizes",
                         "context_lengths", "lengths", "weight", "decodes", "extra"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=5))
def test_fuzzed_workloads_parse_or_raise_input_error(data: dict[str, object]) -> None:
    try:
        workload = parse_workload(data, source="fuzz.yaml")
    except InputError as error:
        assert error.file == "fuzz.yaml"
        assert error.exit_code == ExitCode.USAGE
    else:
        assert isinstance(workload, BenchWorkload)
        assert workload.shapes()
