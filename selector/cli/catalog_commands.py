"""``attn-select explain``, ``list`` and ``sweep``: the commands that read the catalog or
run the pipeline on their own input (registered like the others, when used)."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from selector.cli.options import DeviceOption, EngineOption, ModelOption
from selector.errors import ExitCode, InputError

__all__ = ["ListWhat", "OutputFormat", "explain", "list_", "register", "sweep"]


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


class ListWhat(str, Enum):
    backends = "backends"
    devices = "devices"
    codes = "codes"
    engines = "engines"
    presets = "presets"
    models = "models"


def _console() -> Any:
    from selector.cli.console import make_console

    return make_console()


def _emit_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")


def explain(
    backend: Annotated[str, typer.Argument(help="Backend name, e.g. FLASH_ATTN.")],
    configs: Annotated[list[str], typer.Argument(
        help="Deployment files or globs, or after '--' a `vllm serve MODEL [flags]` command "
             "line (every input `check` takes).", show_default=False)],
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.text,
    engine: EngineOption = None,
    layer: Annotated[int | None, typer.Option(
        "--layer", "-l", help="For a model deployment: the layer index to explain (default: the first "
             "attention layer).")] = None,
    device: DeviceOption = None,
    model: ModelOption = None,
) -> None:
    """Every check of one backend for a deployment (or one layer of a model): the rule,
    the facts it read, the result."""
    import os

    from selector.catalog import load_catalog
    from selector.checkrun import CheckOptions, resolve_devices
    from selector.cli.check import looks_like_a_command_line
    from selector.pipeline.check import check_inputs
    from selector.pipeline.explain import explain_layer
    from selector.report import render_explain

    catalog = load_catalog()
    options = CheckOptions(engine=engine, devices=resolve_devices(device or [], catalog))
    inputs, errors, _ = check_inputs(configs, catalog, options,
                                     serve_line=looks_like_a_command_line(configs), model=model,
                                     environ=dict(os.environ))
    if errors:
        raise errors[0][1]
    documents: list[dict[str, Any]] = []
    all_valid = True
    for each in inputs:
        explained = explain_layer(each.loaded, backend, catalog, engine=engine, layer=layer,
                                  model_facts=each.model)
        request, result, name = explained.request, explained.result, explained.backend
        layer_note: dict[str, Any] = ({} if request.layer is None
                                      else {"layer": request.layer, "kind": request.kind})
        refused = [f"[{n.code}] {n.message}" for n in (each.command.notes if each.command else ())
                   if n.level == "error"]  # vLLM refuses the command line itself
        all_valid = all_valid and explained.valid and not refused
        if output_format is OutputFormat.json:
            documents.append({"backend": name, "engine": result.engine, "valid": explained.valid,
                              **({"command_refused": refused} if refused else {}),
                              **({"source": each.loaded.path, "device": _device_name(each)}
                                 if len(inputs) > 1 else {}),
                              **layer_note, "checks": explained.checks})
        else:
            if len(inputs) > 1:
                _console().print(f"{each.loaded.path} on {_device_name(each)}", style="bold")
            for line in refused:
                _console().print(f"error {line}", style="red", highlight=False, markup=False)
            _console().print(render_explain(result, name, explained.checks))
    if output_format is OutputFormat.json:
        _emit_json(documents[0] if len(documents) == 1 else documents)
    raise typer.Exit(int(ExitCode.OK if all_valid else ExitCode.INVALID))


def _device_name(each: Any) -> str:
    device = each.loaded.deployment.device
    return device if isinstance(device, str) else f"capability {device.capability}"


def list_(
    what: Annotated[ListWhat, typer.Argument(
        help="backends, devices, codes, engines, presets or models.")],
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.text,
    engine: EngineOption = None,
) -> None:
    """List the shipped backends, devices, reason codes, engine profiles, model presets or
    the model architectures an engine version supports (with their layer family and presets)."""
    from selector.catalog import load_catalog
    from selector.report.plain import PlainTable

    catalog = load_catalog()
    rows: list[dict[str, Any]]
    if what is ListWhat.backends:
        data = catalog.engine(engine)
        rows = [{"name": b.name, "class": b.class_name, "family": b.family, "selection": b.selection,
                 "description": b.description} for b in data.backends.values()]
    elif what is ListWhat.devices:
        rows = [{"name": d.name, "capability": d.capability, "architecture": d.architecture,
                 "memory_gib": d.memory_gib, "hbm_bandwidth_tbs": d.hbm_bandwidth_tbs,
                 "bf16_dense_tflops": d.bf16_dense_tflops, "aliases": list(d.aliases)}
                for d in catalog.devices]
    elif what is ListWhat.models:
        from selector.models.arch_registry import model_rows

        rows = model_rows(catalog.engine(engine))
    elif what is ListWhat.codes:
        rows = [{"code": c.code, "name": c.name, "severity": c.severity, "message": c.message,
                 "hint": c.hint} for c in catalog.codes.values()]
    elif what is ListWhat.presets:
        from selector.models import presets

        aliases = presets.preset_aliases()
        rows = [{"name": name, "architecture": presets.preset_architecture(name),
                 "config_of": presets.preset_origin(name) or "-",
                 "aliases": [a for a in aliases[name] if a not in (name, presets.preset_origin(name))]}
                for name in presets.list_presets()]
    else:
        rows = []
        choice = catalog.choose(None)
        for name in catalog.engine_names:
            data = catalog.engine(name)
            rows.append({"engine": name, "default": name == choice.name,
                         "extends": data.profile.extends, "backends": len(data.backends),
                         "description": data.profile.description})
        if output_format is not OutputFormat.json:
            _console().print(f"default: {choice.name} ({choice.reason})", highlight=False)
    if output_format is OutputFormat.json:
        _emit_json(rows)
        return
    table = PlainTable(title=what.value)
    keys = [k for k in rows[0] if k not in ("aliases", "hint")] if rows else []
    for key in keys:
        table.add_column(key)
    for row in rows:
        table.add_row(*(str(row[k]) for k in keys))
    _console().print(table)


def sweep(
    source: Annotated[str, typer.Argument(
        help="JSON Lines of flat selector configs ('-' = stdin).")] = "-",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write here instead of stdout.")] = None,
    engine: EngineOption = None,
    backends: Annotated[str | None, typer.Option(
        help="Comma-separated backends to report (default: the oracle's set).")] = None,
) -> None:
    """Batch mode: one JSON verdict line per config, in the oracle's shape.

    A line that is no config gets a verdict line with its error ("bad input: line N:
    ..."); when no line is a config (every line bad, or no line at all) sweep exits 2."""
    from selector.catalog import load_catalog
    from selector.sweep import bad_input, sweep_lines

    catalog = load_catalog()
    data = catalog.engine(engine)
    names = None
    if backends:
        names = tuple(data.backend(b.strip()).name for b in backends.split(",") if b.strip())
    if source == "-":
        stream = sys.stdin
    else:
        path = Path(source)
        if not path.is_file():
            raise InputError("no such file", file=source, hint="give a JSON Lines file or '-' for stdin")
        stream = path.open(encoding="utf-8")
    try:
        out = output.open("w", encoding="utf-8") if output else sys.stdout
    except OSError as error:
        if stream is not sys.stdin:
            stream.close()
        raise InputError(f"cannot write the verdicts: {error.strerror or error}",
                         file=str(output), field="--output",
                         hint="give a writable file path") from None
    written = bad = 0
    first_bad: str | None = None
    try:
        write = out.write
        for line in sweep_lines(stream, data, names, catalog=catalog):
            write(line + "\n")
            written += 1
            if '"bad input: ' in line and (message := bad_input(line)) is not None:
                bad += 1
                first_bad = first_bad or message
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=source,
                         hint="write the configs as UTF-8 JSON Lines") from None
    finally:
        if output:
            out.close()
        if stream is not sys.stdin:
            stream.close()
    where = "stdin" if source == "-" else source
    if written == 0:
        raise InputError("no configs in the input: every line is empty", file=where,
                         hint="give JSON Lines, one flat selector config per line")
    if bad == written:
        raise InputError(f"none of the {written} line(s) is a config attn-select can read "
                         f"(first: {first_bad})", file=where,
                         hint="each line is one JSON object of flat selector fields")
    if bad:
        sys.stderr.write(f"attn-select: {where}: {bad} of {written} line(s) are not configs "
                         f"(first: {first_bad}); their verdict lines carry the error\n")


def register(app: typer.Typer) -> None:
    """Add ``explain``, ``list`` and ``sweep`` to the ``attn-select`` app."""
    app.command()(explain)
    app.command("list")(list_)
    app.command()(sweep)
