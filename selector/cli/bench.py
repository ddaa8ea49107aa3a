"""``attn-select bench CONFIG``: measure every valid backend on the user's workload, and
``check --measurements FILE``: re-judge saved measurements on any machine."""

from __future__ import annotations

import json
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import typer
from rich.console import Console

from selector.cli.fleet import (
    DEFAULT_TIMEOUT_S,
    FleetFormat,
    RayDevices,
    RayTimeout,
    fail,
    run_bench_fleet,
)
from selector.errors import AttnSelectError, ExitCode, InputError

if TYPE_CHECKING:
    from selector.bench.measurements import Measurements
    from selector.bench.policy import PolicyDecision

__all__ = ["bench_command", "measured_policy", "measurements_by_device", "register"]


class BenchFormat(str, Enum):
    text = "text"
    json = "json"


class PolicyName(str, Enum):
    priority = "priority"
    fastest = "fastest"


def bench_command(
    config: Annotated[Path, typer.Argument(metavar="CONFIG", show_default=False,
                                           help="Deployment file (YAML, TOML or JSON).")],
    workload: Annotated[Path | None, typer.Option(
        "--workload", "-w", help="Workload file (YAML/JSON): decode batch sizes x context "
                                 "lengths, prefill lengths, a mixed step. Default: a few "
                                 "representative shapes.")] = None,
    output: Annotated[Path, typer.Option(
        "--output", "-o", help="Directory for bench.json (raw samples; reusable by "
                               "`check --measurements`) and bench.svg (the plot).")
    ] = Path("attn-select-bench"),
    output_format: Annotated[BenchFormat, typer.Option(
        "--format", "-f", case_sensitive=False, help="Report format.")] = BenchFormat.text,
    policy: Annotated[PolicyName, typer.Option(
        "--policy", case_sensitive=False,
        help="priority: report vLLM's choice; fastest: choose the valid backend with the "
             "lowest measured time and print the flag that pins it.")] = PolicyName.priority,
    ray: Annotated[str | None, typer.Option(
        "--ray", metavar="auto|local|ADDRESS",
        help="Run on a Ray cluster, once per GPU type: one measurements file per type in "
             "OUTPUT/<device>/ (auto: RAY_ADDRESS or a cluster running here; local: start "
             "one here).")] = None,
    device: RayDevices = None,
    timeout: RayTimeout = DEFAULT_TIMEOUT_S,
    ship_code: Annotated[bool, typer.Option(
        "--ship-code", help="With --ray: send this attn-select to the workers (Ray "
                            "runtime_env py_modules).")] = False,
) -> None:
    """Run every valid backend's kernels on a workload on this GPU; time them against the
    card's measured limits and choose by policy.

    A deployment `check` finds invalid is not timed: a selection or KV plan vLLM
    refuses, or a start-up refusal (memory MM001-MM003, --dtype SU001, --max-model-len
    SU002, the TP / DCP split SU003, SU006, SU008-SU016) exits 1 with check's code and
    vLLM's words, whatever the workload: short shapes do not make vLLM start. To time
    the shapes you serve, state the max_model_len you serve in the deployment file
    (check's MM002 names the longest that fits).

    Exit 0 when every measurement ran and matched the reference, 1 for a deployment vLLM
    would reject, 2 on bad input, 3 when a kernel failed or its output did not match,
    4 when this machine cannot run it (no GPU, or no kernel library).
    """
    from selector.bench.outputs import write_outputs
    from selector.bench.policy import decide_for_deployment
    from selector.bench.render import render_bench, render_decision, result_row
    from selector.bench.runner import run_bench
    from selector.bench.workload import default_workload, load_workload
    from selector.catalog import load_catalog
    from selector.cli.progress import progress as spinner
    from selector.pipeline.bench import bench_targets

    if ray is not None:
        raise run_bench_fleet(config, address=ray, devices=list(device or []),
                              timeout_s=timeout, workload=workload, output=output,
                              output_format=FleetFormat(output_format.value),
                              policy=policy.value, ship_code=ship_code)
    if device or ship_code:
        raise fail(InputError("--device and --ship-code apply to a fleet run only",
                               field="--device", hint="add --ray auto (or local)"))
    err = Console(stderr=True, soft_wrap=True)
    try:
        shapes = load_workload(workload) if workload is not None else default_workload()
        catalog = load_catalog()
        targets = bench_targets(config, catalog)
        with spinner(err) as progress:
            task = progress.add_task("starting", total=None)
            measurements = run_bench(
                targets, shapes, catalog=catalog,
                progress=lambda stage: progress.update(task, description=stage))
        files = write_outputs(measurements, output)
    except AttnSelectError as error:
        raise fail(error) from None
    decision = decide_for_deployment(measurements, policy=policy.value)
    if output_format is BenchFormat.json:
        document = {"schema": measurements.schema_, "device": measurements.device.name,
                    "ceilings": measurements.ceilings.to_json(),
                    "rows": [result_row(r, measurements) for r in measurements.results],
                    "decision": decision.to_json(), "files": files,
                    "passed": measurements.passed}
        Console(soft_wrap=True).out(json.dumps(document, indent=2), highlight=False)
    else:
        out = Console()
        out.print(render_bench(measurements))
        out.print(render_decision(decision))
        out.print(f"wrote {files['measurements']} and {files['plot']}", markup=False,
                  highlight=False)
    if not measurements.passed:
        failures = measurements.failures()
        shown = "; ".join(failures[:3]) + (f"; and {len(failures) - 3} more"
                                           if len(failures) > 3 else "")
        err.print(f"error: bench: {shown}", markup=False, highlight=False)
        raise typer.Exit(int(ExitCode.SMOKE_FAILED))


