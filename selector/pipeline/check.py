"""``check`` through the stages: deployment files (on their own device or each given one)
or a ``vllm serve`` command line in, one :class:`CheckRecord` per deployment and device out.

The commands that run a deployment's kernels (``smoke``, ``bench``, on this machine or on
each node of a fleet) take their deployment from :func:`solve_to_run`: check's own record
decides, so a deployment ``check`` finds invalid (a selection, the KV plan, or a start-up
refusal: memory, dtype, ``max_model_len``, tensor parallelism) runs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import selector.inputs.serve as serve_args  # the command-line reader loads on first use
from selector.catalog import Catalog
from selector.check.records import CheckRecord
from selector.checkrun import (
    CheckOptions,
    expand_configs,
    input_error_record,
    layer_record,
    model_record,
    refused_record,
    serve_record,
    validate_ignored,
)
from selector.errors import InputError, InvalidDeploymentError
from selector.inputs.config import LoadedDeployment, load_deployment
from selector.pipeline.deployment import Solved, no_attention_layer, solve_deployment
from selector.schema.request import Deployment

if TYPE_CHECKING:
    from selector.inputs.serve import ServeCommand
    from selector.models import ModelFacts

__all__ = ["CheckInput", "check_deployment", "check_files", "check_inputs", "check_serve",
           "file_inputs", "record_of", "rejection", "serve_inputs", "solve_to_run"]


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
    return layer_record(solved.layer, solved.loaded, catalog, device=solved.device,
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
    options = _with_file_ignores(loaded, catalog, options)
    solved = solve_deployment(loaded, catalog, engine=options.engine, model=model,
                              kv_options=kv_options, settings=settings, environ=environ)
    return record_of(solved, catalog, options, source=source, settings=settings)


def _with_file_ignores(loaded: LoadedDeployment, catalog: Catalog,
                       options: CheckOptions) -> CheckOptions:
    """``options`` with the deployment's own ``ignore:`` codes (checked) added."""
    deployment = loaded.deployment
    if not deployment.ignore:
        return options
    return replace(options, ignore=options.ignore | validate_ignored(
        deployment.ignore, catalog, file=loaded.path, field="ignore",
        line=loaded.line_of(("ignore",))))


def rejection(record: CheckRecord, config: str) -> InvalidDeploymentError | None:
    """``check``'s verdict as the commands that run kernels (``smoke``, ``bench``) raise it:
    None for a valid record; else exit 1 with every error check reports, in its order, as
    ``[CODE] message`` (vLLM's own words where the refusal has them)."""
    if record.status == "valid":
        return None
    said = "; ".join(f"[{f.code}] {f.message.rstrip('.')}"
                     for f in record.findings if f.level == "error")
    if not said:
        return InvalidDeploymentError(
            f"{config}: vLLM would reject this deployment; `attn-select check {config}` says why")
    return InvalidDeploymentError(f"{config}: vLLM would reject this deployment: {said}; "
                                  f"`attn-select check {config}` says more")


def solve_to_run(loaded: LoadedDeployment, catalog: Catalog, command: str) -> Solved:
    """A deployment solved for a command that runs its attention kernels (``smoke``,
    ``bench``), with ``check``'s own decision: the same stages (start-up checks included)
    and the same record. Raises what ``check`` refuses (exit 1: :func:`rejection`) and a
    model without an attention layer as bad input (exit 2)."""
    solved = solve_deployment(loaded, catalog, suggest=False)
    if not solved.valid:  # the result's own verdict; check's record words it
        options = _with_file_ignores(loaded, catalog, CheckOptions())
        refused = rejection(record_of(solved, catalog, options), loaded.path)
        raise refused or InvalidDeploymentError(
            f"{loaded.path}: vLLM would reject this deployment; `attn-select check "
            f"{loaded.path}` says why")
    nothing = no_attention_layer(solved, command)
    if nothing is not None:
        raise nothing
    return solved


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
            for each in file_inputs(path, options):
                records.append(check_deployment(each.loaded, catalog, options))
        except InputError as exc:
            errors.append(exc)
            records.append(input_error_record(exc, path))
    return records, errors


