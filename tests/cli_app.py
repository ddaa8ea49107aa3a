"""A typer application holding one command module's commands, for CLI tests."""

from __future__ import annotations

from collections.abc import Callable

import typer

__all__ = ["command_app"]


def command_app(register: Callable[[typer.Typer], object]) -> typer.Typer:
    """An application with ``register``'s commands under a root callback, so a single
    command stays a subcommand (invoked by its name, as ``attn-select`` does)."""
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:
        """Test root."""

    return app