def _record_results(record: Any) -> list[tuple[str, Any]]:
    if record.result is not None:
        return [(record.label, record.result)]
    model = record.model
    if model is None:
        return []
    return [(f"{record.label} layers {','.join(str(i) for i in s.layers[:1])}"
             + ("..." if len(s.layers) > 1 else ""), s.result)
            for s in model.selections if s.result is not None]


Decision: TypeAlias = "tuple[str, Path | None, PolicyDecision | None]"
"""(the checked deployment's label, the measurements file, the policy's decision)."""


def measured_decisions(path: Path, records: list[Any]) -> tuple[list[Any], list[Decision]]:
    """``check --measurements FILE``: the measured-fastest valid backend per checked
    deployment (and layer group): the records with their decision
    (:attr:`~selector.check.records.CheckRecord.measured_policy`, which the JSON reporter
    writes), and every decision for the text report's panels."""
    from selector.bench.measurements import load_measurements
    from selector.bench.policy import apply_measurements

    by_device = measurements_by_device(path) if path.is_dir() else None
    single = None if by_device is not None else (path, load_measurements(path))
    err = Console(stderr=True, soft_wrap=True)
    decisions: list[Decision] = []
    out: list[Any] = []
    for record in records:
        found = single if by_device is None else by_device.get(record.device)
        if found is None and by_device is not None:
            err.print(f"note: no measurements for {record.device} in {path} (it holds "
                      f"{', '.join(sorted(by_device)) or 'none'})", markup=False,
                      highlight=False)
        own = [(label, None if found is None else found[0],
                None if found is None else apply_measurements(result, found[1]))
               for label, result in _record_results(record)]
        decisions += own
        first = next((d for _, _, d in own), None)
        out.append(record if first is None or found is None else replace(
            record, measured_policy={**first.to_json(), "measurements": str(found[0])}))
    return out, decisions


def measured_policy(decisions: list[Decision], output_format: Any,
                    text: str | None) -> str | None:
    """The text report gets a panel per decision after the report; JSON has them in its
    documents already; the other formats are left as they are (a note goes to stderr)."""
    kind = getattr(output_format, "value", str(output_format))
    if kind == "json":
        return text
    if kind == "text":
        import io

        from selector.bench.render import render_decision
        from selector.cli.console import make_console

        buffer = io.StringIO() if text is not None else None  # the report goes to a file
        console = make_console(file=buffer)
        for label, source, decision in decisions:
            if decision is not None and source is not None:
                console.print(render_decision(decision,
                                              title=f"Measured ({source.name}) for {label}"))
        return text if buffer is None else (text or "") + buffer.getvalue()
    Console(stderr=True, soft_wrap=True).print(
        f"note: --measurements applies to --format text and json; {kind} output unchanged",
        markup=False, highlight=False)
    return text


def measurements_by_device(folder: Path) -> dict[str, tuple[Path, Measurements]]:
    """Every measurements file under ``folder`` (a ``bench --ray`` output), by the catalog
    device it was measured on; two files for one device are an :class:`InputError`."""
    from selector.bench.measurements import load_measurements

    found: dict[str, tuple[Path, Measurements]] = {}
    for candidate in sorted(folder.rglob("*.json")):
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("schema") != "attn-select-bench/1":
            continue
        measurements = load_measurements(candidate)
        device = measurements.device.catalog_name or measurements.device.name
        if device in found:
            raise InputError(f"two measurements files for {device}: {found[device][0]} and "
                             f"{candidate}", file=str(folder), field="--measurements",
                             hint="keep one file per device in the folder")
        found[device] = (candidate, measurements)
    return found


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to ``app``."""
    app.command(name="bench", no_args_is_help=True)(bench_command)
