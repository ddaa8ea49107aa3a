"""Counts written with a size suffix (``32k``, ``10G``): one reader for the ``vllm serve``
flags and the deployment file, so a file takes exactly what the command line takes.

The rule is vLLM's ``human_readable_int`` / ``human_readable_int_or_auto``
(vllm/utils/argparse_utils.py:30-94 in 0.33.0): ``k m g t`` multiply by powers of 1000
(decimals allowed, ``25.6k`` is 25,600), ``K M G T`` by powers of 1024 (no decimals),
anything else is a plain integer. vLLM reads ``--max-model-len`` with the ``_or_auto``
form and ``--max-num-batched-tokens`` / ``--kv-cache-memory-bytes`` with the plain one
(vllm/engine/arg_utils.py:396-409 in 0.33.0).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema

__all__ = [
    "AUTO_FIT",
    "ByteCount",
    "MaxModelLen",
    "TokenCount",
    "human_readable_int",
    "human_readable_int_or_auto",
]

AUTO_FIT = -1
"""``--max-model-len -1`` (or ``auto``): vLLM fits the length to the KV cache memory."""

_SUFFIXED = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(text: str, *, what: str = "a whole number") -> int:
    """``32k`` -> 32000, ``32K`` -> 32768, ``25.6k`` -> 25600, ``4096`` -> 4096; a
    :class:`ValueError` for anything else (vLLM's words for a decimal binary size;
    ``what`` names the expected value in the others)."""
    value = text.strip()
    match = _SUFFIXED.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(f"Decimals are not allowed with binary suffixes like {suffix}. "
                             f"Did you mean to use {number}{suffix.lower()} instead?")
        return int(number) * _BINARY[suffix]
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"expected {what} like 4096, 32k (x1000) or 32K (x1024), "
                         f"got {text!r}") from None


def human_readable_int_or_auto(text: str, *, what: str = "a token count") -> int:
    """:func:`human_readable_int`, and ``-1`` or ``auto`` for :data:`AUTO_FIT`."""
    value = text.strip()
    if value == "-1" or value.lower() == "auto":
        return AUTO_FIT
    return human_readable_int(value, what=what)


def _count(value: object, what: str = "a whole number") -> object:
    """A string with a size suffix is read as the command line reads it; a string without
    one is refused (the file writes a plain number without quotes); any other value is left
    for the field's strict type (so ``true`` stays a boolean, refused where a number
    belongs)."""
    if not isinstance(value, str):
        return value
    if not _SUFFIXED.fullmatch(value.strip()):
        raise ValueError(f"expected {what}, got the string {value!r} (write a number without "
                         "quotes, or with a size suffix like 32k or 10G)")
    return human_readable_int(value, what=what)


def _length(value: object) -> object:
    """:func:`_count` for ``max_model_len`` (whose ``-1`` / ``auto``, vLLM's auto-fit, the
    field reads before this)."""
    return _count(value, "a token count")


_SUFFIX_PATTERN = r"^\s*(\d+(\.\d+)?[kmgt]|\d+[KMGT])\s*$"


def _schema(minimum: int) -> WithJsonSchema:
    bound = {"exclusiveMinimum": 0} if minimum > 0 else {"minimum": 0}
    return WithJsonSchema({"anyOf": [{"type": "integer", **bound},
                                     {"type": "string", "pattern": _SUFFIX_PATTERN}]})


MaxModelLen = Annotated[int, Field(gt=0), BeforeValidator(_length), _schema(1)]
"""``max_model_len`` of a deployment file: ``32768``, ``"32k"`` or ``"32K"``."""
TokenCount = Annotated[int, Field(gt=0), BeforeValidator(_count), _schema(1)]
"""A token count of a deployment file: ``8192``, ``"8k"`` or ``"8K"``."""
ByteCount = Annotated[int, Field(ge=0), BeforeValidator(_count), _schema(0)]
"""A byte count of a deployment file: ``10737418240``, ``"10G"`` or ``"10g"``."""
