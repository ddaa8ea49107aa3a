"""``diff`` through the stages: one deployment solved under two engine versions, or the
support matrix evaluated under both (then :mod:`selector.diff` compares them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from selector.catalog import Catalog, load_catalog
from selector.config import LoadedDeployment
from selector.diff import (
    DeploymentDiff,
    MatrixDiff,
    MatrixPoint,
    diff_matrix,
    diff_results,
    support_matrix,
)
from selector.errors import InputError
from selector.pipeline.deployment import solve_deployment
from selector.pipeline.flat import FlatEvaluator
from selector.result import Diagnostic, SolveResult

__all__ = ["diff_deployment", "solve_for_engine", "sweep_matrix"]


def sweep_matrix(from_engine: str, to_engine: str, *, catalog: Catalog | None = None,
                 points: Iterable[MatrixPoint] | None = None) -> MatrixDiff:
    """Evaluate the support matrix (or ``points``) under both engine versions and
    summarise the differences (auto selection; the compiled evaluators)."""
    catalog = catalog or load_catalog()
    grid = list(points if points is not None else support_matrix())
    sides = []
    for name in (from_engine, to_engine):
        engine = catalog.engine(name)
        evaluator = FlatEvaluator(engine, every=True)
        outcomes = [evaluator.select(evaluator.request(point.config, auto=True))[0]
                    for point in grid]
        sides.append((engine, outcomes))
    (eb, ob), (ea, oa) = sides
    return diff_matrix(grid, ob, oa, from_engine=eb.engine, to_engine=ea.engine,
                       backends_before=eb.profile.reported_backends,
                       backends_after=ea.profile.reported_backends)


def solve_for_engine(loaded: LoadedDeployment, engine: str, *,
                     catalog: Catalog | None = None) -> SolveResult:
    """Solve one deployment file under ``engine`` (its own ``engine:`` key is
    ignored).  A pinned backend the version does not register gives an invalid
    result (SE004) with the other backends' verdicts of automatic selection."""
    if loaded.deployment.model is not None:
        raise InputError(
            "diff compares single-layer deployments (`layer:`); a `model:` deployment is not "
            "diffed yet", file=loaded.path, field="model", line=loaded.line_of(("model",)),
            hint=f"run attn-select check {loaded.path} --engine vllm==A and --engine vllm==B, "
                 "or diff a file with the layer's facts under `layer:`")
    catalog = catalog or load_catalog()
    data = catalog.engine(engine)
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
                    catalog: Catalog | None = None) -> DeploymentDiff:
    """What changes for one deployment between two engine versions."""
    return diff_results(solve_for_engine(loaded, from_engine, catalog=catalog),
                        solve_for_engine(loaded, to_engine, catalog=catalog), source=loaded.path)
