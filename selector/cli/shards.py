"""The shard part of ``attn-select smoke``: run, print, exit 0 / 3 / 4."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from selector.errors import AttnSelectError, ExitCode

if TYPE_CHECKING:
    from selector.parallel.plan import ShardOptions, ShardPlan

__all__ = ["run_shards"]


def run_shards(plans: Sequence[ShardPlan], options: ShardOptions, *, gpus: int | None,
               as_json: bool) -> None:
    """Run the shard check (ranks in turn, or one process per rank with ``gpus``), print
    its report and exit 3 when a check failed, 4 when it cannot run here."""
    from selector.parallel.distributed import run_distributed
    from selector.parallel.simulate import run_shard_check

    out = Console(soft_wrap=True)
    err = Console(stderr=True, soft_wrap=True)
    try:
        with err.status("shard check") as status:
            def progress(stage: str) -> None:
                status.update(stage)

            if gpus is None:
                report = run_shard_check(plans, options, progress=progress)
            else:
                report = run_distributed(plans, options, processes=gpus, progress=progress)
    except AttnSelectError as error:
        message = error.render() if hasattr(error, "render") else str(error)
        if as_json and error.exit_code == ExitCode.CANNOT_RUN:
            from selector.smoke.report import cannot_run_json

            out.out(json.dumps(cannot_run_json(message, [p.name for p in plans]), indent=2),
                    highlight=False)
        err.print(f"error: {message}", markup=False, highlight=False)
        raise typer.Exit(int(error.exit_code)) from None
    if as_json:
        out.out(json.dumps(report.to_json(), indent=2), highlight=False)
    else:
        for line in report.render_lines():
            out.print(line, markup=False, highlight=False)
    if not report.passed:
        failed = [plan.name for plan in report.plans if not plan.passed]
        err.print(f"error: shard check failed: {', '.join(failed)}", markup=False,
                  highlight=False)
        raise typer.Exit(int(ExitCode.SMOKE_FAILED))
