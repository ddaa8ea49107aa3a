"""``check``'s records: a solved deployment (:mod:`selector.pipeline`) in, a
:class:`CheckRecord` with its findings out (renderers and the CLI take it from there);
also the inputs' expansion (globs, devices, acknowledged codes) and the exit code.

Each finding is located in the user's file by line where the file says it: a
reason about the KV-cache dtype points at ``kv_cache_dtype:``, a pinned backend
that fails points at ``attention_backend:``, and so on.
"""

from __future__ import annotations

import glob
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

# loaded on first use: the KV-plan helpers for a model's findings, the command-line reader
# for --device, --ignore or a command line
from selector import kv
from selector.catalog import Catalog, close_matches
from selector.check.records import CLI_CODES, CheckRecord, Finding, FindingLevel, Status
from selector.errors import ExitCode, InputError
from selector.inputs import serve
from selector.inputs.config import LoadedDeployment
from selector.result import SolveResult
from selector.schema.request import DeviceRef

if TYPE_CHECKING:
    from selector.check.model import ModelCheckResult
    from selector.inputs.serve import ServeCommand
    from selector.memory import StartupIssue

__all__ = [
    "CheckOptions",
    "exit_code",
    "expand_configs",
    "input_error_record",
    "known_codes",
    "layer_record",
    "model_record",
    "refused_record",
    "resolve_devices",
    "serve_record",
    "validate_ignored",
]

_DEPLOYMENT_SUFFIXES = (".yaml", ".yml", ".toml", ".json")

@dataclass(frozen=True)
class CheckOptions:
    """How to check: the engine profile, devices to override with, strictness."""

    engine: str | None = None
    devices: tuple[str | DeviceRef, ...] = ()
    strict: bool = False
    ignore: frozenset[str] = frozenset()
    """Warning codes acknowledged (``--ignore``): reported as notes, never a failure."""


def expand_configs(patterns: Sequence[str]) -> list[str]:
    """Files and globs (``**`` included) -> deployment files, in order, each once.

    A pattern that matches nothing is an input error; a directory means the
    deployment files (``*.yaml``, ``*.yml``, ``*.toml``, ``*.json``) directly in it.
    """
    out: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(m for m in glob.glob(pattern, recursive=True) if os.path.isfile(m))
            if not matches:
                raise InputError("no file matches this pattern", file=pattern,
                                 hint="quote the glob so the shell passes it through, "
                                      "e.g. 'deploy/**/*.yaml'")
        elif os.path.isdir(pattern):
            matches = sorted(str(p) for p in Path(pattern).iterdir()
                             if p.is_file() and p.suffix.lower() in _DEPLOYMENT_SUFFIXES)
            if not matches:
                raise InputError("the directory holds no deployment files", file=pattern,
                                 hint="deployment files end in .yaml, .yml, .toml or .json")
        else:
            matches = [pattern]
        for match in matches:
            if match not in out:
                out.append(match)
    return out


def resolve_devices(values: Sequence[str], catalog: Catalog) -> tuple[str | DeviceRef, ...]:
    """``--device`` values -> devices (``all`` = every catalog device)."""
    out: list[str | DeviceRef] = []
    for value in values:
        if value.strip().lower() == "all":
            out.extend(d.name for d in catalog.devices)
            continue

        device = serve.device_ref(value)
        if isinstance(device, str):
            device = catalog.device(device).name
        if device not in out:
            out.append(device)
    return tuple(out)


def _error_field(result: SolveResult, catalog: Catalog) -> tuple[str, ...]:
    if result.mode == "explicit":
        return ("attention_backend",)
    counts: Counter[tuple[str, ...]] = Counter()
    for verdict in result.verdicts:
        if verdict.priority_index is None:
            continue
        for reason in verdict.reasons:
            located = catalog.field_of(reason.code)
            if located and located != ("device",):
                counts[located] += 1
    if counts:
        return counts.most_common(1)[0][0]
    return ("device",)


def _finding(level: FindingLevel, code: str, name: str, message: str, hint: str,
             path: tuple[str, ...] | None, loaded: LoadedDeployment | None,
             backend: str | None = None) -> Finding:
    line = None
    if loaded is not None:
        line = loaded.line_of(path) if path else None
        if line is None:
            line = loaded.line_of(("device",)) or 1
    return Finding(level=level, code=code, name=name, message=message, hint=hint, line=line,
                   field=".".join(path) if path else None, backend=backend)


