"""``attn-select check``: deployment files, globs or a ``vllm serve`` command line in;
a report per deployment and device out, in any format of
:data:`selector.report.formats.REPORTERS` (text, json, sarif, junit, github, markdown,
compact)."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from selector.catalog import Catalog, load_catalog
from selector.check.records import CheckReport
from selector.errors import InputError
from selector.report.formats import REPORTERS

__all__ = ["CheckFormat", "check", "looks_like_a_command_line", "register"]


CheckFormat = Enum("CheckFormat", {name: name for name in REPORTERS}, type=str)  # type: ignore[misc]
"""Output formats of ``check``: the names in :data:`selector.report.formats.REPORTERS`."""
_TEXT = CheckFormat("text")


_EPILOG = (
    "Examples: attn-select check deploy/*.yaml --format sarif -o attn-select.sarif | "
    "attn-select check --device H100 --device B200 config.yaml | "
    "attn-select check --device H100 -- vllm serve meta-llama/Llama-3.1-8B-Instruct "
    "--kv-cache-dtype fp8"
)


def _console(file: Any = None) -> Any:
    from selector.cli.console import make_console

    return make_console(file=file)


def _stderr(error: InputError) -> None:
    sys.stderr.write(f"attn-select: error: {error.render()}\n")


def looks_like_a_command_line(words: list[str]) -> bool:
    """A cheap pre-test (file names never look like this) before the full parser decides."""
    heads = [w.split()[0] if w.split() else w for w in words]  # a whole line given as one word
    if not any("=" in w or Path(w).name in ("vllm", "python", "python3", "docker", "podman",
                                           "nerdctl", "sudo", "docker-compose", "podman-compose")
               or w.startswith("python") for w in heads):
        return False
    from selector.inputs.serve import is_serve_command

    return is_serve_command(words)


def check(
    configs: Annotated[list[str], typer.Argument(
        help="Deployment files or globs (YAML, TOML or JSON), or after '--' a "
             "`vllm serve MODEL \\[flags]` command line.", show_default=False)],
    output_format: Annotated[CheckFormat, typer.Option(
        "--format", "-f", help="Output format.")] = _TEXT,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="Engine profile: exact (vllm==X.Y.Z), a minor series (vllm==X.Y, its "
                         "newest) or a range ('vllm>=X.Y') (default: $ATTN_SELECT_ENGINE, else the "
                         "vLLM installed here, else the newest profile).",
    )] = None,
    verbose: Annotated[int, typer.Option(
        "--verbose", "-v", count=True, metavar="", show_default=False,
        help="Show every backend and the environment. A flag: it takes no value "
             "(-vv is the same as -v).")] = 0,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Treat warnings (CUDA-graph downgrades, block-size-precluded "
                         "backends, ignored vLLM knobs) as failures.")] = False,
    device: Annotated[list[str] | None, typer.Option(
        "--device", "-d", help="Target GPU (repeat for a fleet view; 'all' = every known "
                               "device; a capability like 9.0 works too). Overrides the "
                               "files' device; required for a command line.")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="For a command line: the model preset or directory with config.json "
                        "to use instead of MODEL (when MODEL is a path on another machine).",
    )] = None,
    ignore: Annotated[list[str] | None, typer.Option(
        "--ignore", help="Acknowledge a warning code (repeatable, e.g. --ignore AS005): it stays "
                         "in the report as a note and no longer fails --strict. A deployment "
                         "file can list its own under `ignore:`.")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write the report to this file instead of stdout.")] = None,
    command_file: Annotated[Path | None, typer.Option(
        "--command-file", help="For a command line: the file that holds it (a workflow, a "
                               "script); SARIF results and annotations point at its line there "
                               "(default: the command line itself).")] = None,
    measurements: Annotated[Path | None, typer.Option(
        "--measurements", help="bench.json from `attn-select bench` (or the folder of a "
                               "`bench --ray` run: the file of each device): also show the valid "
                               "backend measured fastest and the flag that pins it.")] = None,
) -> None:
    """Validate every backend for each deployment, select one, explain why."""
    from selector.checkrun import (
        CheckOptions,
        exit_code,
        expand_configs,
        resolve_devices,
        validate_ignored,
    )
    from selector.pipeline.check import check_files, check_serve
    catalog = load_catalog()
    if measurements is not None:  # a bad file fails before any report is printed
        from selector.bench.measurements import load_measurements
        from selector.cli.bench import measurements_by_device

        if measurements.is_dir():
            measurements_by_device(measurements)
        else:
            load_measurements(measurements)
    devices = resolve_devices(device or [], catalog)
    options = CheckOptions(engine=engine, devices=devices, strict=strict,
                           ignore=validate_ignored(ignore or [], catalog))
    command = None
    errors: list[InputError] = []
    located: tuple[str, int | None] | None = None
    if looks_like_a_command_line(configs):
        command, records = check_serve(configs, catalog, options, model=model,
                                       environ=dict(os.environ))
        if command_file is not None:
            located = (str(command_file), _command_line_in(command_file, command.model))
    else:
        for given, flag in ((model, "--model"), (command_file, "--command-file")):
            if given is not None:
                raise InputError(f"{flag} applies to a `vllm serve` command line only",
                                 field=flag, hint="put the command line after '--'")
        if verbose:  # `-v 2`: the number is read as a file
            number = next((w for w in configs if w.isdigit() and not Path(w).exists()), None)
            if number is not None:
                raise InputError(f"{number!r} is no file: -v is a flag and takes no value",
                                 field="--verbose", hint="write -v without a number")
        records, errors = check_files(expand_configs(configs), catalog, options)
    if not REPORTERS[output_format.value].reports_input_errors:
        for error in errors:
            _stderr(error)
    try:
        choice = catalog.choose(engine)
    except InputError:  # a bad $ATTN_SELECT_ENGINE: each deployment's error above names it
        choice = None
    if choice is not None and output_format is _TEXT and output is None \
            and (choice.from_installed or verbose):
        _console().print(f"default engine {choice.name}: {choice.reason}" if engine is None
                         else f"engine {choice.name}: {choice.reason}", style="dim", highlight=False)
    decisions = None
    if measurements is not None:
        from selector.cli.bench import measured_decisions

        records, decisions = measured_decisions(measurements, records)
    text = _render(records, catalog, command, output_format, verbose=verbose,
                   fleet=len(devices) > 1, to_text=output is not None, located=located)
    if decisions is not None:
        from selector.cli.bench import measured_policy

        text = measured_policy(decisions, output_format, text)
    if text is not None:
        if output is not None:
            try:
                output.write_text(text, encoding="utf-8")
            except OSError as error:
                raise InputError(f"cannot write the report: {error.strerror or error}",
                                 file=str(output), field="--output",
                                 hint="give a writable file path") from None
        else:
            sys.stdout.write(text)
    raise typer.Exit(int(exit_code(records, len(errors))))


def _command_line_in(path: Path, model: str) -> int | None:
    """The first line of ``path`` that holds the ``vllm serve`` command (its model named
    after ``serve``, or ``serve`` alone); None when no line does."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise InputError(f"cannot read the command file: {reason or error}", file=str(path),
                         field="--command-file",
                         hint="give the workflow or script that holds the command line") from None
    for wanted in (f"serve {model}", "vllm serve", "serve"):
        for number, line in enumerate(lines, start=1):
            if wanted in line:
                return number
    return None


def _render(records: list[Any], catalog: Catalog, command: Any, output_format: Any, *,
            verbose: int,
            fleet: bool, to_text: bool = False,
            located: tuple[str, int | None] | None = None) -> str | None:
    """The report as text (None: printed to the console directly, unless ``to_text``)."""
    reporter = REPORTERS[output_format.value]
    report = CheckReport(records=records, catalog=catalog, command=command, verbose=verbose, fleet=fleet,
                         command_file=located[0] if located else None,
                         command_line=located[1] if located else None)
    if not reporter.prints:
        return reporter.load()(report, None)
    if to_text:
        import io

        buffer = io.StringIO()
        reporter.load()(report, _console(buffer))
        return buffer.getvalue()
    reporter.load()(report, _console())
    return None


def register(app: typer.Typer) -> None:
    """Add ``check`` to the ``attn-select`` app."""
    app.command("check", epilog=_EPILOG)(check)
