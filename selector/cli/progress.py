"""The spinner a long command (smoke, bench, a fleet run) shows on stderr while it works."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

__all__ = ["progress"]


@contextmanager
def progress(console: Console) -> Iterator[Progress]:
    """A transient spinner with the current stage's description and the elapsed time; on a
    console that is no terminal (a log, a pipe) it shows nothing and leaves nothing, not even
    the blank line a stopped live display writes there."""
    spinner = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                       console=console, transient=True, disable=not console.is_terminal)
    with spinner:
        yield spinner
