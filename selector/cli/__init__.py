"""The ``attn-select`` command line: the only place that prints or exits."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from selector import __version__

try:  # typer >= 0.27 carries its own copy of click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer depends on click itself
    from click import ClickException  # type: ignore[no-redef,import-not-found,assignment,unused-ignore]

from selector.errors import AttnSelectError, ExitCode, InputError

__all__ = ["app", "main", "reflowed", "register_commands", "run"]

app = typer.Typer(
    name="attn-select",
    help="Validate and select vLLM attention backends before deploy, explain why, "
    "and prove the choice on a GPU.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"attn-select {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", is_eager=True,
        callback=_print_version)] = False,
) -> None:
    """Validate and select vLLM attention backends before deploy, explain why, and prove
    the choice on a GPU."""
    del version


_SUBCOMMANDS: dict[str, str] = {
    "check": "selector.cli.check",
    "explain": "selector.cli.catalog_commands",
    "diff": "selector.cli.diff",
    "verify": "selector.cli.verify",
    "list": "selector.cli.catalog_commands",
    "sweep": "selector.cli.catalog_commands",
    "smoke": "selector.cli.smoke",
    "smoke-plan": "selector.cli.smoke",
    "bench": "selector.cli.bench",
    "metadata": "selector.cli.metadata",
    "docs": "selector.cli.docs",
}
"""Every command's module (``register(app)``), imported only when used so that
``attn-select check`` builds and loads no other command (the GPU, docs or diff machinery).
The order is the one ``--help`` and the README's Commands table list them in: the gate
first, then what explains and compares it, the GPU runs, and the tools."""
_REGISTERED: set[str] = set()


def register_commands(argv: list[str] | None = None) -> None:
    """Register the subcommand modules ``argv`` needs (all of them for help or when unsure)."""
    import importlib

    wanted = next((a for a in (argv or []) if not a.startswith("-")), None)
    # every module in the order of _SUBCOMMANDS, which is the order `--help` lists them in
    modules = [_SUBCOMMANDS[wanted]] if wanted in _SUBCOMMANDS else list(dict.fromkeys(_SUBCOMMANDS.values()))
    for module in modules:
        if module in _REGISTERED:
            continue
        try:
            loaded = importlib.import_module(module)
        except ImportError:  # an optional command that is not part of this build
            continue
        loaded.register(app)
        _REGISTERED.add(module)
    order = list(_SUBCOMMANDS)  # `--help` lists the commands in this order, whatever came first
    app.registered_commands.sort(key=lambda info: order.index(_name(info)) if _name(info) in order
                                 else len(order))
    for info in app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = reflowed(info.callback.__doc__)


def reflowed(docstring: str) -> str:
    """A docstring as ``--help`` shows it: each paragraph one line, which the terminal
    wraps at its width (typer's rich help keeps a docstring's own line breaks, so a
    docstring wrapped at 90 columns broke mid-sentence in a narrower terminal)."""
    import inspect

    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def _name(info: Any) -> str:
    """A registered command's name (typer's default: the function's, with dashes)."""
    return str(info.name or info.callback.__name__.lower().replace("_", "-"))


def run() -> None:
    """The ``attn-select`` process (the console script and ``python -m selector``):
    :func:`main`, tuned for a command that ends with its process.

    - The garbage collector: start-up allocates tens of thousands of long-lived objects
      (modules, classes, the catalog); with the default thresholds the collector walks
      them again and again while they load.  A higher first threshold keeps collections
      rare (they still run, so a long sweep or smoke run stays bounded).
    - Pydantic's plugin discovery is off unless the user's environment asks otherwise
      (``PYDANTIC_DISABLE_PLUGINS``): the plugins observe an application's validation,
      and this process's validation is the tool's own; finding them reads the entry
      points of every installed distribution.
    - The end: see :func:`_end_process`.

    In-process callers (tests, library users) call :func:`main` and keep their
    collector's and pydantic's settings and their interpreter."""
    import gc

    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    gc.set_threshold(100_000, 20, 20)
    try:
        main()
    except SystemExit as done:
        gc.freeze()  # a normal exit then skips walking what is alive
        if isinstance(done.code, int):
            _end_process(done.code)
        raise


def _end_process(code: int) -> None:
    """Leave with ``code`` at once when nothing remains to run at exit: the standard
    streams flushed, no ``atexit`` callback registered and no other thread alive (a
    ``check``, ``explain`` or ``diff``).  Python's own teardown would then only free
    every object of the process one by one, about 13 ms of CPU after a ``check`` (the
    operating system frees the memory at once).  Returns when something remains (a Ray
    or torch run registers callbacks and threads) or a stream cannot be flushed (a
    closed pipe): the caller then exits the normal way, which reports it."""
    import atexit
    import threading

    pending = getattr(atexit, "_ncallbacks", lambda: 1)()
    if pending or threading.active_count() > 1:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def main() -> None:
    """Console-script entry point: maps every failure to its exit code."""
    try:
        register_commands(sys.argv[1:])
        code = app(standalone_mode=False)
        raise SystemExit(int(code or 0))
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except AttnSelectError as exc:
        message = exc.render() if isinstance(exc, InputError) else str(exc)
        sys.stderr.write(f"attn-select: error: {message}\n")
        raise SystemExit(int(exc.exit_code)) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except ClickException as exc:  # a usage error (unknown option, bad value, ...)
        exc.show()
        raise SystemExit(int(ExitCode.USAGE)) from None
    except typer.Abort:
        raise SystemExit(130) from None
    except Exception as exc:
        sys.stderr.write(
            f"attn-select: internal error: {type(exc).__name__}: {exc}\n"
            "This is a bug in attn-select; please report it with the command you ran.\n"
        )
        raise SystemExit(int(ExitCode.INTERNAL)) from None
