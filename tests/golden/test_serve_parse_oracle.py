"""`vllm serve` lines as vLLM's own parser reads them: a flag the release lacks is refused
("unrecognized arguments", "ambiguous option"), a unique prefix is the option it starts, a
JSON config key or speculative method the release's config class refuses is refused.

Expected values: tests/golden/oracle/vllm-0.33.0/serve-parse.json, vLLM 0.33.0's parser and
SpeculativeConfig answering the lines of tests/data/serve_parse_lines.json
(``tools/serve_flags.py --parse``); serve-configs.json and serve-arity.json are its config
classes and its parser's option strings (``--configs``, ``--arity``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.inputs.serve import ServeCommand, parse_serve_command
from selector.inputs.serve.flags import release_flags, serve_flags

GOLDEN = Path(__file__).parent / "oracle" / "vllm-0.33.0"
ENGINE = "vllm==0.33.0"
ANSWERS: list[dict[str, Any]] = json.loads((GOLDEN / "serve-parse.json").read_text())["answers"]
REFUSALS = ("SE005", "SE006", "SE007", "SE008", "SU004", "SU005", "SU007", "SU045", "SU046")
FIELD_ERRORS = {"literal_error", "unexpected_keyword_argument"}


def _parse(words: list[str]) -> ServeCommand:
    return parse_serve_command(["vllm", "serve", *words], device="H100", catalog=load_catalog(),
                               engine=ENGINE, model="qwen3-8b")


def _errors(command: ServeCommand) -> list[tuple[str, str]]:
    return [(n.code, n.message) for n in command.notes if n.level == "error"]


def _id(answer: dict[str, Any]) -> str:
    return " ".join(answer["argv"][1:])[:60]


def test_the_recorded_lines_are_the_listed_ones() -> None:
    lines = json.loads((Path(__file__).parents[1] / "data" / "serve_parse_lines.json").read_text())
    assert [a["argv"] for a in ANSWERS] == lines
    assert json.loads((GOLDEN / "serve-parse.json").read_text())["vllm_version"] == "0.33.0"


def test_the_profile_states_the_parser_vllm_has() -> None:
    table = serve_flags(load_catalog(), ENGINE)
    arity = json.loads((GOLDEN / "serve-arity.json").read_text())["arity"]
    assert table.parser_recorded and table.parser_flags == frozenset(arity)
    configs = json.loads((GOLDEN / "serve-configs.json").read_text())
    assert list(table.speculative_methods) == configs["speculative_methods"]
    assert {k: list(v) for k, v in table.config_fields.items()} == configs["config_fields"]


@pytest.mark.parametrize("answer", ANSWERS, ids=_id)
def test_each_line_gets_vllms_answer(answer: dict[str, Any]) -> None:
    try:
        command = _parse(answer["argv"])
    except InputError as exc:  # a value vLLM's parser takes as text but we read strictly
        assert answer["error"] is not None or answer.get("parsed"), exc
        return
    errors = _errors(command)
    vllm = answer["error"]
    if vllm is not None and vllm.startswith(("unrecognized arguments:", "ambiguous option:")):
        code = "SE005" if vllm.startswith("unrecognized") else "SE006"
        assert (code, vllm) in errors, errors
    elif vllm is not None and "invalid choice" in vllm:  # argparse's choices
        assert ("SU045", vllm) in errors, errors
    elif vllm is not None:  # a JSON config flag's class refuses a key or a value, at parse time
        assert any(code in ("SU005", "SU046") and vllm.startswith(message)
                   for code, message in errors), (vllm, errors)
    elif set(answer.get("speculative_error_types", ())) & FIELD_ERRORS:
        assert any(code in ("SE007", "SE008") and answer["speculative_error"].startswith(message)
                   for code, message in errors), (answer["speculative_error"], errors)
    else:
        assert not [e for e in errors if e[0] in REFUSALS], errors
        parsed = answer["parsed"]
        deployment = command.deployment
        if "max_model_len" in parsed:
            assert deployment.max_model_len == int(parsed["max_model_len"])
        if "tensor_parallel_size" in parsed:
            assert deployment.parallel.tensor_parallel_size == int(parsed["tensor_parallel_size"])
        if "gpu_memory_utilization" in parsed:
            assert deployment.gpu_memory_utilization == float(parsed["gpu_memory_utilization"])
        if "block_size" in parsed:
            assert deployment.block_size == int(parsed["block_size"])


_CONFIGS = sorted((Path(__file__).parent / "oracle").glob("vllm-*/serve-configs.json"))


@pytest.mark.parametrize("path", _CONFIGS, ids=lambda p: p.parent.name)
def test_every_release_states_its_config_classes(path: Path) -> None:
    """Each release's JSON config classes, their Literal fields and its flags' argparse
    choices are its own (``tools/serve_flags.py --configs`` in that release's oracle
    venv): an unknown --attention-config key, a value outside a Literal or a choice is
    refused as that release refuses it."""
    answer = json.loads(path.read_text())
    table = serve_flags(load_catalog(), f"vllm=={answer['vllm_version']}")
    assert {k: list(v) for k, v in table.config_fields.items()} == answer["config_fields"]
    assert list(table.speculative_methods) == answer["speculative_methods"]
    if "flag_choices" in answer:
        assert {k: list(v) for k, v in table.flag_choices.items()} == answer["flag_choices"]
        assert {c: {k: list(v) for k, v in f.items()} for c, f in table.config_literals.items()} \
            == answer["config_literals"]


def test_every_release_records_its_config_classes() -> None:
    versions = {p.parent.name for p in _CONFIGS}
    engines = {f"vllm-{v}" for v in release_flags(load_catalog())}
    assert engines <= versions
