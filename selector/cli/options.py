"""Command-line options several commands share, declared once (``explain`` and ``diff``
take every input ``check`` takes)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["DeviceOption", "EngineOption", "ModelOption"]

EngineOption = Annotated[
    str | None,
    typer.Option("--engine", help="Engine profile, exact (vllm==X.Y.Z) or a range "
                 "('vllm>=0.30') (default: newest)."),
]
DeviceOption = Annotated[list[str] | None, typer.Option(
    "--device", "-d", help="Target GPU, as for `check` (repeat; 'all'; a capability like "
                           "9.0). Overrides the files' device; required for a command line.")]
ModelOption = Annotated[str | None, typer.Option(
    "--model", help="For a command line: the model preset or directory with config.json "
                    "to use instead of MODEL.")]
