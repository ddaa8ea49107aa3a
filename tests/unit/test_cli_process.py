"""The ``attn-select`` process (``selector.cli.run``): what it prints and its exit code are
those of :func:`selector.cli.main`, whichever way it ends; it leaves at once only when
nothing remains to run at exit."""

from __future__ import annotations

import atexit
import io
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import selector.cli as cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "llama-3.1-8b-h100.yaml"


def _process(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "selector", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, check=False, timeout=120)


def _in_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setattr(sys, "argv", ["attn-select", *args])
    with pytest.raises(SystemExit) as done:
        cli.main()
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


@pytest.mark.parametrize("args", [
    ("check", str(EXAMPLE)),
    ("check", str(EXAMPLE), "--format", "json"),
    ("check", str(ROOT / "no-such-file.yaml")),
    ("check", str(EXAMPLE), "--no-such-option"),
])
def test_the_process_prints_and_exits_as_main(args: tuple[str, ...],
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _in_process(capsys, monkeypatch, *args)
    proc = _process(*args)
    assert (proc.returncode, proc.stdout) == (code, out)
    assert _same_words(proc.stderr) == _same_words(err)


def _same_words(text: str) -> str:
    """Error text without what differs between the two runs: the program name click
    shows in a usage error and the working folder."""
    text = text.replace(str(ROOT) + os.sep, "")
    return re.sub(r"(Usage:|Try ')\s*\S.*? check\b", r"\1 PROG check", text)


class _Exited(Exception):
    pass


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records ``os._exit`` calls instead of ending the test process."""
    calls: list[int] = []

    def fake_exit(code: int) -> None:
        calls.append(code)
        raise _Exited

    monkeypatch.setattr(os, "_exit", fake_exit)
    return calls


def _no_callbacks(monkeypatch: pytest.MonkeyPatch, count: int = 0) -> None:
    monkeypatch.setattr(atexit, "_ncallbacks", lambda: count, raising=False)


def test_leaves_at_once_when_nothing_remains(exits: list[int],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _no_callbacks(monkeypatch)
    with pytest.raises(_Exited):
        cli._end_process(3)
    assert exits == [3]


def test_an_atexit_callback_keeps_the_normal_exit(exits: list[int],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _no_callbacks(monkeypatch, count=1)
    cli._end_process(0)
    assert exits == []


def test_another_thread_keeps_the_normal_exit(exits: list[int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _no_callbacks(monkeypatch)
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        cli._end_process(0)
    finally:
        release.set()
        worker.join()
    assert exits == []


def test_an_unflushable_stream_keeps_the_normal_exit(exits: list[int],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A closed pipe: the normal exit reports it, as Python does."""
    _no_callbacks(monkeypatch)

    class Broken(io.StringIO):
        def flush(self) -> Any:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Broken())
    cli._end_process(0)
    assert exits == []

