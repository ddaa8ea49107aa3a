"""Rich building blocks that never read data as console markup.

vLLM's reasons carry brackets (``[block_size not supported]``, ``Reason: ['...']``);
rich reads a plain ``str`` cell, title or column header as markup and drops them.
Every renderer builds its tables with :class:`PlainTable` and wraps data in
:func:`plain`, so what reaches the terminal is the data, verbatim.
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

__all__ = ["PlainTable", "plain"]


def plain(value: RenderableType | None) -> Any:
    """A ``str`` as literal :class:`~rich.text.Text`; other renderables (and None) as they are."""
    return Text(value) if isinstance(value, str) else value


class PlainTable(Table):
    """A :class:`~rich.table.Table` whose string title, headers and cells are literal text."""

    def __init__(self, *headers: Any, **kwargs: Any) -> None:
        for key in ("title", "caption"):
            if key in kwargs:
                kwargs[key] = plain(kwargs[key])
        super().__init__(*(plain(h) for h in headers), **kwargs)

    def add_column(self, header: RenderableType = "", *args: Any, **kwargs: Any) -> None:
        super().add_column(plain(header), *args, **kwargs)

    def add_row(self, *renderables: RenderableType | None, **kwargs: Any) -> None:
        super().add_row(*(plain(r) for r in renderables), **kwargs)
