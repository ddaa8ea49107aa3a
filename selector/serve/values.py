"""The value parsers of ``vllm serve`` flags: each reads one flag's text the way vLLM
reads it, or raises :class:`InputError` naming the flag."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from selector.errors import InputError

__all__ = [
    "SOURCE",
    "bad_value",
    "deep_merge",
    "json_object",
    "parse_bool",
    "parse_bytes",
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


def parse_bytes(flag: str, value: str) -> int:
    """vLLM's ``human_readable_int``: ``8G`` is 8 x 2**30, ``8g`` is 8 x 10**9
    (vllm/utils/argparse_utils.py:30-74)."""
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 10.0 ** (3 * "kmgt".index(suffix) + 3))
        if "." in number:
            raise bad_value(flag, f"Decimals are not allowed with binary suffixes like {suffix}. "
                                  f"Did you mean to use {number}{suffix.lower()} instead?")
        return int(int(number) * 2 ** (10 * "KMGT".index(suffix) + 10))
    return parse_int(flag, text, low=0, high=1 << 50)


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
    """vLLM accepts ``32768``, ``32k`` (x1000), ``32K`` (x1024), ``1m``/``1M`` and ``-1``
    or ``auto`` (auto-fit, returned as -1: vllm/utils/argparse_utils.py:77-95)."""
    text = value.strip().replace("_", "")
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG]?)", text)
    if text == "-1" or text.lower() == "auto":
        return -1
    if not match:
        raise bad_value(flag, f"expected a token count like 32768 or 32k, got {value!r}")
    number = float(match.group(1))
    unit = match.group(2)
    scale = {"": 1, "k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2, "g": 1000**3,
             "G": 1024**3}[unit]
    total = int(number * scale)
    if total < 1:
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