def _result_findings(result: SolveResult, catalog: Catalog, loaded: LoadedDeployment | None,
                     graphs: bool = True) -> list[Finding]:
    findings: list[Finding] = []
    if result.error is not None:
        error = result.error
        hint = error.hint
        if result.suggestions:
            hint = "fix: " + "; ".join(
                s.summary if s.selected in s.summary else f"{s.summary} (selects {s.selected})"
                for s in result.suggestions[:3])
        findings.append(_finding("error", error.code, error.name, error.message, hint,
                                 _error_field(result, catalog), loaded, error.backend))
    for warning in result.warnings:
        findings.append(_finding("warning", warning.code, warning.name, warning.message,
                                 warning.hint, catalog.field_of(warning.code), loaded,
                                 warning.backend))
    runtime = result.runtime if graphs else None
    if runtime is not None:
        refused = runtime.cudagraph_mode == "ERROR"
        refusal = (runtime.cudagraph_messages[-1] if runtime.cudagraph_messages else
                   f"CUDA-graph mode {runtime.cudagraph_mode_requested} is refused") if refused else None
        findings.extend(_cudagraph_findings(
            requested=runtime.cudagraph_mode_requested, resolved=runtime.cudagraph_mode,
            warnings=runtime.cudagraph_messages, error=refusal, backend=result.selected,
            loaded=loaded, catalog=catalog))
    return findings


def _cudagraph_findings(*, requested: str | None, resolved: str | None,
                        warnings: tuple[str, ...], error: str | None, backend: str | None,
                        loaded: LoadedDeployment | None, catalog: Catalog) -> list[Finding]:
    """An error when vLLM refuses the requested CUDA-graph mode, a warning when it
    downgrades it (for one layer or a whole model alike)."""
    if error is not None:
        refused = catalog.cli_codes["AS003"]
        return [_finding("error", "AS003", refused.name, error, refused.hint,
                         ("cudagraph_mode",), loaded, backend)]
    if requested != resolved:
        name, _ = CLI_CODES["AS002"]
        message = "; ".join(warnings) or f"CUDA-graph mode {requested} becomes {resolved}"
        return [_finding("warning", "AS002", name, message,
                         f"request cudagraph_mode {resolved} to make it explicit, or pick a "
                         "backend with fuller CUDA-graph support",
                         ("cudagraph_mode",), loaded, backend)]
    return []


def known_codes(catalog: Catalog) -> frozenset[str]:
    """Every code a finding can carry: vLLM's reasons, the check's and the command line's."""
    return frozenset(catalog.codes) | frozenset(CLI_CODES) | frozenset(serve.ARG_CODES)


def validate_ignored(codes: Sequence[str], catalog: Catalog, *, file: str | None = None,
                     field: str = "--ignore", line: int | None = None) -> frozenset[str]:
    """Codes to acknowledge, upper-cased; an unknown code is an input error."""
    known = known_codes(catalog) if codes else frozenset()
    out = set()
    for raw in codes:
        code = raw.strip().upper()
        if code not in known:
            raise InputError(f"unknown code {raw!r}", file=file, field=field, line=line,
                             hint=close_matches(code, sorted(known))
                             or "see attn-select list codes")
        out.add(code)
    return frozenset(out)


def _acknowledge(findings: Sequence[Finding], ignore: frozenset[str]) -> list[Finding]:
    """Warnings whose code is ignored become notes (still shown; never a failure).
    Errors stay errors: vLLM refuses them whatever the file says."""
    return [replace(f, level="note", hint=(f.hint + "; " if f.hint else "")
                    + f"acknowledged: ignore {f.code}")
            if f.level == "warning" and f.code in ignore else f for f in findings]


def _record(result: SolveResult, *, source: str, artifact: str | None, device: str,
            findings: list[Finding], options: CheckOptions, group: str | None = None,
            settings: dict[str, object] | None = None) -> CheckRecord:
    findings = _acknowledge(findings, options.ignore)
    hard = any(f.level == "error" for f in findings) or not result.valid
    warned = any(f.level == "warning" for f in findings)
    if options.strict:
        findings = [replace(f, level="error") if f.level == "warning" else f for f in findings]
    refused = result.runtime is not None and result.runtime.cudagraph_mode == "ERROR"
    status: Status = "valid" if result.valid and not refused else "invalid"
    runtime = result.runtime
    return CheckRecord(
        source=source, artifact=artifact, device=device, engine=result.engine,
        status=status, failed=hard or (options.strict and warned), findings=tuple(findings),
        result=result, group=group, strict=options.strict, settings=settings,
        selected=result.selected, block_size=runtime.block_size if runtime else None,
        cudagraph_mode=runtime.cudagraph_mode if runtime else None,
    )


def _issue_finding(issue: StartupIssue, loaded: LoadedDeployment) -> Finding:
    return _finding("error", issue.code, issue.name, issue.message, issue.hint,
                    issue.field or None, loaded)