@dataclass(frozen=True)
class CheckInput:
    """One deployment ``check`` reads, on one device: a file's, or a command line's."""

    loaded: LoadedDeployment
    command: ServeCommand | None = None
    """The ``vllm serve`` command line it comes from (on this device), if any."""

    @property
    def model(self) -> ModelFacts | None:
        """A command line's model facts (``--hf-overrides`` applied); None for a file."""
        return self.command.model_facts if self.command is not None else None


def file_inputs(path: str, options: CheckOptions) -> list[CheckInput]:
    """A deployment file on its own device, or on each of ``options.devices``."""
    loaded = load_deployment(path)
    if not options.devices:
        return [CheckInput(loaded)]
    out: list[CheckInput] = []
    for device in options.devices:
        variant: Deployment = loaded.deployment.model_copy(update={"device": device})
        out.append(CheckInput(replace(loaded, deployment=variant)))
    return out


def serve_inputs(argv: Sequence[str], catalog: Catalog, options: CheckOptions, *,
                 model: str | None = None, environ: Mapping[str, str] | None = None
                 ) -> tuple[ServeCommand, list[CheckInput]]:
    """A ``vllm serve`` command line (under ``options.engine``) on each device (at least
    one is needed)."""
    if not options.devices:
        raise InputError("a vllm serve command line needs the target GPU", field="--device",
                         hint="add e.g. --device H100 (or --device all) before '--'")
    command = serve_args.parse_serve_command(argv, device=options.devices[0], catalog=catalog,
                                             engine=options.engine, model=model, environ=environ)
    source = command.command_line
    out: list[CheckInput] = []
    for device in options.devices:
        variant = command.for_device(device, catalog)
        loaded = LoadedDeployment(path=source, text="", deployment=variant.deployment, lines={})
        out.append(CheckInput(loaded, variant))
    return command, out


def check_inputs(words: Sequence[str], catalog: Catalog, options: CheckOptions, *,
                 serve_line: bool, model: str | None = None,
                 environ: Mapping[str, str] | None = None
                 ) -> tuple[list[CheckInput], list[tuple[str, InputError]], ServeCommand | None]:
    """Every input ``check`` takes, resolved as ``check`` resolves it: a ``vllm serve``
    command line (``serve_line``) on each device, or files and globs, each on its own
    device or on each given one. A file that cannot be read comes back as (path, error)."""
    if serve_line:
        command, inputs = serve_inputs(words, catalog, options, model=model, environ=environ)
        return inputs, [], command
    if model is not None:
        raise InputError("--model applies to a `vllm serve` command line only",
                         field="--model", hint="put the command line after '--'")
    inputs = []
    errors: list[tuple[str, InputError]] = []
    for path in expand_configs(words):
        try:
            inputs.extend(file_inputs(path, options))
        except InputError as exc:
            errors.append((path, exc))
    return inputs, errors, None


def check_serve(argv: Sequence[str], catalog: Catalog, options: CheckOptions, *,
                model: str | None = None,
                environ: Mapping[str, str] | None = None) -> tuple[ServeCommand, list[CheckRecord]]:
    """Check a ``vllm serve`` command line on each device (at least one is needed)."""
    command, inputs = serve_inputs(argv, catalog, options, model=model, environ=environ)
    source = command.command_line
    records: list[CheckRecord] = []
    for each in inputs:
        variant, loaded = each.command, each.loaded
        assert variant is not None
        record = check_deployment(loaded, catalog, options, model=variant.model_facts,
                                  kv_options=variant.kv_options, source=source,
                                  settings=dict(variant.settings),
                                  environ=variant.environment)
        records.append(serve_record(record, variant, catalog, options))
    return command, records
