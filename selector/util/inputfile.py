"""Reading the user's small input files (deployments, batch, workload, measurements): every
failure becomes an :class:`InputError` naming the file, never a traceback. A key given twice
in one mapping is an error naming both lines (the JSON and YAML readers would keep the last
one silently; TOML refuses it itself)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from selector.errors import InputError

__all__ = ["MAX_INPUT_BYTES", "check_duplicate_keys", "parse_json_text", "read_text_file"]

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


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKeyError(key)
        seen[key] = value
    return seen


def _duplicate_error(key: str, path: tuple[str, ...], lines: tuple[int, int] | None,
                     source: str) -> InputError:
    field = ".".join((*path, key))
    if lines is None:
        return InputError(f"the key {key!r} is given twice", file=source, field=field,
                          hint="keep one of them: the file's readers would silently use the last")
    first, second = lines
    where = f"on line {first}" if first == second else f"on lines {first} and {second}"
    return InputError(f"the key {key!r} is given twice, {where}",
                      file=source, field=field, line=second,
                      hint="keep one of them: the file's readers would silently use the last")


def check_duplicate_keys(node: Any, *, source: str, prefix: tuple[str, ...] = ()) -> None:
    """Refuse a key given twice in one mapping of a composed YAML (or JSON) document,
    naming both lines."""
    if isinstance(node, yaml.MappingNode):
        first_line: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                name = str(key.value)
                line = key.start_mark.line + 1
                if name in first_line:
                    raise _duplicate_error(name, prefix, (first_line[name], line), source)
                first_line[name] = line
                check_duplicate_keys(value, source=source, prefix=(*prefix, name))
            else:
                check_duplicate_keys(value, source=source, prefix=prefix)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            check_duplicate_keys(item, source=source, prefix=prefix)


def _json_duplicate(text: str, key: str, source: str) -> InputError:
    """The error for a JSON key given twice, with both lines where they can be found."""
    try:
        # a JSON string holds no raw tab, so tabs are only indentation (which YAML refuses)
        check_duplicate_keys(yaml.compose(text.replace("\t", " "), Loader=yaml.SafeLoader),
                             source=source)
    except InputError as located:
        return located
    except (yaml.YAMLError, RecursionError, ValueError):
        pass
    pattern = re.compile(r'"' + re.escape(json.dumps(key)[1:-1]) + r'"\s*:')
    found = [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]
    return _duplicate_error(key, (), (found[0], found[1]) if len(found) >= 2 else None, source)


def parse_json_text(text: str, *, source: str) -> Any:
    """JSON from ``text``; syntax errors name the line and column, a key given twice in
    one object names both lines."""
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKeyError as duplicate:
        raise _json_duplicate(text, duplicate.key, source) from None
    except json.JSONDecodeError as error:
        raise InputError(f"invalid JSON: {error.msg} (column {error.colno})", file=source,
                         line=error.lineno) from None
    except (ValueError, RecursionError) as error:
        raise InputError(f"invalid JSON: {error}", file=source) from None
