"""``attn-select smoke-plan PLAN.json``: run smoke plans given directly as JSON.

:func:`run_plans` is the shared driver (progress, rendering, exit codes); the solver's
``smoke CONFIG`` command calls it with the plans it derives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from selector.errors import AttnSelectError, ExitCode
from selector.smoke.plan import SmokeOptions, SmokePlan, load_plans_file
from selector.smoke.render import render_report
from selector.smoke.report import SmokeChecksFailed, SmokeReport
from selector.smoke.runner import run_smoke

__all__ = ["register", "run_plans", "smoke_plan_command"]


class ReportFormat(str, Enum):
    text = "text"
    json = "json"


@contextmanager
def _progress(console: Console) -> Iterator[Progress]:
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=console, transient=True)
    with progress:
        yield progress


def _print_report(report: SmokeReport, output_format: ReportFormat, out: Console) -> None:
    if output_format is ReportFormat.json:
        out.out(json.dumps(report.to_json(), indent=2), highlight=False)
    else:
        out.print(render_report(report))


def run_plans(plans: Sequence[SmokePlan], options: SmokeOptions, *,
              output_format: ReportFormat = ReportFormat.text) -> None:
    """Run ``plans``, print the report, and exit 0 / 3 (a check failed) / 4 (cannot run)."""
    out = Console(soft_wrap=output_format is ReportFormat.json)
    err = Console(stderr=True, soft_wrap=True)
    try:
        with _progress(err) as progress:
            task = progress.add_task("starting", total=None)
            report = run_smoke(plans, options,
                               progress=lambda stage: progress.update(task, description=stage))
    except SmokeChecksFailed as failure:
        _print_report(failure.report, output_format, out)
        err.print(f"error: {failure}", markup=False, highlight=False)
        raise typer.Exit(int(ExitCode.SMOKE_FAILED)) from None
    except AttnSelectError as error:
        err.print(f"error: {error}", markup=False, highlight=False)
        raise typer.Exit(int(error.exit_code)) from None
    _print_report(report, output_format, out)


def smoke_plan_command(
    plan_file: Annotated[Path, typer.Argument(
        metavar="PLAN.json", show_default=False,
        help="Plans file: {\"plans\": [SmokePlan, ...], \"options\": {...}}.")],
    output_format: Annotated[ReportFormat, typer.Option(
        "--format", "-f", case_sensitive=False, help="Report format.")] = ReportFormat.text,
    repeats: Annotated[int | None, typer.Option(
        "--repeats", min=1, help="Timed repeats per kernel (median reported).")] = None,
    measure: Annotated[bool, typer.Option(
        "--measure/--no-measure", help="Time the kernels.")] = True,
    seed: Annotated[int | None, typer.Option("--seed", help="Batch and data seed.")] = None,
) -> None:
    """Run the real attention kernels for each plan on this GPU and prove the outputs.

    Exit 0 when every check passes, 2 on a bad plans file, 3 when a kernel or check fails,
    4 when this machine cannot run it (no GPU, or a kernel library missing).
    """
    try:
        plans_file = load_plans_file(plan_file)
    except AttnSelectError as error:
        Console(stderr=True, soft_wrap=True).print(f"error: {error}", markup=False,
                                                   highlight=False)
        raise typer.Exit(int(error.exit_code)) from None
    overrides: dict[str, object] = {"measure": measure and plans_file.options.measure}
    if repeats is not None:
        overrides["repeats"] = repeats
    if seed is not None:
        overrides["seed"] = seed
    options = plans_file.options.model_copy(update=overrides)
    run_plans(plans_file.plans, options, output_format=output_format)


def register(app: typer.Typer) -> None:
    """Add the ``smoke-plan`` command to ``app``."""
    app.command(name="smoke-plan", no_args_is_help=True)(smoke_plan_command)
