"""``attn-select diff``: what changes between two engine versions, for one
deployment or (``--all``) over a support matrix of representative configs."""

from __future__ import annotations

import json
import sys
from enum import Enum
from typing import Annotated, Any

import typer

from selector.cli.options import DeviceOption, ModelOption
from selector.errors import ExitCode, InputError

__all__ = ["DiffFormat", "diff", "register"]


class DiffFormat(str, Enum):
    """Output formats of ``diff``."""

    text = "text"
    json = "json"


def _console() -> Any:
    from selector.cli.console import make_console

    return make_console()


def _engines(from_engine: str | None, to_engine: str | None) -> tuple[str, str]:
    """Resolve ``--from`` / ``--to`` (exact versions or ranges); defaults: ``--to``
    the newest profile, ``--from`` the newest profile older than ``--to``."""
    from selector.catalog import load_catalog

    catalog = load_catalog()
    target = catalog.release(to_engine or catalog.default_engine)  # newest, not the pinned default
    if from_engine:
        return catalog.release(from_engine), target
    family, version = catalog.release_version(target)
    older = [name for name in catalog.engine_names
             if catalog.release_version(name)[0] == family
             and catalog.release_version(name)[1] < version]
    if not older:
        raise InputError(f"no profile older than {target} to compare with", field="from",
                         hint="give --from; available: " + ", ".join(catalog.engine_names))
    return max(older, key=lambda name: catalog.release_version(name)[1]), target


def diff(
    configs: Annotated[list[str] | None, typer.Argument(
        help="Deployment files or globs, or after '--' a `vllm serve MODEL [flags]` command "
             "line (every input `check` takes); omit with --all.", show_default=False)] = None,
    from_engine: Annotated[str | None, typer.Option(
        "--from", help="Source engine, an exact profile (vllm==X.Y.Z) or a range ('vllm<0.30') "
        "(default: the newest profile older than --to).")] = None,
    to_engine: Annotated[str | None, typer.Option(
        "--to", help="Target engine, an exact profile (vllm==X.Y.Z) or a range ('vllm>=0.30') "
        "(default: newest).")] = None,
    output_format: Annotated[DiffFormat, typer.Option(
        "--format", "-f", help="Output format.")] = DiffFormat.text,
    sweep_all: Annotated[bool, typer.Option(
        "--all", help="Without a file: sweep the support matrix and summarise what changed "
                      "per backend. With a file: show every backend and field, changed or not."
    )] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Show unchanged backends and fields too.")] = False,
    device: DeviceOption = None,
    model: ModelOption = None,
) -> None:
    """What changes between two engine versions: validity, selected backend, FA version,
    block size, layout, CUDA-graph mode and each backend's reasons; for a model or a
    command line, check's verdict under each and each layer group's selection.  Exits 1
    when the verdict (validity, an error or a selected backend) changes."""
    import os

    from selector.catalog import load_catalog
    from selector.checkrun import resolve_devices
    from selector.cli.check import looks_like_a_command_line
    from selector.compare.diff import DeploymentDiff
    from selector.pipeline.diff import diff_inputs, sweep_matrix
    from selector.report.diff import (
        deployment_diff_to_json,
        matrix_diff_to_json,
        model_diff_to_json,
        render_deployment_diff,
        render_matrix_diff,
        render_model_diff,
    )

    source, target = _engines(from_engine, to_engine)
    if sweep_all and configs:
        verbose = True  # a file with --all: every backend and field, changed or not
    elif sweep_all:
        matrix = sweep_matrix(source, target, catalog=load_catalog())
        if output_format is DiffFormat.json:
            sys.stdout.write(json.dumps(matrix_diff_to_json(matrix), indent=2, default=str) + "\n")
        else:
            _console().print(render_matrix_diff(matrix, verbose=verbose))
        raise typer.Exit(int(ExitCode.INVALID if matrix.verdicts_changed else ExitCode.OK))
    if not configs:
        raise InputError("missing deployment file", field="config",
                         hint=f"attn-select diff CONFIG --from {source} --to {target}, or --all")
    catalog = load_catalog()
    results, errors = diff_inputs(configs, source, target, catalog=catalog,
                                  devices=resolve_devices(device or [], catalog),
                                  serve_line=looks_like_a_command_line(configs), model=model,
                                  environ=dict(os.environ))
    if errors:
        raise errors[0][1]
    documents = []
    for each in results:
        if isinstance(each.diff, DeploymentDiff):
            documents.append(deployment_diff_to_json(each.diff, device=each.device))
            if output_format is DiffFormat.text:
                _console().print(render_deployment_diff(each.diff, device=each.device,
                                                        verbose=verbose))
        else:
            documents.append(model_diff_to_json(each.diff, device=each.device))
            if output_format is DiffFormat.text:
                _console().print(render_model_diff(each.diff, device=each.device,
                                                   verbose=verbose))
    if output_format is DiffFormat.json:
        document = documents[0] if len(documents) == 1 else documents
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    changed = any(each.diff.verdict_changed for each in results)
    raise typer.Exit(int(ExitCode.INVALID if changed else ExitCode.OK))


def register(app: typer.Typer) -> None:
    """Add ``diff`` to the ``attn-select`` application."""
    app.command("diff")(diff)
