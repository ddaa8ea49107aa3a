"""``check`` through the stages: deployment files (on their own device or each given one)
or a ``vllm serve`` command line in, one :class:`CheckRecord` per deployment and device out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import selector.serve as serve_args  # the command-line reader loads on first use
from selector.catalog import Catalog
from selector.checkrun import (
    CheckOptions,
    input_error_record,
    layer_record,
    model_record,
    refused_record,
    serve_record,
    validate_ignored,
)
from selector.config import LoadedDeployment, load_deployment
from selector.errors import InputError
from selector.pipeline.deployment import Solved, solve_deployment
from selector.records import CheckRecord
from selector.schema.request import Deployment

if TYPE_CHECKING:
    from selector.models import ModelFacts
    from selector.serve import ServeCommand

__all__ = ["check_deployment", "check_files", "check_serve", "record_of"]


def record_of(solved: Solved, catalog: Catalog, options: CheckOptions, *,
              source: str | None = None, settings: dict[str, object] | None = None) -> CheckRecord:
    """The check record of one solved deployment."""
    if solved.refused is not None:
        return refused_record(solved.refused, solved.loaded, engine=solved.engine,
                              device=solved.device, options=options, source=source,
                              settings=settings)
    if solved.model is not None:
        return model_record(solved.model, solved.loaded, catalog, device=solved.device,
                            options=options, source=source, settings=settings)
    assert solved.layer is not None
    return layer_record(solved.layer, solved.loaded, device=solved.device,
                        startup=solved.startup, options=options, source=source,
                        settings=settings)


def check_deployment(loaded: LoadedDeployment, catalog: Catalog, options: CheckOptions, *,
                     model: ModelFacts | None = None, kv_options: Mapping[str, Any] | None = None,
                     source: str | None = None,
                     settings: dict[str, object] | None = None,
                     environ: Mapping[str, str] | None = None) -> CheckRecord:
    """Solve one loaded deployment (on its own device) and build its record.

    A deployment with ``model:`` gets the whole-model check (every layer, then the
    KV cache); ``model`` replaces the facts read from it (e.g. with ``--hf-overrides``
    applied) and ``kv_options`` adds KV-planner options.
    """
    deployment = loaded.deployment
    if deployment.ignore:
        options = replace(options, ignore=options.ignore | validate_ignored(
            deployment.ignore, catalog, file=loaded.path, field="ignore",
            line=loaded.line_of(("ignore",))))
    solved = solve_deployment(loaded, catalog, engine=options.engine, model=model,
                              kv_options=kv_options, settings=settings, environ=environ)
    return record_of(solved, catalog, options, source=source, settings=settings)


def check_files(paths: Sequence[str], catalog: Catalog,
                options: CheckOptions) -> tuple[list[CheckRecord], list[InputError]]:
    """Check every file (on its own device, or on each of ``options.devices``).

    A file that cannot be read does not stop the others: its error comes back
    both as a record (for CI reports) and in the list of input errors.
    """
    records: list[CheckRecord] = []
    errors: list[InputError] = []
    for path in paths:
        try:
            loaded = load_deployment(path)
            if not options.devices:
                records.append(check_deployment(loaded, catalog, options))
                continue
            for device in options.devices:
                variant: Deployment = loaded.deployment.model_copy(update={"device": device})
                records.append(check_deployment(replace(loaded, deployment=variant), catalog,
                                                options))
        except InputError as exc:
            errors.append(exc)
            records.append(input_error_record(exc, path))
    return records, errors


def check_serve(argv: Sequence[str], catalog: Catalog, options: CheckOptions, *,
                model: str | None = None,
                environ: Mapping[str, str] | None = None) -> tuple[ServeCommand, list[CheckRecord]]:
    """Check a ``vllm serve`` command line on each device (at least one is needed)."""
    if not options.devices:
        raise InputError("a vllm serve command line needs the target GPU", field="--device",
                         hint="add e.g. --device H100 (or --device all) before '--'")
    command = serve_args.parse_serve_command(argv, device=options.devices[0], catalog=catalog,
                                  engine=options.engine, model=model, environ=environ)
    source = command.command_line
    records: list[CheckRecord] = []
    for device in options.devices:
        variant = command.for_device(device, catalog)
        loaded = LoadedDeployment(path=source, text="", deployment=variant.deployment, lines={})
        record = check_deployment(loaded, catalog, options, model=variant.model_facts,
                                  kv_options=variant.kv_options, source=source,
                                  settings=dict(variant.settings),
                                  environ=variant.environment)
        records.append(serve_record(record, variant, catalog, options))
    return command, records
