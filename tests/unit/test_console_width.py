"""COLUMNS sizes the CLI console; a value that is no positive whole number falls back to 120."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from selector.cli.console import make_console

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("value", "width"), [("80", 80), ("200", 200), ("", 120), ("0", 120),
                                              ("abc", 120), ("-5", 120), (" 90 ", 90)])
def test_columns(monkeypatch: pytest.MonkeyPatch, value: str, width: int) -> None:
    monkeypatch.setenv("COLUMNS", value)
    assert make_console().width == width


def test_cli_with_odd_columns_never_tracebacks() -> None:
    env = {**os.environ, "COLUMNS": "abc"}
    result = subprocess.run([sys.executable, "-m", "selector", "check", "examples/llama-3.1-8b-h100.yaml"],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
