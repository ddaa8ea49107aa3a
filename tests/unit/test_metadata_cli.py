"""``attn-select metadata``: output, exit codes, and bad input never tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from selector.cli.metadata import register
from tests.cli_app import command_app

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "batch-seed.json"
BATCHES = REPO / "tests" / "fixtures" / "batches"


def make_app() -> typer.Typer:
    return command_app(register)


APP = make_app()
RUNNER = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = RUNNER.invoke(APP, ["metadata", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"traceback: {result.exception!r}")
    return result.exit_code, result.stdout, result.stderr


def test_flashinfer_json_uses_vllm_and_flashinfer_names() -> None:
    code, out, _ = invoke(str(SEED), "--backend", "flashinfer", "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert document["ok"] is True
    assert document["slot_mapping"] == [175, 80, 81, 82, 83, 192, 193, 194]
    assert document["paged_kv_indptr"] == [0, 8, 9, 12]
    assert document["paged_kv_indices"] == [7, 2, 9, 4, 11, 6, 3, 10, 5, 1, 8, 12]
    assert document["paged_kv_last_page_len"] == [16, 4, 3]
    assert document["qo_indptr"] == [0, 4, 7]
    assert document["permutation"] == [0, 1, 2]
    for name in ("query_start_loc", "seq_lens", "block_table", "num_decodes",
                 "num_decode_tokens", "num_prefills", "num_prefill_tokens"):
        assert name in document


def test_flash_attn_json() -> None:
    code, out, _ = invoke(str(SEED), "--backend", "flash_attn", "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert document["cu_seqlens_q"] == [0, 1, 5, 8]
    assert document["seqused_k"] == [128, 4, 35]
    assert (document["max_q"], document["max_k"]) == (4, 128)


def test_text_format_and_reorder_threshold() -> None:
    code, out, _ = invoke(str(BATCHES / "reordered.json"), "-b", "flashinfer",
                          "--reorder-threshold", "5")
    assert code == 0
    assert "paged_kv_indptr" in out
    assert "all invariants hold" in out


def test_violated_invariant_exits_1_and_names_it() -> None:
    code, out, err = invoke(str(BATCHES / "shared-written-page.json"), "-b", "flash_attn",
                            "--format", "json")
    assert code == 1
    document = json.loads(out)
    assert document["ok"] is False
    assert document["violations"][0]["invariant"] == 6
    assert "invariant 6 slot-in-owned-page (request 'P'" in err


@pytest.mark.parametrize(("content", "fragment"), [
    (None, "file not found"),
    ("{", "invalid JSON"),
    ("[1, 2]", "Input should be a valid dictionary"),
    ('{"block_size": 16, "requests": [{"id": "A", "context_len": 127, "query_len": 1, '
     '"block_ids": [7, 2]}]}', "field 'requests[0] (id 'A').block_ids'"),
    ('{"block_size": 16, "requests": [{"id": "A", "context_len": 0, "query_len": 1, '
     '"block_ids": [7]}], "extra": 1}', "field 'extra': unknown field"),
    ('{"block_size": 1.5, "requests": []}', "field 'block_size'"),
])
def test_bad_input_exits_2_with_file_and_field(tmp_path: Path, content: str | None,
                                               fragment: str) -> None:
    path = tmp_path / "batch.json"
    if content is not None:
        path.write_text(content)
    code, out, err = invoke(str(path), "-b", "flashinfer")
    assert code == 2
    assert str(path) in err
    assert fragment in err
    assert "Traceback" not in out + err


def test_directory_and_bad_option(tmp_path: Path) -> None:
    assert invoke(str(tmp_path), "-b", "flashinfer")[0] == 2
    assert invoke(str(SEED), "-b", "triton")[0] == 2
    assert invoke(str(SEED), "-b", "flashinfer", "--reorder-threshold", "0")[0] == 2


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-5, max_value=300)
    | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["id", "block_size", "requests", "context_len",
                                       "query_len", "block_ids", "x"]), children, max_size=5),
    max_leaves=20,
)


@st.composite
def almost_batches(draw: st.DrawFn) -> object:
    """Mostly well-shaped batch documents with one random field broken or removed."""
    request = {"id": draw(st.text(min_size=0, max_size=3)),
               "context_len": draw(st.integers(min_value=-2, max_value=100)),
               "query_len": draw(st.integers(min_value=-1, max_value=40)),
               "block_ids": draw(st.lists(st.integers(min_value=-1, max_value=20),
                                          max_size=10))}
    document: dict[str, object] = {"block_size": draw(st.sampled_from([0, 1, 16, -3])),
                                   "requests": [request]}
    key = draw(st.sampled_from(["id", "context_len", "query_len", "block_ids", None]))
    if key is not None:
        if draw(st.booleans()):
            del request[key]
        else:
            request[key] = draw(JSON_VALUES)
    return document


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.one_of(JSON_VALUES, almost_batches()), st.sampled_from(["flash_attn", "flashinfer"]))
def test_fuzzed_batch_files_never_traceback(tmp_path: Path, document: object,
                                            backend: str) -> None:
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps(document))
    code, out, err = invoke(str(path), "-b", backend, "--format", "json")
    assert code in (0, 1, 2)
    if code == 2:
        assert str(path) in err
    else:
        assert json.loads(out)["ok"] is (code == 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=64))
def test_fuzzed_bytes_never_traceback(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "bytes.json"
    path.write_bytes(raw)
    code, _, err = invoke(str(path), "-b", "flashinfer")
    assert code in (0, 1, 2)
    if code == 2:
        assert str(path) in err
