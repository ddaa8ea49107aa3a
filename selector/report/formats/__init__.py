"""The one registry of ``check`` reporters, keyed by format name.

Every module of this package is a format: its name is the ``--format`` value, and it
holds ``SUMMARY`` (one line for the docs), ``render(report, console)`` and, for a
reporter that prints to a rich console rather than returning text, ``PRINTS = True``; a
reporter whose output names the files that cannot be read (so the CLI writes no second
copy of the error to stderr) sets ``REPORTS_INPUT_ERRORS = True``.
Adding a format is adding one module here.  The CLI's ``--format`` choices and the docs
are read from :data:`REPORTERS`; a reporter's module is imported only when its format
is used (listing the names imports nothing).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from selector.check.records import CheckReport

__all__ = ["DEFAULT_FORMAT", "REPORTERS", "Render", "Reporter", "reporter"]

DEFAULT_FORMAT = "text"
"""The format ``check`` prints when none is asked for; listed first."""


class Render(Protocol):
    def __call__(self, report: CheckReport, console: Any) -> str | None:
        """The report as text, or None: printed to ``console`` (or nothing to write)."""


@dataclass(frozen=True)
class Reporter:
    """One output format of ``check``: a module of this package."""

    name: str
    """The ``--format`` value (the module's name)."""

    @property
    def module(self) -> str:
        return f"{__name__}.{self.name}"

    def _imported(self) -> ModuleType:
        return importlib.import_module(self.module)

    @property
    def summary(self) -> str:
        """One line for the docs (the module's ``SUMMARY``)."""
        summary: str = self._imported().SUMMARY
        return summary

    @property
    def prints(self) -> bool:
        """Prints to a rich console (the terminal, or a file with ``--output``) rather than
        returning text (the module's ``PRINTS``)."""
        return bool(getattr(self._imported(), "PRINTS", False))

    @property
    def reports_input_errors(self) -> bool:
        """Its output names every file that cannot be read, with the error (the module's
        ``REPORTS_INPUT_ERRORS``): the CLI then writes no second copy to stderr."""
        return bool(getattr(self._imported(), "REPORTS_INPUT_ERRORS", False))

    def load(self) -> Render:
        render: Render = self._imported().render
        return render


def _format_names() -> list[str]:
    names = sorted(info.name for info in pkgutil.iter_modules(__path__)
                   if not info.name.startswith("_"))
    return sorted(names, key=lambda name: name != DEFAULT_FORMAT)


REPORTERS: dict[str, Reporter] = {name: Reporter(name) for name in _format_names()}
"""Every format of ``check``, in the order the CLI lists them (the default first, then by
name)."""


def reporter(name: str) -> Reporter:
    return REPORTERS[name]
