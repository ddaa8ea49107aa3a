"""The ``vllm serve`` command-line reader, kept under its old name for importers: see
:mod:`selector.serve`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

__all__ = [
    "ARG_CODES",
    "ServeCommand",
    "ServeNote",
    "device_ref",
    "is_serve_command",
    "parse_serve_command",
]

_LAZY = {  # imported on first use: `check` asks is_serve_command of every invocation
    "ARG_CODES": "selector.serve.command",
    "ServeCommand": "selector.serve.command",
    "ServeNote": "selector.serve.command",
    "device_ref": "selector.serve.command",
    "is_serve_command": "selector.serve.wrappers",
    "parse_serve_command": "selector.serve.parse",
}

if TYPE_CHECKING:
    from selector.serve.command import ARG_CODES, ServeCommand, ServeNote, device_ref
    from selector.serve.parse import parse_serve_command
    from selector.serve.wrappers import is_serve_command

__getattr__ = lazy_getattr(__name__, _LAZY)
