"""Exit codes and the exception hierarchy; each exception carries its exit code."""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "AttnSelectError",
    "CannotRunHereError",
    "ExitCode",
    "InputError",
    "InvalidDeploymentError",
    "SmokeFailedError",
]


class ExitCode(IntEnum):
    """Process exit codes; each value has one meaning."""

    OK = 0
    """The configuration is valid (or the command succeeded)."""
    INVALID = 1
    """Well-formed input whose configuration is invalid (findings)."""
    USAGE = 2
    """Usage or input error: bad file, unknown field or name, wrong type."""
    SMOKE_FAILED = 3
    """A GPU smoke kernel or check failed."""
    CANNOT_RUN = 4
    """The smoke check cannot run here (no GPU or a library is missing)."""
    SUBSTITUTED = 5
    """Every smoke check passed, but on another kernel than the plan negotiated (e.g. FA4
    for a plan that negotiated FA3): not proof of what vLLM will run."""
    INTERNAL = 70
    """An unexpected internal error (a bug in attn-select)."""


class AttnSelectError(Exception):
    """Base class of every error attn-select raises on purpose."""

    exit_code: ExitCode = ExitCode.INTERNAL


class InputError(AttnSelectError):
    """Bad user input: names the file, the field and the fix."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None,
                 hint: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.file = file
        self.field = field
        self.hint = hint
        self.line = line
        super().__init__(self.render())

    def render(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: "
        if self.field:
            text += f"field '{self.field}': "
        text += self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class InvalidDeploymentError(AttnSelectError):
    """A well-formed deployment that vLLM would reject (findings, not an input error)."""

    exit_code = ExitCode.INVALID


class SmokeFailedError(AttnSelectError):
    """A kernel output or a metadata invariant check failed on the GPU."""

    exit_code = ExitCode.SMOKE_FAILED


class CannotRunHereError(AttnSelectError):
    """The smoke check cannot run on this machine (no GPU, library missing)."""

    exit_code = ExitCode.CANNOT_RUN
