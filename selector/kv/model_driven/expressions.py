"""The rule's expressions evaluated over an environment; a name the config lacks is the
config's error (``MissingConfigFieldError``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selector import expr as expr_lang
from selector.errors import InputError

__all__ = [
    "MissingConfigFieldError",
    "evaluate",
]


class MissingConfigFieldError(InputError):
    """The config lacks a field the model-driven rule's expressions read (vLLM's layer
    code would fail the same way building the layer); the caller names the config file."""


def evaluate(text: str | int | bool | None, env: Mapping[str, Any]) -> Any:
    """The value of expression ``text`` over ``env`` (a bool, an int or None: itself)."""
    if text is None or isinstance(text, bool | int):
        return text
    try:
        return expr_lang.evaluate(expr_lang.parse(text), env)
    except KeyError as missing:
        name = str(missing.args[0]) if missing.args else "?"
        raise MissingConfigFieldError(
            f"missing (or not a number or text): the layers this architecture builds read "
            f"it ({text})", field=name,
            hint="the checkpoint's own config.json has it; check the architectures "
                 "entry") from None
