"""The one terminal console of the CLI: data is never read as markup."""

from __future__ import annotations

import os
from typing import IO

from rich.console import Console

__all__ = ["make_console"]


def make_console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console sized from ``COLUMNS`` (default 120), colourless under ``NO_COLOR``,
    with markup and highlighting off (vLLM's reasons carry brackets); ``file`` captures it."""
    width = int(os.environ.get("COLUMNS", "0") or 0) or None
    return Console(width=width or 120, no_color=bool(os.environ.get("NO_COLOR")),
                   highlight=False, soft_wrap=False, markup=False, stderr=stderr,
                   file=file)