def _model_findings(result: ModelCheckResult, catalog: Catalog,
                    loaded: LoadedDeployment) -> list[Finding]:
    findings: list[Finding] = [_issue_finding(issue, loaded) for issue in result.startup]
    for code, message in result.encoder.notes() if result.encoder is not None else ():
        entry = catalog.code(code)
        findings.append(_finding("note", code, entry.name, message, entry.hint,
                                 tuple(entry.field.split(".")) if entry.field else None, loaded))
    for code, message in result.draft.notes if result.draft is not None else ():
        entry = catalog.code(code)
        level: Literal["warning", "note"] = "warning" if entry.severity == "warning" else "note"
        findings.append(_finding(level, code, entry.name, message, entry.hint, ("speculative",),
                                 loaded))
    for selection in result.selections:
        draft = ", speculative draft" if selection.draft else ""
        prefix = f"layers {kv.format_ranges(list(selection.layers))} ({selection.kind}{draft}): "
        for finding in _result_findings(selection.result, catalog, loaded, graphs=False):
            findings.append(replace(finding, message=prefix + finding.message))
    plan = result.plan
    if plan is None:
        return findings
    model_path = ("model",)
    for error in plan.errors:
        name, _ = CLI_CODES["AS004"]
        findings.append(_finding("error", "AS004", name, f"{error.exc_type}: {error.message}",
                                 f"raised while planning the KV cache ({error.stage})",
                                 model_path, loaded))
    graphs = plan.cudagraph
    # the CUDA-graph downgrade's warnings are the plan's too: AS002 says them, once
    downgraded = (frozenset(graphs.warnings) if graphs is not None and not graphs.error
                  and graphs.requested != graphs.resolved else frozenset())
    for warning in plan.warnings:
        if warning in downgraded:
            continue
        name, _ = CLI_CODES["AS005"]
        findings.append(_finding("warning", "AS005", name, warning, "", model_path, loaded))
    if graphs is not None:
        findings.extend(_cudagraph_findings(
            requested=graphs.requested, resolved=graphs.resolved, warnings=graphs.warnings,
            error=graphs.error or None, backend=graphs.min_support_backend, loaded=loaded,
            catalog=catalog))
    return findings


def _architecture_findings(result: ModelCheckResult, catalog: Catalog,
                           loaded: LoadedDeployment) -> list[Finding]:
    """The check's words for vLLM's verdict on the architecture (decided by the stage:
    :attr:`ModelCheckResult.architecture`)."""
    return [_finding(note.level, note.code, catalog.cli_codes[note.code].name, note.message,
                     note.hint, ("model",), loaded) for note in result.architecture]


def _model_record(result: ModelCheckResult, loaded: LoadedDeployment, *, source: str,
                  artifact: str | None, device: str, findings: list[Finding],
                  options: CheckOptions, settings: dict[str, object] | None = None) -> CheckRecord:
    findings = _acknowledge(findings, options.ignore)
    hard = any(f.level == "error" for f in findings) or not result.valid
    warned = any(f.level == "warning" for f in findings)
    if options.strict:
        findings = [replace(f, level="error") if f.level == "warning" else f for f in findings]
    plan = result.plan
    status: Status = "valid" if result.valid else "invalid"
    selected = [s.result.selected for s in result.selections if s.result.selected]
    return CheckRecord(
        source=source, artifact=artifact, device=device, engine=result.engine, status=status,
        failed=hard or (options.strict and warned), findings=tuple(findings), result=None,
        strict=options.strict, settings=settings,
        selected=", ".join(dict.fromkeys(selected)) or None,
        block_size=plan.block_size.block_size if plan and plan.block_size else None,
        cudagraph_mode=(plan.cudagraph.resolved if plan and plan.cudagraph else None),
        model=result,
    )


def refused_record(issue: StartupIssue, loaded: LoadedDeployment, *, engine: str,
                   device: str, options: CheckOptions, source: str | None = None,
                   settings: dict[str, object] | None = None) -> CheckRecord:
    """The record of a model vLLM refuses before any selection (its heads do not split
    over the tensor-parallel ranks)."""
    return CheckRecord(source=source or loaded.path,
                       artifact=loaded.path if source is None else None, device=device,
                       engine=engine, status="invalid", failed=True,
                       findings=(_issue_finding(issue, loaded),), strict=options.strict,
                       settings=settings)


def model_record(checked: ModelCheckResult, loaded: LoadedDeployment, catalog: Catalog, *,
                 device: str, options: CheckOptions, source: str | None = None,
                 settings: dict[str, object] | None = None) -> CheckRecord:
    """The record of a whole-model check: the architecture's, every layer group's, the KV
    plan's and the start-up findings."""
    findings = _architecture_findings(checked, catalog, loaded)
    if checked.selections:
        findings += _foreign_environment(loaded, checked.selections[0].result)
    findings += _model_findings(checked, catalog, loaded)
    findings += _memory_unchecked(checked, loaded)
    return _model_record(checked, loaded, source=source or loaded.path,
                         artifact=loaded.path if source is None else None, device=device,
                         findings=findings, options=options, settings=settings)


