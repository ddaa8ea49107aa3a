"""A start-up refusal (:class:`StartupIssue`) and the checks that need no model: kept
apart from :mod:`selector.memory.startup` so a single-layer check imports little."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from selector.catalog import Catalog
from selector.memory.profile import StartupProfile

__all__ = ["StartupIssue", "dtype_issue", "startup_issue"]


class StartupIssue(BaseModel):
    """A start-up refusal: vLLM raises with ``message`` and the server does not come up."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    code: str
    name: str
    message: str
    hint: str
    field: tuple[str, ...] = ()
    """The deployment field it is about (to locate it in the file)."""


def startup_issue(catalog: Catalog, code: str, field: tuple[str, ...], **values: Any) -> StartupIssue:
    """The refusal ``code`` with its registered message and hint filled in."""
    entry = catalog.code(code)
    return StartupIssue(code=code, name=entry.name, message=entry.message.format(**values),
                        hint=entry.hint.format(**values), field=field)


def dtype_issue(catalog: Catalog, profile: StartupProfile, *, dtype: str, explicit: bool,
                cc: int, device: str) -> StartupIssue | None:
    """``--dtype bfloat16`` on a GPU below compute capability 8.0."""
    spec = profile.checks.bfloat16
    if dtype != "bfloat16" or not explicit or spec.min_cc is None or cc >= spec.min_cc:
        return None
    return startup_issue(catalog, spec.code, ("dtype",), gpu_name=device,
                  capability=f"{cc // 10}.{cc % 10}")
