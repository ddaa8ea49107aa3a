"""The one terminal console of the CLI: data is never read as markup."""

from __future__ import annotations

import os
from typing import IO

from rich.console import Console

__all__ = ["make_console"]


def make_console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console sized from ``COLUMNS`` (120 when unset or not a positive whole number),
    colourless under ``NO_COLOR`` (rich reads it), with markup and highlighting off (vLLM's
    reasons carry brackets); ``file`` captures it."""
    columns = os.environ.get("COLUMNS", "").strip()
    width = int(columns) if columns.isdigit() and int(columns) > 0 else 120
    return Console(width=width, highlight=False, soft_wrap=False, markup=False,
                   stderr=stderr, file=file)
