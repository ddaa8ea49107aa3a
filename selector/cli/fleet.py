"""``smoke --ray`` and ``bench --ray``: run the command on every GPU type of a Ray
cluster and print one merged fleet report. Ray is imported only on this path."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from selector import __version__
from selector.cli.progress import progress as spinner
from selector.errors import AttnSelectError, InputError

__all__ = ["DEFAULT_TIMEOUT_S", "FleetFormat", "RayDevices", "RayTimeout", "fail", "run_bench_fleet",
           "run_smoke_fleet"]

DEFAULT_TIMEOUT_S = 600.0

RayDevices = Annotated[list[str] | None, typer.Option(
    "--device", "-d", help="With --ray: a GPU type to run on (repeat; 'cluster' = every "
                           "type the cluster offers, the default).")]
"""The ``--device`` option of ``smoke --ray`` and ``bench --ray``."""
RayTimeout = Annotated[float, typer.Option(
    "--timeout", min=1, help="With --ray: seconds before a device's task is cancelled.")]
"""The ``--timeout`` option of ``smoke --ray`` and ``bench --ray``."""


class FleetFormat(str, Enum):
    """Output formats of a fleet run (those of ``check``)."""

    text = "text"
    json = "json"
    junit = "junit"
    markdown = "markdown"
    github = "github"
    sarif = "sarif"


def fail(error: AttnSelectError) -> typer.Exit:
    """Print ``error`` to stderr; the exit to raise with its exit code."""
    message = error.render() if isinstance(error, InputError) else str(error)
    Console(stderr=True, soft_wrap=True).print(f"error: {message}", markup=False,
                                               highlight=False)
    return typer.Exit(int(error.exit_code))


def _run(request: Any) -> Any:
    from selector.catalog import load_catalog
    from selector.fleet.run import run_fleet

    err = Console(stderr=True, soft_wrap=True)
    try:
        # Ray's driver prints cluster events (a worker died) to stdout: keep them on stderr,
        # so stdout holds the report alone
        with contextlib.redirect_stdout(sys.stderr), spinner(err) as progress:
            task = progress.add_task("starting", total=None)
            return run_fleet(request, load_catalog(),
                             progress=lambda stage: progress.update(task, description=stage))
    except AttnSelectError as error:
        raise fail(error) from None
    except KeyboardInterrupt:
        err.print("interrupted", markup=False, highlight=False)
        raise typer.Exit(130) from None


def _render(report: Any, output_format: FleetFormat) -> str | None:
    from selector.fleet import render

    if output_format is FleetFormat.json:
        return render.render_json(report)
    if output_format is FleetFormat.junit:
        return render.render_junit(report)
    if output_format is FleetFormat.markdown:
        return render.render_markdown(report)
    if output_format is FleetFormat.github:
        return render.render_github(report)
    if output_format is FleetFormat.sarif:
        from selector.catalog import load_catalog
        from selector.report.formats.sarif import code_descriptions

        return json.dumps(render.render_sarif(report, version=__version__,
                                              descriptions=code_descriptions(load_catalog(),
                                                                             arguments=False)),
                          indent=2) + "\n"
    return None


def _emit(report: Any, output_format: FleetFormat, output: Path | None) -> typer.Exit:
    from selector.fleet.render import render_table

    text = _render(report, output_format)
    if text is None:
        Console(highlight=False).print(render_table(report))
    elif output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as error:
            return fail(InputError(f"cannot write the report: {error}", file=str(output),
                                    field="--output"))
    else:
        sys.stdout.write(text)
    return typer.Exit(report.exit_code)


def run_smoke_fleet(configs: list[Path], *, address: str, devices: list[str],
                    timeout_s: float, options: dict[str, Any], output_format: FleetFormat,
                    output: Path | None, ship_code: bool) -> typer.Exit:
    """``smoke CONFIG... --ray ADDRESS``: the exit to raise (0 / 2 / 3 / 4, 130)."""
    from selector.fleet.run import FleetRequest

    request = FleetRequest(command="smoke", configs=tuple(str(c) for c in configs),
                           devices=tuple(devices), address=address, timeout_s=timeout_s,
                           settings=options, ship_code=ship_code)
    return _emit(_run(request), output_format, output)


def _device_dir(device: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", device).strip("-") or "device"


def run_bench_fleet(config: Path, *, address: str, devices: list[str], timeout_s: float,
                    workload: Path | None, output: Path, output_format: FleetFormat,
                    policy: str, ship_code: bool) -> typer.Exit:
    """``bench CONFIG --ray ADDRESS``: one measurements file per device type, written to
    ``OUTPUT/<device>/bench.json`` (``check --measurements OUTPUT`` picks them by device)."""
    from selector.bench.measurements import parse_measurements
    from selector.bench.outputs import write_outputs
    from selector.bench.policy import decide_for_deployment
    from selector.bench.render import result_row
    from selector.bench.workload import load_workload
    from selector.fleet.run import FleetRequest

    try:
        document = None
        if workload is not None:
            load_workload(workload)  # bad input stops here, before the cluster
            document = _workload_document(workload)
    except AttnSelectError as error:
        raise fail(error) from None
    request = FleetRequest(command="bench", configs=(str(config),), devices=tuple(devices),
                           address=address, timeout_s=timeout_s, settings=document,
                           ship_code=ship_code)
    report = _run(request)
    for outcome in report.outcomes:
        data = outcome.payload.get("measurements")
        if data is None:
            continue
        try:
            measurements = parse_measurements(data, source=f"{outcome.device} measurements")
            files = write_outputs(measurements, output / _device_dir(outcome.device))
        except AttnSelectError as error:
            outcome.errors.append(str(error))
            continue
        decision = decide_for_deployment(measurements, policy=policy)  # type: ignore[arg-type]
        outcome.report = {
            "schema": measurements.schema_, "device": measurements.device.name,
            "ceilings": measurements.ceilings.to_json(),
            "rows": [result_row(r, measurements) for r in measurements.results],
            "decision": decision.to_json(), "files": files, "passed": measurements.passed}
    return _emit(report, output_format, None)


def _workload_document(path: Path) -> Any:
    import yaml

    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
