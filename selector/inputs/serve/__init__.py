"""``vllm serve`` command lines -> deployments to check, plus notes.

One module per job:

* :mod:`~selector.inputs.serve.wrappers` finds the ``vllm serve`` words (variables,
  ``docker run``, ``python -m``);
* :mod:`~selector.inputs.serve.flags` reads the engine's flag table (``serve-flags.yaml``);
* :mod:`~selector.inputs.serve.tokenize` parses the words with argparse built from it;
* :mod:`~selector.inputs.serve.values` parses flag values;
* :mod:`~selector.inputs.serve.presets` resolves MODEL to a ``config.json``;
* :mod:`~selector.inputs.serve.flag_settings`, :mod:`~selector.inputs.serve.config_flags` and
  :mod:`~selector.inputs.serve.environment` turn flags, JSON config flags and variables into
  :class:`~selector.inputs.serve.settings.Settings`;
* :mod:`~selector.inputs.serve.flag_notes` notes the other flags;
* :mod:`~selector.inputs.serve.parse` assembles the :class:`ServeCommand`.
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
    "ARG_CODES": "selector.inputs.serve.command",
    "ServeCommand": "selector.inputs.serve.command",
    "ServeNote": "selector.inputs.serve.command",
    "device_ref": "selector.inputs.serve.command",
    "is_serve_command": "selector.inputs.serve.wrappers",
    "parse_serve_command": "selector.inputs.serve.parse",
}

if TYPE_CHECKING:
    from selector.inputs.serve.command import ARG_CODES, ServeCommand, ServeNote, device_ref
    from selector.inputs.serve.parse import parse_serve_command
    from selector.inputs.serve.wrappers import is_serve_command

__getattr__ = lazy_getattr(__name__, _LAZY)
