"""The ``vllm serve`` command-line reader, kept under its old name for importers: see
:mod:`selector.serve`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector import serve

__all__ = [
    "ARG_CODES",
    "ServeCommand",
    "ServeNote",
    "device_ref",
    "is_serve_command",
    "parse_serve_command",
]

if TYPE_CHECKING:
    from selector.serve.command import ARG_CODES, ServeCommand, ServeNote, device_ref
    from selector.serve.parse import parse_serve_command
    from selector.serve.wrappers import is_serve_command

__getattr__ = serve.__getattr__
"""Each name is :mod:`selector.serve`'s, imported on first use as that package does."""
