"""Where a field sits in a JSON text: the 1-based line of every object key
path, so that an error about ``text_config.head_dim`` points at its line (or,
for a missing field, at the object that should hold it)."""

from __future__ import annotations

import re

__all__ = ["field_line", "key_lines"]

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def key_lines(text: str) -> dict[tuple[str | int, ...], int]:
    """``{key path: line}`` for every key and list element of a JSON text
    (the root object is ``()`` at the line of its opening brace)."""
    lines: dict[tuple[str | int, ...], int] = {}
    stack: list[tuple[str, tuple[str | int, ...], int]] = []  # (kind, path, next index)
    line = 1
    pending: str | None = None  # the last string read inside an object (a key candidate)
    value_path: tuple[str | int, ...] = ()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == '"':
            if stack and stack[-1][0] == "array":
                lines.setdefault((*stack[-1][1], stack[-1][2]), line)
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            pending = text[i + 1 : j]
            i = j
        elif c == ":" and stack and stack[-1][0] == "object" and pending is not None:
            value_path = (*stack[-1][1], pending)
            lines.setdefault(value_path, line)
            pending = None
        elif c in "{[":
            if not stack:
                path: tuple[str | int, ...] = ()
            elif stack[-1][0] == "array":
                kind, parent, index = stack[-1]
                path = (*parent, index)
                lines.setdefault(path, line)
            else:
                path = value_path
            stack.append(("object" if c == "{" else "array", path, 0))
            lines.setdefault(path, line)
            pending = None
        elif c in "}]":
            if stack:
                stack.pop()
        elif c == "," and stack and stack[-1][0] == "array":
            kind, parent, index = stack[-1]
            stack[-1] = (kind, parent, index + 1)
        elif not c.isspace() and stack and stack[-1][0] == "array":
            kind, parent, index = stack[-1]
            lines.setdefault((*parent, index), line)
        i += 1
    return lines


def field_line(text: str, field: str) -> int | None:
    """The line of ``field`` (dotted, with ``[i]`` indexes) in a JSON text: the
    line of the field itself, else of its closest enclosing object that exists."""
    path: list[str | int] = []
    for name, index in _SEGMENT.findall(field):
        path.append(int(index) if index else name)
    lines = key_lines(text)
    while True:
        line = lines.get(tuple(path))
        if line is not None:
            return line
        if not path:
            return None
        path.pop()
