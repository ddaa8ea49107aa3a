"""What the command line says, said once, to the right device and in the promised shape:
sweep's exit on input with no config, smoke's JSON when it cannot run, the fleet notes
naming their devices, each finding printed once, device names, the count flag and the
help."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
VALID = str(ROOT / "examples" / "llama-3.1-8b-h100.yaml")
FLAT = {"device_capability": "9.0", "head_size": 128, "dtype": "bfloat16"}


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


# ---------------------------------------------------------------- sweep


@pytest.mark.parametrize("text", ["", "\n\n", "not json\n{\"x\": 1}\n"],
                         ids=["empty", "blank-lines", "every-line-bad"])
def test_sweep_with_no_config_exits_2(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, text)
    code, out, err = run_cli(["sweep"])
    assert code == 2, (out, err)
    assert err.startswith("attn-select: error: stdin: ") and "config" in err
    # every bad line still has its verdict line (nothing dropped)
    assert len(out.splitlines()) == len([line for line in text.splitlines() if line.strip()])


def test_sweep_with_some_configs_exits_0_and_counts_the_bad_lines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, json.dumps(FLAT) + "\nnot json\n")
    code, out, err = run_cli(["sweep"])
    assert code == 0 and len(out.splitlines()) == 2
    assert "1 of 2 line(s) are not configs (first: line 2: not JSON" in err


# ---------------------------------------------------------------- smoke and bench, no torch


def _no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from selector.errors import CannotRunHereError

    def missing(what: str = "the smoke check") -> None:
        raise CannotRunHereError(f"{what} needs PyTorch, which is not installed (test)")

    monkeypatch.setattr("selector.smoke.runner.import_torch_cuda", missing)
    monkeypatch.setattr("selector.bench.runner.import_torch_cuda", missing)


def test_smoke_json_that_cannot_run_is_a_json_document(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_torch(monkeypatch)
    code, out, err = run_cli(["smoke", VALID, "--format", "json"])
    assert code == 4
    document = json.loads(out)
    assert document["status"] == "CANNOT-RUN" and document["exit_code"] == 4
    assert document["passed"] is False and "needs PyTorch" in document["reason"]
    assert document["plans"] and document["groups"] == []
    assert err.startswith("error: the smoke check needs PyTorch")


@pytest.mark.parametrize("argv", [["smoke", VALID], ["bench", VALID],
                                  ["smoke-plan", str(ROOT / "examples" / "smoke-plan-h200.json")]],
                         ids=["smoke", "bench", "smoke-plan"])
def test_cannot_run_is_said_without_a_blank_line_first(argv: list[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _no_torch(monkeypatch)
    code, out, err = run_cli(argv)
    assert code == 4 and not out
    assert err.startswith("error: "), repr(err)
    if argv[0] == "bench":
        assert err.startswith("error: the benchmark needs PyTorch")
