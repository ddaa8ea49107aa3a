"""The value parsers of ``vllm serve`` flags: each reads one flag's text the way vLLM
reads it, or raises :class:`InputError` naming the flag."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from selector.errors import InputError
from selector.schema.sizes import AUTO_FIT, human_readable_int, human_readable_int_or_auto

__all__ = [
    "SOURCE",
    "bad_value",
    "deep_merge",
    "json_object",
    "parse_bool",
    "parse_bytes",
    "parse_count",
    "parse_int",
    "parse_max_model_len",
    "parse_scalar",
    "set_dotted",
]

SOURCE = "vllm serve"
"""The ``file`` of every error about a command line."""


def bad_value(flag: str, message: str, hint: str | None = None) -> InputError:
    return InputError(message, file=SOURCE, field=flag, hint=hint)


def parse_int(flag: str, value: str, *, low: int = 1, high: int = 1 << 20) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise bad_value(flag, f"expected an integer, got {value!r}") from None
    if not low <= number <= high:
        raise bad_value(flag, f"{number} is out of range", hint=f"give {low}..{high}")
    return number


def parse_count(flag: str, value: str, *, low: int = 1, high: int = 1 << 20) -> int:
    """vLLM's ``human_readable_int``: ``8k`` is 8 x 10**3, ``8K`` is 8 x 2**10, ``8G`` is
    8 x 2**30 (vllm/utils/argparse_utils.py:30-74); the deployment file reads the same way
    (:mod:`selector.schema.sizes`)."""
    try:
        number = human_readable_int(value)
    except ValueError as exc:
        raise bad_value(flag, str(exc)) from None
    if not low <= number <= high:
        raise bad_value(flag, f"{number} is out of range", hint=f"give {low}..{high}")
    return number


def parse_bytes(flag: str, value: str) -> int:
    """A byte count: :func:`parse_count` up to 2**50."""
    return parse_count(flag, value, low=0, high=1 << 50)


def parse_bool(flag: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise bad_value(flag, f"expected true or false, got {value!r}")


def json_object(flag: str, value: str) -> dict[str, Any]:
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise bad_value(flag, f"not valid JSON: {exc.msg}",
                        hint="quote the JSON for the shell, e.g. '{\"key\": 1}'") from None
    if not isinstance(data, dict):
        raise bad_value(flag, f"expected a JSON object, got {type(data).__name__}")
    return data


def parse_scalar(value: str) -> Any:
    """A dotted flag's value: JSON where it parses (numbers, true/false), else the text."""
    text = value.strip()
    if text in ("True", "False"):
        return text == "True"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_max_model_len(flag: str, value: str) -> int:
    """vLLM's ``human_readable_int_or_auto``: ``32768``, ``32k`` (x1000), ``32K`` (x1024),
    ``1m``/``1M``, and ``-1`` or ``auto`` (auto-fit, returned as -1:
    vllm/utils/argparse_utils.py:77-95)."""
    try:
        total = human_readable_int_or_auto(value)
    except ValueError as exc:
        raise bad_value(flag, str(exc)) from None
    if total < 1 and total != AUTO_FIT:
        raise bad_value(flag, f"{value!r} is not a positive length")
    return total


def deep_merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def set_dotted(target: dict[str, Any], path: list[str], value: Any) -> None:
    node = target
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value
