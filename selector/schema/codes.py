"""The code registry (``schemas/reason-codes.yaml``): every code a finding can carry."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from selector.schema.types import StrictModel

__all__ = ["ReasonCode", "ReasonCodeRegistry", "ToolCode"]

_CODE = r"^[A-Z]{2,3}\d{3}$"
_NAME = r"^[a-z0-9]+(-[a-z0-9]+)*$"
_FIELD = r"^[a-z_]+(\.[a-z_]+)*$"


class ReasonCode(StrictModel):
    """One reason attn-select can give, with vLLM's exact message."""

    code: str = Field(pattern=_CODE)
    """Stable identifier, never reused (e.g. ``HS001``)."""
    name: str = Field(pattern=_NAME)
    """Kebab-case name (e.g. ``head-size-unsupported``)."""
    field: str | None = Field(default=None, pattern=_FIELD)
    """The deployment field the reason is about, dotted (``layer.head_size``): a
    finding with this code points at that field's line."""
    severity: Literal["error", "warning", "info"] = "error"
    message: str
    """vLLM's exact message; ``{field}`` placeholders are filled from request facts."""
    hint: str = ""
    """How to fix it."""
    aliases: tuple[str, ...] = ()


class ToolCode(StrictModel):
    """A code of attn-select itself: a finding about the input, the check or a
    ``vllm serve`` command line rather than one of vLLM's selection reasons."""

    code: str = Field(pattern=_CODE)
    name: str = Field(pattern=_NAME)
    field: str | None = Field(default=None, pattern=_FIELD)
    """The deployment field the finding is about, dotted (None: not located)."""
    summary: str
    """What a finding with this code means."""
    hint: str = ""
    """How to fix it, where one fix serves every finding with this code."""
    aliases: tuple[str, ...] = ()


class ReasonCodeRegistry(StrictModel):
    codes: tuple[ReasonCode, ...]
    """vLLM's reasons (selection, start-up, model checks)."""
    cli_codes: tuple[ToolCode, ...] = ()
    """Findings of ``check`` and ``fleet`` that are not vLLM reasons."""
    argument_codes: tuple[ToolCode, ...] = ()
    """Notes about a ``vllm serve`` command line."""
