#!/usr/bin/env python3
"""The README's sample output, from real runs.

Every ```console block of README.md holds `$ attn-select ...` commands (a trailing
backslash continues a line) each followed by its output. This tool runs each command
(a 120-column console, no colour, from the repository root)
and either rewrites the blocks (`--write`) or reports the ones that differ (exit 1).
tests/unit/test_readme_samples.py runs the check in CI.

    python tools/readme_samples.py           # check
    python tools/readme_samples.py --write   # regenerate the README's samples
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.recorded import RECORDED_ENGINE

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Sample:
    """One command of a console block and the output the README shows for it."""

    command: str
    """As written, continuation lines included."""
    shown: str


def samples(block: str) -> list[Sample]:
    """A console block's commands and outputs, in order."""
    out: list[Sample] = []
    lines = block.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            index += 1
            continue
        command = [line]
        while command[-1].endswith("\\") and index + 1 < len(lines):
            index += 1
            command.append(lines[index])
        index += 1
        shown: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            shown.append(lines[index])
            index += 1
        while shown and not shown[-1].strip():
            shown.pop()
        out.append(Sample("\n".join(command), "\n".join(shown)))
    return out


def run(command: str) -> str:
    """The output of one `$ attn-select ...` command, as the README shows it."""
    from selector.cli import main

    words = shlex.split(command.removeprefix("$ ").replace("\\\n", " "))
    if not words or words[0] != "attn-select":
        raise ValueError(f"not an attn-select command: {command!r}")
    buffer = io.StringIO()
    old_argv, old_cwd = sys.argv, os.getcwd()
    pinned = {"COLUMNS": "120", "NO_COLOR": "1", "ATTN_SELECT_INSTALLED_VLLM": "none",
              # the engine the snapshots were recorded under, so a newer profile leaves them
              "ATTN_SELECT_ENGINE": RECORDED_ENGINE}
    environment = {k: os.environ.get(k) for k in pinned}
    os.environ.update(pinned)
    sys.argv = words
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            main()
    except SystemExit:
        pass
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
        for key, value in environment.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())


def regenerate(text: str) -> str:
    """The README with every console block's outputs replaced by real ones."""
    def block(match: re.Match[str]) -> str:
        parts = [f"{s.command}\n{run(s.command)}" for s in samples(match.group(1))]
        return "```console\n" + "\n\n".join(parts) + "\n```"

    return _BLOCK.sub(block, text)


def differences(text: str) -> list[tuple[str, str, str]]:
    """(command, shown, real) for every sample whose output differs."""
    out = []
    for match in _BLOCK.finditer(text):
        for sample in samples(match.group(1)):
            real = run(sample.command)
            shown = "\n".join(line.rstrip() for line in sample.shown.splitlines())
            if real != shown:
                out.append((sample.command, shown, real))
    return out


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite README.md's samples")
    args = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    if args.write:
        README.write_text(regenerate(text), encoding="utf-8")
        return 0
    stale = differences(text)
    for command, _, _ in stale:
        print(f"README sample out of date: {command.splitlines()[0]}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main_())