def _foreign_environment(loaded: LoadedDeployment, result: SolveResult) -> list[Finding]:
    """AS170 for each ``environment:`` fact the engine of the device's platform lacks
    (another platform's: the validation refused any other name)."""
    own = {name.removeprefix("env_") for name in result.environment_defaults}
    name, _ = CLI_CODES["AS170"]
    return [_finding("note", "AS170", name,
                     f"environment.{key} has no effect on a {result.platform or 'default'} "
                     "device: another platform's fact", "", ("environment", key), loaded)
            for key in loaded.deployment.environment if key not in own]


def _memory_unchecked(checked: ModelCheckResult, loaded: LoadedDeployment) -> list[Finding]:
    """A note that the report has no memory section, and why: a verdict without it says
    nothing about whether the model fits."""
    if checked.memory is not None:
        return []
    name, _ = CLI_CODES["AS136"]
    device = loaded.deployment.device
    if isinstance(device, DeviceRef) and device.memory_gib is None:
        return [_finding("note", "AS136", name,
                         f"the memory fit was not checked: the device (compute capability "
                         f"{device.capability}) states no memory",
                         f'give its memory (device: {{capability: "{device.capability}", '
                         f"memory_gib: 80}}) or name a catalog device (attn-select list devices)",
                         ("device",), loaded)]
    return [_finding("note", "AS136", name,
                     "the memory fit was not checked: the memory budget does not model how "
                     "expert parallelism over data-parallel ranks places the experts", "", None,
                     loaded)]


def layer_record(result: SolveResult, loaded: LoadedDeployment, catalog: Catalog, *, device: str,
                 startup: Sequence[StartupIssue], options: CheckOptions,
                 source: str | None = None,
                 settings: dict[str, object] | None = None) -> CheckRecord:
    """The record of a single-layer deployment: the solver's findings, then vLLM's
    start-up refusals (never acknowledged: vLLM refuses them whatever the file says)."""
    record = _record(result, source=source or loaded.path,
                     artifact=loaded.path if source is None else None, device=device,
                     findings=_foreign_environment(loaded, result)
                     + _result_findings(result, catalog, loaded), options=options,
                     settings=settings)
    if not startup:
        return record
    refusals = tuple(_issue_finding(issue, loaded) for issue in startup)
    return replace(record, status="invalid", failed=True,
                   findings=(*refusals, *record.findings))


def input_error_record(exc: InputError, source: str) -> CheckRecord:
    """The record of a file that cannot be read (for CI reports)."""
    name, _ = CLI_CODES["AS001"]
    finding = Finding(level="error", code="AS001", name=name, message=exc.message,
                      hint=exc.hint or "", line=exc.line or (1 if exc.file == source else None),
                      field=exc.field)
    return CheckRecord(source=source, artifact=source if exc.file == source else None,
                       device="-", engine=None, status="error", failed=True,
                       findings=(finding,))


def _note_findings(command: ServeCommand, catalog: Catalog) -> list[Finding]:
    out = []
    for note in command.notes:
        registered = catalog.codes.get(note.code)
        name = (registered.name if registered
                else serve.ARG_CODES.get(note.code, ("note", ""))[0])
        level: FindingLevel = note.level if note.level in ("warning", "error") else "note"
        out.append(Finding(level=level, code=note.code, name=name, message=note.message,
                           hint=note.hint, field=note.flag))
    return out


def serve_record(record: CheckRecord, command: ServeCommand, catalog: Catalog,
                 options: CheckOptions) -> CheckRecord:
    """``record`` with the command line's notes (ignored or unknown flags, settings vLLM
    refuses) added."""
    notes = _acknowledge(_note_findings(command, catalog), options.ignore)
    if options.strict:
        notes = [replace(f, level="error") if f.level == "warning" else f for f in notes]
    warned = any(f.level in ("warning", "error") for f in notes if f.code.startswith("AS1"))
    refused = any(f.level == "error" and not f.code.startswith("AS1") for f in notes)
    status: Status = "invalid" if refused and record.status == "valid" else record.status
    return replace(record, findings=record.findings + tuple(notes), status=status,
                   failed=record.failed or refused or (options.strict and warned))


def exit_code(records: Sequence[CheckRecord], input_errors: int = 0) -> ExitCode:
    """2 if any input could not be read, else 1 if any check failed, else 0."""
    if input_errors or any(r.status == "error" for r in records):
        return ExitCode.USAGE
    if any(r.failed for r in records):
        return ExitCode.INVALID
    return ExitCode.OK
