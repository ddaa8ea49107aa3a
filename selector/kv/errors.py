"""The error vLLM would raise at startup, carried with its exact text."""

from __future__ import annotations

from selector.errors import AttnSelectError, ExitCode

__all__ = ["EngineStartupError"]


class EngineStartupError(AttnSelectError):
    """vLLM would refuse to start: ``exc_type`` and ``message`` are what it raises."""

    exit_code = ExitCode.INVALID

    def __init__(self, message: str, *, exc_type: str = "ValueError", stage: str = "") -> None:
        self.message = message
        self.exc_type = exc_type
        self.stage = stage
        super().__init__(f"{exc_type}: {message}")
