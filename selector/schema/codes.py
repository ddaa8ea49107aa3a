"""The reason-code registry (``schemas/reason-codes.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from selector.schema.types import StrictModel

__all__ = ["ReasonCode", "ReasonCodeRegistry"]


class ReasonCode(StrictModel):
    """One reason attn-select can give, with vLLM's exact message."""

    code: str = Field(pattern=r"^[A-Z]{2,3}\d{3}$")
    """Stable identifier, never reused (e.g. ``HS001``)."""
    name: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    """Kebab-case name (e.g. ``head-size-unsupported``)."""
    severity: Literal["error", "warning", "info"] = "error"
    message: str
    """vLLM's exact message; ``{field}`` placeholders are filled from request facts."""
    hint: str = ""
    """How to fix it."""
    aliases: tuple[str, ...] = ()


class ReasonCodeRegistry(StrictModel):
    codes: tuple[ReasonCode, ...]
