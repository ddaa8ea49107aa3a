"""The worker side of a fleet run: the local pipelines, called through one entry each.

A fleet task runs :func:`smoke_on_this_node` (or :func:`bench_on_this_node`) on a node of
one device type. Each takes and returns plain JSON dictionaries, and calls the same public
functions the local ``smoke`` / ``bench`` commands call: the deployment's plans
(:func:`selector.pipeline.smoke.deployment_plans`) and :func:`selector.smoke.run_smoke`;
the bench's targets and :func:`selector.bench.runner.run_bench`. Nothing here imports Ray.

Every outcome is an answer: a verdict, or the exit code and message the local command
would have printed (a missing kernel library: 4 with the install hint).
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selector.errors import AttnSelectError, CannotRunHereError, ExitCode, InputError

if TYPE_CHECKING:
    from selector.bench.runner import BenchEnvironment
    from selector.inputs.config import LoadedDeployment
    from selector.smoke.runner import SmokeMachine

__all__ = ["NODE_INSTALL_HINT", "bench_on_this_node", "smoke_on_this_node"]

NODE_INSTALL_HINT = ("install attn-select with the GPU extra on every GPU node "
                     "(pip install 'attn-select[gpu]')")


def _loaded(request: dict[str, Any]) -> LoadedDeployment:
    from selector.inputs.config import parse_deployment
    from selector.smoke.deployment import on_device

    return on_device(parse_deployment(str(request["config"]), str(request["text"])),
                     request.get("device"))


def _answer(request: dict[str, Any], started: float, exit_code: int, *,
            errors: list[str] | None = None, hint: str | None = None,
            **payload: Any) -> dict[str, Any]:
    import selector

    worker = {"attn-select": selector.__version__, "python": sys.version.split()[0],
              "code": str(Path(selector.__file__).resolve().parent)}
    return {"device": request.get("device"), "config": request.get("config"),
            "exit_code": int(exit_code), "errors": errors or [], "hint": hint,
            "hostname": socket.gethostname(), "worker": worker,
            "elapsed_s": round(time.perf_counter() - started, 3), **payload}


def _error_answer(request: dict[str, Any], started: float, error: Exception,
                  **payload: Any) -> dict[str, Any]:
    if isinstance(error, AttnSelectError):
        message = error.render() if isinstance(error, InputError) else str(error)
        hint = NODE_INSTALL_HINT if isinstance(error, CannotRunHereError) else None
        return _answer(request, started, error.exit_code, errors=[message], hint=hint,
                       **payload)
    return _answer(request, started, ExitCode.INTERNAL,
                   errors=[f"{type(error).__name__}: {error}"[:600]],
                   hint="an unexpected error inside attn-select on this node: please report it",
                   **payload)


def smoke_on_this_node(request: dict[str, Any], *,
                       machine: SmokeMachine | None = None) -> dict[str, Any]:
    """The smoke check of one deployment on this node's GPU, as ``smoke CONFIG`` runs it.

    ``request``: ``config`` (the file's name), ``text`` (its content), ``device`` (the
    catalog name the plans are negotiated for) and ``options`` (:class:`SmokeOptions` as
    JSON, and ``parity``: the local ``--parity`` / ``--no-parity``, absent for the default).
    Returns ``exit_code`` (what the local command exits with), ``report`` (the
    local JSON report, or None when none was made), ``errors`` and ``hint``. ``machine``:
    where the kernels run (None: this node's GPU, as the local command does).
    """
    started = time.perf_counter()
    try:
        from selector.catalog import load_catalog
        from selector.pipeline.smoke import deployment_plans
        from selector.smoke import SmokeOptions, run_smoke

        settings = dict(request.get("options") or {})
        parity = settings.pop("parity", None)  # --parity / --no-parity, as the local smoke
        plans = deployment_plans(_loaded(request), load_catalog(),
                                 parity=parity if isinstance(parity, bool) else None)
        options = SmokeOptions.model_validate(settings)
        report = run_smoke(plans, options, machine=machine)
    except Exception as error:
        carried = getattr(error, "report", None)
        document = carried.to_json() if carried is not None else None
        failures = list(carried.failures()) if carried is not None else []
        answer = _error_answer(request, started, error, report=document)
        answer["hint"] = None if carried is not None else answer["hint"]
        if failures:
            answer["errors"] = failures
        return answer
    return _answer(request, started, ExitCode.OK, report=report.to_json())


def bench_on_this_node(request: dict[str, Any], *,
                       environment: BenchEnvironment | None = None) -> dict[str, Any]:
    """The bench of one deployment on this node's GPU, as ``bench CONFIG`` runs it.

    ``request`` as for :func:`smoke_on_this_node`, with ``workload`` (a workload document,
    None for the default shapes) instead of ``options``. Returns ``measurements`` (the
    measurements file's JSON) besides the exit code, errors and hint.
    """
    started = time.perf_counter()
    try:
        from selector.bench.runner import run_bench
        from selector.bench.workload import default_workload, parse_workload
        from selector.catalog import load_catalog
        from selector.pipeline.bench import bench_targets

        workload = request.get("workload")
        shapes = (parse_workload(workload, source="--workload") if workload is not None
                  else default_workload())
        catalog = load_catalog()
        measurements = run_bench(bench_targets(_loaded(request), catalog), shapes, catalog=catalog,
                                 environment=environment)
    except Exception as error:
        return _error_answer(request, started, error, measurements=None)
    failures = measurements.failures()
    code = ExitCode.OK if measurements.passed else ExitCode.SMOKE_FAILED
    return _answer(request, started, code, errors=failures,
                   measurements=json.loads(measurements.dumps()))
