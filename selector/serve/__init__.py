"""``vllm serve`` command lines -> deployments to check, plus notes.

One module per job:

* :mod:`~selector.serve.wrappers` finds the ``vllm serve`` words (variables,
  ``docker run``, ``python -m``);
* :mod:`~selector.serve.flags` reads the engine's flag table (``serve-flags.yaml``);
* :mod:`~selector.serve.tokenize` parses the words with argparse built from it;
* :mod:`~selector.serve.values` parses flag values;
* :mod:`~selector.serve.presets` resolves MODEL to a ``config.json``;
* :mod:`~selector.serve.flag_settings`, :mod:`~selector.serve.config_flags` and
  :mod:`~selector.serve.environment` turn flags, JSON config flags and variables into
  :class:`~selector.serve.settings.Settings`;
* :mod:`~selector.serve.flag_notes` notes the other flags;
* :mod:`~selector.serve.parse` assembles the :class:`ServeCommand`.
"""

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
