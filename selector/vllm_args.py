"""The ``vllm serve`` command-line reader, kept under its old name for importers: see
:mod:`selector.serve`."""

from __future__ import annotations

from selector.serve import (
    ARG_CODES,
    ServeCommand,
    ServeNote,
    device_ref,
    is_serve_command,
    parse_serve_command,
)

__all__ = [
    "ARG_CODES",
    "ServeCommand",
    "ServeNote",
    "device_ref",
    "is_serve_command",
    "parse_serve_command",
]
