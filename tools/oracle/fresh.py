"""Run one function of a tool in a fresh interpreter and get its answer back.

vLLM evaluates some facts once per process (class attributes at import, caches keyed by
the capability), so a recorder asks each capability or release in a fresh process, often
of another interpreter (the release's oracle venv). The child (``tools/oracle/child.py``)
imports the tool by its file, calls ``function(**arguments)`` and writes the JSON answer
to a file the parent names; whatever vLLM prints on stdout or stderr is left alone. A
child that exits non-zero or writes no answer is an error that carries its stderr's tail,
never an answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .locate import TOOLS

__all__ = ["CHILD", "FreshProcessError", "run_fresh"]

CHILD = Path(__file__).resolve().parent / "child.py"


class FreshProcessError(RuntimeError):
    """The fresh process gave no answer (its exit status and stderr's tail are the message)."""


def run_fresh(tool: str | os.PathLike[str], function: str, arguments: Mapping[str, Any] | None = None,
              *, python: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
              timeout: float | None = 900, quiet: bool = True) -> Any:
    """``function(**arguments)`` of ``tool`` (a file name in tools/ or a path) in a fresh
    ``python`` (default: this interpreter); its JSON answer. ``quiet``: the child's stdout
    and stderr are captured (stderr's tail is shown on a failure), else they pass through."""
    path = Path(tool) if Path(tool).is_absolute() else TOOLS / tool
    with tempfile.TemporaryDirectory(prefix="oracle-fresh-") as tmp:
        answer_file = Path(tmp) / "answer.json"
        spec = Path(tmp) / "call.json"
        spec.write_text(json.dumps({"tool": str(path), "function": function,
                                    "arguments": dict(arguments or {}),
                                    "answer": str(answer_file)}), encoding="utf-8")
        command = [str(python or sys.executable), str(CHILD), str(spec)]
        capture = subprocess.PIPE if quiet else None
        try:
            done = subprocess.run(command, env=None if env is None else dict(env), check=False,
                                  stdout=capture, stderr=capture, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise FreshProcessError(f"{path.name}:{function}: {exc}") from exc
        if done.returncode != 0 or not answer_file.is_file():
            tail = (done.stderr or "")[-3000:]
            raise FreshProcessError(
                f"{path.name}:{function}({', '.join(map(str, arguments or {}))}) in {command[0]}: "
                f"exit {done.returncode}" + ("" if answer_file.is_file() else ", no answer")
                + (f"\n{tail}" if tail else ""))
        return json.loads(answer_file.read_text(encoding="utf-8"))
