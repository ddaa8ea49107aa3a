"""``attn-select diff`` goldens: deployments whose verdict changed between vLLM 0.25.1
and 0.33.0, each backed by the real vLLM answer of both versions (the oracle,
tests/fixtures/diff/oracle.json), and the support-matrix summary.

Rewrite the goldens with ``pytest tests/golden/test_diff_golden.py --update-goldens``;
the oracle answers with ``python3 -m tests.golden.diff_oracle``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from packaging.version import Version
from typer.testing import CliRunner

from selector.catalog import load_catalog
from selector.cli import diff as diff_cli
from selector.compare.diff import diff_results
from selector.inputs.config import load_deployment
from selector.pipeline.diff import solve_for_engine
from selector.sweep import sweep_lines
from tests.golden.diff_oracle import ORACLE_ANSWERS, REPO, VERSIONS, deployment_files, deployment_to_flat

GOLDENS = Path(__file__).parent / "diff"
FROM, TO = "vllm==0.25.1", "vllm==0.33.0"
NAMES = [p.stem for p in deployment_files()]
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def answers() -> dict[str, Any]:
    return dict(json.loads(ORACLE_ANSWERS.read_text()))


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """attn-select (test harness)."""

    diff_cli.register(app)
    return app


def _run(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(_app(), args, env=ENV, catch_exceptions=False)
    return result.exit_code, result.stdout


def _check_golden(path: Path, text: str, update: bool) -> None:
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"missing golden {path}; run pytest with --update-goldens"
    assert text == path.read_text()


def test_at_least_five_changed_deployments(answers: dict[str, Any]) -> None:
    changed = [n for n in NAMES if answers[n][FROM]["selected"] != answers[n][TO]["selected"]]
    assert len(changed) >= 5
    assert set(answers) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_oracle_backs_both_versions(name: str, answers: dict[str, Any]) -> None:
    """Our answer for the deployment's selector config equals real vLLM's, per version."""
    stored = answers[name]
    assert stored["input"] == deployment_to_flat(REPO / "tests" / "fixtures" / "diff" / f"{name}.yaml")
    loaded = load_deployment(str(REPO / "tests" / "fixtures" / "diff" / f"{name}.yaml"))
    for engine in VERSIONS:
        oracle = stored[engine]
        assert oracle["vllm_version"] == engine.split("==")[1]
        line = next(sweep_lines([json.dumps(stored["input"])], load_catalog().engine(engine), catalog=load_catalog()))
        mine = json.loads(line)
        assert mine["backends"] == {k: v for k, v in oracle["backends"].items() if k in mine["backends"]}
        assert (mine["selected"], mine["error"]) == (oracle["selected"], oracle["error"])
        result = solve_for_engine(loaded, engine, catalog=load_catalog())
        assert result.selected == oracle["selected"]
        assert list(result.priority) == oracle["priority"]
        assert (result.error.message if result.error else None) == oracle["error"]


@pytest.mark.parametrize("name", NAMES)
def test_diff_matches_the_oracle_transition(name: str, answers: dict[str, Any]) -> None:
    loaded = load_deployment(str(REPO / "tests" / "fixtures" / "diff" / f"{name}.yaml"))
    catalog = load_catalog()
    d = diff_results(solve_for_engine(loaded, FROM, catalog=catalog), solve_for_engine(loaded, TO, catalog=catalog),
                     layout_aliases=catalog.layout_aliases)
    selected = d.field("selected")
    assert (selected.before, selected.after) == (answers[name][FROM]["selected"],
                                                 answers[name][TO]["selected"])
    assert d.verdict_changed


@pytest.mark.parametrize("name", NAMES)
def test_diff_text_golden(name: str, update_goldens: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(["diff", f"tests/fixtures/diff/{name}.yaml", "--from", FROM, "--to", TO],
                     monkeypatch)
    assert code == 1  # the verdict changed
    _check_golden(GOLDENS / f"{name}.txt", out, update_goldens)


@pytest.mark.parametrize("name", NAMES)
def test_diff_json_golden(name: str, update_goldens: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(["diff", f"tests/fixtures/diff/{name}.yaml", "--from", FROM, "--to", TO,
                      "--format", "json"], monkeypatch)
    assert code == 1
    document = json.loads(out)
    assert document["verdict_changed"] is True
    assert document["from"] == FROM and document["to"] == TO
    _check_golden(GOLDENS / f"{name}.json", out, update_goldens)


def test_matrix_goldens(update_goldens: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    code, text = _run(["diff", "--all", "--from", FROM, "--to", TO], monkeypatch)
    assert code == 1
    _check_golden(GOLDENS / "matrix.txt", text, update_goldens)
    code, out = _run(["diff", "--all", "--from", FROM, "--to", TO, "--format", "json"], monkeypatch)
    document = json.loads(out)
    assert document["configs"] >= 2000
    assert document["verdicts_changed"] > 0
    _check_golden(GOLDENS / "matrix.json", out, update_goldens)


def test_same_version_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(["diff", "tests/fixtures/diff/b200-non-causal.yaml", "--from", TO, "--to", TO,
                      "--format", "json"], monkeypatch)
    assert code == 0
    document = json.loads(out)
    assert document["changed"] is False
    assert not any(b["changed"] for b in document["backends"])


def test_default_versions_and_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """--to defaults to the newest profile, --from to the newest older one; ranges resolve."""
    code, out = _run(["diff", "tests/fixtures/diff/b200-non-causal.yaml", "--format", "json"],
                     monkeypatch)
    document = json.loads(out)
    names = load_catalog().engine_names
    # the verdict depends on which profiles are the newest: the pinned goldens check it
    assert code in (0, 1)
    assert (document["from"], document["to"]) == (names[-2], names[-1])
    code, out = _run(["diff", "tests/fixtures/diff/b200-non-causal.yaml", "--from", "vllm<0.30",
                      "--to", "vllm>=0.30", "--format", "json"], monkeypatch)
    assert code in (0, 1)
    document = json.loads(out)
    below = [n for n in names if Version(n.split("==", 1)[1]) < Version("0.30")]
    assert document["from"] == below[-1]  # the newest profile below 0.30
    assert document["to"] == names[-1]  # the newest profile
