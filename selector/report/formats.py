"""The one registry of ``check`` reporters, keyed by format name.

The CLI's ``--format`` choices and the docs are read from :data:`REPORTERS`; a
reporter's module is imported only when its format is asked for.  Adding a format is
one module with a ``render(report, console)`` function and one entry here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from selector.records import CheckReport

__all__ = ["REPORTERS", "Render", "Reporter", "reporter"]


class Render(Protocol):
    def __call__(self, report: CheckReport, console: Any) -> str | None:
        """The report as text, or None: printed to ``console`` (or nothing to write)."""


@dataclass(frozen=True)
class Reporter:
    """One output format of ``check``."""

    name: str
    """The ``--format`` value."""
    summary: str
    """One line for the docs."""
    module: str
    """The module holding the reporter's ``render(report, console)``."""
    prints: bool = False
    """Prints to a rich console (the terminal, or a file with ``--output``) rather than
    returning text."""

    def load(self) -> Render:
        render: Render = importlib.import_module(self.module).render
        return render


REPORTERS: dict[str, Reporter] = {reporter.name: reporter for reporter in (
    Reporter("text", "The terminal report: the selected backend, why, and each backend's "
                     "reasons (a fleet table for several devices).",
             "selector.report.check_text", prints=True),
    Reporter("json", "One JSON document per deployment and device (a list for several).",
             "selector.report.check_json"),
    Reporter("sarif", "SARIF 2.1.0 for code-scanning annotations, findings located in the "
                      "deployment file.", "selector.report.sarif"),
    Reporter("junit", "JUnit XML: one test case per deployment and device.",
             "selector.report.junit"),
    Reporter("github", "GitHub Actions workflow commands (::error / ::warning annotations).",
             "selector.report.github"),
    Reporter("markdown", "A markdown summary (for a pull-request comment or a job summary).",
             "selector.report.markdown"),
)}
"""Every format of ``check``, in the order the CLI lists them."""


def reporter(name: str) -> Reporter:
    return REPORTERS[name]
