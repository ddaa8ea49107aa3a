"""``attn-select docs [--check]``: write (or verify) the generated support matrix,
reason-code catalogue, device catalog and JSON Schemas."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from selector.errors import ExitCode, InputError

__all__ = ["docs", "register"]


def docs(
    check: Annotated[bool, typer.Option(
        "--check", help="Write nothing; exit 1 listing the files that differ from what the "
                        "data generates.")] = False,
    root: Annotated[Path, typer.Option(
        "--root", help="The repository root to write under (docs/ and schemas/jsonschema/).",
    )] = Path("."),
) -> None:
    """Generate docs/ (support matrix, reason codes, devices) and schemas/jsonschema/."""
    from selector.catalog import load_catalog
    from selector.docsgen import drifted, generate, write

    if not root.is_dir():
        raise InputError("not a directory", file=str(root), field="--root")
    files = generate(load_catalog())
    if check:
        stale = drifted(root, files)
        if stale:
            sys.stdout.write("generated files are out of date (run `attn-select docs`):\n")
            for path in stale:
                sys.stdout.write(f"  {path}\n")
            raise typer.Exit(int(ExitCode.INVALID))
        sys.stdout.write(f"{len(files)} generated files are up to date\n")
        return
    touched = write(root, files)
    for path in touched:
        sys.stdout.write(f"wrote {path}\n")
    sys.stdout.write(f"{len(files)} generated files, {len(touched)} changed\n")


def register(app: typer.Typer) -> None:
    """Add ``docs`` to the ``attn-select`` app."""
    app.command("docs")(docs)
