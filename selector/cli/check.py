"""``attn-select check``: deployment files, globs or a ``vllm serve`` command line in;
a report per deployment and device out (text, json, sarif, junit, github, markdown)."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from selector.errors import InputError

__all__ = ["CheckFormat", "check", "register"]


class CheckFormat(str, Enum):
    """Output formats of ``check``."""

    text = "text"
    json = "json"
    sarif = "sarif"
    junit = "junit"
    github = "github"
    markdown = "markdown"


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


def _json_documents(records: list[Any], command: Any) -> list[dict[str, Any]]:
    from selector.report import result_to_json

    documents = []
    for record in records:
        if record.model is not None:
            from selector.report.model import model_to_json

            document = model_to_json(record.model, source=record.source, device=record.device)
        elif record.result is not None:
            document = result_to_json(record.result, source=record.source, device=record.device)
        else:  # unreadable input, or refused before any layer was solved (SU003, SU006)
            from selector.report.json import JSON_SCHEMA_VERSION

            document = {"schema_version": JSON_SCHEMA_VERSION, "source": record.source,
                        "device": record.device if record.status == "invalid" else None,
                        "engine": record.engine, "valid": False, "status": record.status}
        document["passed"] = not record.failed
        if record.status != "valid":
            document["valid"] = False
        document["findings"] = [
            {"level": f.level, "code": f.code, "name": f.name, "message": f.message,
             "hint": f.hint, "line": f.line, "field": f.field, "backend": f.backend}
            for f in record.findings]
        if record.group is not None:
            document["layer_group"] = record.group
        if command is not None:
            document["command"] = {"argv": list(command.shown_argv), "model": command.model,
                                   "model_source": command.model_source,
                                   "settings": record.settings}
        documents.append(document)
    return documents


def _looks_like_a_command_line(words: list[str]) -> bool:
    """A cheap pre-test (file names never look like this) before the full parser decides."""
    if not any("=" in w or Path(w).name in ("vllm", "python", "python3", "docker", "podman",
                                           "nerdctl", "sudo") or w.startswith("python")
               for w in words):
        return False
    from selector.vllm_args import is_serve_command

    return is_serve_command(words)


def check(
    configs: Annotated[list[str], typer.Argument(
        help="Deployment files or globs (YAML, TOML or JSON), or after '--' a "
             "`vllm serve MODEL [flags]` command line.", show_default=False)],
    output_format: Annotated[CheckFormat, typer.Option(
        "--format", "-f", help="Output format.")] = CheckFormat.text,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="Engine profile: exact (vllm==X.Y.Z), a minor series (vllm==X.Y, its "
                         "newest) or a range ('vllm>=X.Y') (default: the vLLM installed here, "
                         "else the newest profile).",
    )] = None,
    verbose: Annotated[int, typer.Option(
        "--verbose", "-v", count=True, help="Show every backend and the environment.")] = 0,
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
    measurements: Annotated[Path | None, typer.Option(
        "--measurements", help="bench.json from `attn-select bench` (or the folder of a "
                               "`bench --ray` run: the file of each device): also show the valid "
                               "backend measured fastest and the flag that pins it.")] = None,
) -> None:
    """Validate every backend for each deployment, select one, explain why."""
    from selector.catalog import load_catalog
    from selector.checkrun import (
        CheckOptions,
        check_files,
        check_serve,
        exit_code,
        expand_configs,
        resolve_devices,
        validate_ignored,
    )
    catalog = load_catalog()
    devices = resolve_devices(device or [], catalog)
    options = CheckOptions(engine=engine, devices=devices, strict=strict,
                           ignore=validate_ignored(ignore or [], catalog))
    command = None
    errors: list[InputError] = []
    if _looks_like_a_command_line(configs):
        command, records = check_serve(configs, catalog, options, model=model,
                                       environ=dict(os.environ))
    else:
        if model is not None:
            raise InputError("--model applies to a `vllm serve` command line only",
                             field="--model", hint="put the command line after '--'")
        records, errors = check_files(expand_configs(configs), catalog, options)
    for error in errors:
        _stderr(error)
    choice = catalog.choose(engine)
    if output_format is CheckFormat.text and output is None and (choice.from_installed or verbose):
        _console().print(f"default engine {choice.name}: {choice.reason}" if engine is None
                         else f"engine {choice.name}: {choice.reason}", style="dim", highlight=False)
    text = _render(records, command, output_format, verbose=verbose,
                   fleet=len(devices) > 1, to_text=output is not None)
    if measurements is not None:
        from selector.cli.bench import measured_policy

        text = measured_policy(measurements, records, output_format, text)
    if text is not None:
        if output is not None:
            output.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    raise typer.Exit(int(exit_code(records, len(errors))))


def _render(records: list[Any], command: Any, output_format: CheckFormat, *, verbose: int,
            fleet: bool, to_text: bool = False) -> str | None:
    """The report as text (None: printed to the console directly, unless ``to_text``)."""
    from selector import __version__
    from selector.report.github import render_github
    from selector.report.junit import render_junit
    from selector.report.markdown import render_markdown
    from selector.report.records import CLI_CODES
    from selector.report.sarif import render_sarif

    if output_format is CheckFormat.json:
        documents = _json_documents(records, command)
        if not documents:
            return None
        body = documents[0] if len(documents) == 1 else documents
        return json.dumps(body, indent=2, default=str) + "\n"
    if output_format is CheckFormat.sarif:
        from selector.catalog import load_catalog
        from selector.vllm_args import ARG_CODES

        descriptions = {c.code: (c.name, c.hint or c.message)
                        for c in load_catalog().codes.values()}
        descriptions.update(CLI_CODES)
        descriptions.update(ARG_CODES)
        document = render_sarif(records, version=__version__, descriptions=descriptions)
        return json.dumps(document, indent=2) + "\n"
    if output_format is CheckFormat.junit:
        return render_junit(records)
    if output_format is CheckFormat.github:
        return render_github(records)
    if output_format is CheckFormat.markdown:
        return render_markdown(records)
    if to_text:
        import io

        buffer = io.StringIO()
        _print_text(records, command, verbose=verbose, fleet=fleet, console=_console(buffer))
        return buffer.getvalue()
    _print_text(records, command, verbose=verbose, fleet=fleet, console=_console())
    return None


def _print_text(records: list[Any], command: Any, *, verbose: int, fleet: bool,
                console: Any) -> None:
    from selector.report import render_check
    from selector.report.summary import render_fleet, render_notes

    if command is not None:
        notes = list(dict.fromkeys(f for r in records for f in r.findings
                                   if f.code.startswith("AS1")))
        if notes:
            console.print(render_notes(notes))
    for record in records:
        if fleet and not verbose:
            continue
        title = record.label if command is None else f"vllm serve {command.model}"
        if record.model is not None:
            from selector.report.model import render_model

            architecture = [f for f in record.findings if f.code in ("AS131", "AS132", "AS133")]
            if architecture:
                console.print(render_notes(architecture))
            console.print(render_model(record.model, device=record.device, source=title,
                                       valid=record.status == "valid"))
            shown = {issue.code for issue in record.model.startup}
            others = [f for f in record.findings if f.code.startswith("AS0") or (
                f.level != "note" and f.code not in shown and not f.code.startswith("AS1"))]
            if others:
                console.print(render_notes(others))
        elif record.result is not None:
            acknowledged = frozenset(f.code for f in record.findings if f.level == "note")
            console.print(render_check(record.result, device=record.device, source=title,
                                       verbose=verbose, acknowledged=acknowledged))
        elif record.status == "invalid":  # refused before any layer was solved
            console.print(render_notes([f for f in record.findings if f.level == "error"]))
    if fleet:
        console.print(render_fleet(records))


def register(app: typer.Typer) -> None:
    """Add ``check`` to the ``attn-select`` app."""
    app.command("check", epilog=_EPILOG)(check)
