"""``diff`` through the stages: one deployment solved under two engine versions, or the
support matrix evaluated under both (then :mod:`selector.compare.diff` compares them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from selector.catalog import Catalog
from selector.check.records import CheckRecord
from selector.checkrun import CheckOptions, serve_record
from selector.compare.diff import (
    DeploymentDiff,
    LayerDiff,
    MatrixDiff,
    MatrixPoint,
    ModelDiff,
    diff_matrix,
    diff_results,
    support_matrix,
)
from selector.errors import InputError
from selector.inputs.config import LoadedDeployment, device_platform
from selector.pipeline.check import CheckInput, check_inputs, record_of
from selector.pipeline.deployment import Solved, solve_deployment
from selector.pipeline.flat import FlatEvaluator
from selector.result import Diagnostic, SolveResult
from selector.schema.request import DeviceRef

__all__ = ["DiffInput", "diff_deployment", "diff_inputs", "solve_for_engine", "sweep_matrix"]


def sweep_matrix(from_engine: str, to_engine: str, *, catalog: Catalog,
                 points: Iterable[MatrixPoint] | None = None) -> MatrixDiff:
    """Evaluate the support matrix (or ``points``) under both engine versions and
    summarise the differences (auto selection; the compiled evaluators)."""
    grid = list(points if points is not None else support_matrix())
    sides = []
    for name in (from_engine, to_engine):
        engine = catalog.engine(name)
        evaluator = FlatEvaluator(engine, every=True, catalog=catalog)
        outcomes = [evaluator.select(evaluator.request(point.config, auto=True))[0]
                    for point in grid]
        sides.append((engine, outcomes))
    (eb, ob), (ea, oa) = sides
    return diff_matrix(grid, ob, oa, from_engine=eb.engine, to_engine=ea.engine,
                       backends_before=eb.profile.reported_backends,
                       backends_after=ea.profile.reported_backends)


def solve_for_engine(loaded: LoadedDeployment, engine: str, *,
                     catalog: Catalog) -> SolveResult:
    """Solve one deployment file under ``engine`` (its own ``engine:`` key is
    ignored).  A pinned backend the version does not register gives an invalid
    result (SE004) with the other backends' verdicts of automatic selection."""
    if loaded.deployment.model is not None:
        raise InputError(
            "diff compares single-layer deployments (`layer:`); a `model:` deployment is not "
            "diffed yet", file=loaded.path, field="model", line=loaded.line_of(("model",)),
            hint=f"run attn-select check {loaded.path} --engine vllm==A and --engine vllm==B, "
                 "or diff a file with the layer's facts under `layer:`")
    try:
        platform = device_platform(loaded.deployment, catalog)
    except InputError:  # the target names the device's error, located
        platform = None
    data = catalog.engine(engine, platform)
    deployment = loaded.deployment.model_copy(update={"engine": data.engine})
    pinned = deployment.attention_backend
    missing = pinned is not None and pinned.upper() not in data.backends
    if missing:
        deployment = deployment.model_copy(update={"attention_backend": None})
    solved = solve_deployment(replace(loaded, deployment=deployment), catalog,
                              engine=data.engine, suggest=False, startup=False)
    result = solved.layer
    assert result is not None
    if not missing:
        return result
    assert pinned is not None
    entry = catalog.code("SE004")
    error = Diagnostic(code="SE004", name=entry.name, severity="error",
                       message=entry.message.format(backend=pinned.upper()), hint=entry.hint,
                       backend=pinned.upper())
    return replace(result, mode="explicit", requested_backend=pinned.upper(), selected=None,
                   error=error, runtime=None, warnings=())


def diff_deployment(loaded: LoadedDeployment, from_engine: str, to_engine: str, *,
                    catalog: Catalog) -> DeploymentDiff:
    """What changes for one deployment between two engine versions."""
    return diff_results(solve_for_engine(loaded, from_engine, catalog=catalog),
                        solve_for_engine(loaded, to_engine, catalog=catalog), source=loaded.path,
                        layout_aliases=catalog.layout_aliases)


