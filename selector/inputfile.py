"""Reading the user's small input files (batch, workload, measurements): every failure
becomes an :class:`InputError` naming the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from selector.errors import InputError

__all__ = ["MAX_INPUT_BYTES", "parse_json_text", "read_text_file"]

MAX_INPUT_BYTES = 1 << 20
"""Input files are a few kilobytes; anything over a megabyte is a mistake."""


def read_text_file(path: Path, *, what: str, directory_hint: str = "") -> str:
    """The UTF-8 text of ``path``; ``what`` names the expected kind of file."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", file=source) from None
    except IsADirectoryError:
        raise InputError(f"is a directory, expected {what}", file=source,
                         hint=directory_hint or None) from None
    except OSError as error:
        raise InputError(f"cannot read: {error}", file=source) from None
    if len(raw) > MAX_INPUT_BYTES:
        raise InputError(f"the file is too large ({len(raw)} bytes)", file=source,
                         hint=f"{what} is a few kilobytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=source) from None


def parse_json_text(text: str, *, source: str) -> Any:
    """JSON from ``text``; syntax errors name the line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"invalid JSON: {error.msg} (column {error.colno})", file=source,
                         line=error.lineno) from None
    except (ValueError, RecursionError) as error:
        raise InputError(f"invalid JSON: {error}", file=source) from None