@dataclass(frozen=True)
class DiffInput:
    """One input of ``diff`` on one device and what changes for it."""

    source: str
    device: str
    diff: DeploymentDiff | ModelDiff


def _checked(each: CheckInput, catalog: Catalog, engine: str) -> tuple[Solved, CheckRecord]:
    """One input solved under ``engine`` with ``check``'s stages, and ``check``'s record."""
    command = each.command
    options = CheckOptions(engine=engine)
    solved = solve_deployment(
        each.loaded, catalog, engine=engine, model=each.model, suggest=False,
        kv_options=command.kv_options if command else None,
        settings=dict(command.settings) if command else None,
        environ=command.environment if command else None)
    record = record_of(solved, catalog, options, source=each.loaded.path,
                       settings=dict(command.settings) if command else None)
    if command is not None:
        record = serve_record(record, command, catalog, options)
    return solved, record


def _errors(record: CheckRecord) -> tuple[str, ...]:
    return tuple(f"[{f.code}] {f.message}" for f in record.findings if f.level == "error")


def _span(layers: Sequence[int]) -> str:
    return f"{layers[0]}-{layers[-1]}" if len(layers) > 1 else str(layers[0])


def _model_diff(before: CheckInput, after: CheckInput, catalog: Catalog, from_engine: str,
                to_engine: str) -> ModelDiff:
    sb, rb = _checked(before, catalog, from_engine)
    sa, ra = _checked(after, catalog, to_engine)
    layers: list[LayerDiff] = []
    if sb.model is not None and sa.model is not None:
        after_groups = {(s.kind, s.layers): s for s in sa.model.selections}
        for selection in sb.model.selections:
            other = after_groups.get((selection.kind, selection.layers))
            if other is not None:
                source = f"{before.loaded.path} layers {_span(selection.layers)} ({selection.kind})"
                layers.append(LayerDiff(_span(selection.layers), selection.kind,
                                        diff_results(selection.result, other.result,
                                                     source=source,
                                                     layout_aliases=catalog.layout_aliases)))
    return ModelDiff(from_engine=sb.engine, to_engine=sa.engine, status_before=rb.status,
                     status_after=ra.status, errors_before=_errors(rb), errors_after=_errors(ra),
                     layers=tuple(layers), source=before.loaded.path)


def diff_inputs(words: Sequence[str], from_engine: str, to_engine: str, *, catalog: Catalog,
                devices: Sequence[str | DeviceRef], serve_line: bool, model: str | None = None,
                environ: Mapping[str, str] | None = None
                ) -> tuple[list[DiffInput], list[tuple[str, InputError]]]:
    """What changes for every input ``check`` takes (files and globs, each on its own
    device or each of ``devices``, or a ``vllm serve`` command line, read by each
    release's own parser): a ``layer:`` file's selection, or a model's (and a command
    line's) ``check`` verdict and each layer group's selection."""
    sides = []
    for engine in (from_engine, to_engine):
        options = CheckOptions(engine=catalog.release(engine), devices=tuple(devices))
        sides.append(check_inputs(words, catalog, options, serve_line=serve_line, model=model,
                                  environ=environ))
    (before, errors, _), (after, _, _) = sides
    out: list[DiffInput] = []
    for b, a in zip(before, after, strict=True):
        device = b.loaded.deployment.device
        name = device if isinstance(device, str) else f"capability {device.capability}"
        if b.loaded.deployment.model is None and b.command is None:
            result: DeploymentDiff | ModelDiff = diff_deployment(b.loaded, from_engine, to_engine,
                                                                  catalog=catalog)
        else:
            result = _model_diff(b, a, catalog, catalog.release(from_engine),
                                 catalog.release(to_engine))
        out.append(DiffInput(b.loaded.path, name, result))
    return out, errors
