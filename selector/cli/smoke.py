"""``attn-select smoke-plan PLAN.json``: run smoke plans given directly as JSON.

:func:`run_plans` is the shared driver (progress, rendering, exit codes); the solver's
``smoke CONFIG`` command calls it with the plans it derives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from selector.cli.fleet import DEFAULT_TIMEOUT_S, FleetFormat, RayDevices, RayTimeout, run_smoke_fleet
from selector.cli.progress import progress as spinner
from selector.errors import AttnSelectError, ExitCode, InputError

if TYPE_CHECKING:
    from selector.parallel.plan import ShardPlan
    from selector.smoke.plan import SmokeOptions, SmokePlan
    from selector.smoke.report import SmokeReport

__all__ = ["register", "run_plans", "smoke_command", "smoke_plan_command"]


class ReportFormat(str, Enum):
    text = "text"
    json = "json"


SmokeFormat = FleetFormat
"""``smoke`` formats: text and json here; with --ray every ``check`` format."""


class ShardMode(str, Enum):
    auto = "auto"
    with_smoke = "with"
    only = "only"
    off = "off"


class KernelSource(str, Enum):
    native = "native"
    torch = "torch"


class LseBaseChoice(str, Enum):
    e = "e"
    two = "2"
    swapped = "swapped"


def _print_report(report: SmokeReport, output_format: ReportFormat, out: Console) -> None:
    from selector.smoke.render import render_report

    if output_format is ReportFormat.json:
        out.out(json.dumps(report.to_json(), indent=2), highlight=False)
    else:
        out.print(render_report(report))


def run_plans(plans: Sequence[SmokePlan], options: SmokeOptions, *,
              output_format: ReportFormat = ReportFormat.text) -> None:
    """Run ``plans``, print the report, and exit 0 / 3 (a check failed) / 4 (cannot run)."""
    from selector.smoke.report import SmokeChecksFailed, SmokeSubstituted
    from selector.smoke.runner import run_smoke

    out = Console(soft_wrap=output_format is ReportFormat.json)
    err = Console(stderr=True, soft_wrap=True)
    try:
        with spinner(err) as progress:
            task = progress.add_task("starting", total=None)
            report = run_smoke(plans, options,
                               progress=lambda stage: progress.update(task, description=stage))
    except SmokeChecksFailed as failure:
        _print_report(failure.report, output_format, out)
        err.print(f"error: {failure}", markup=False, highlight=False)
        raise typer.Exit(int(ExitCode.SMOKE_FAILED)) from None
    except SmokeSubstituted as substituted:
        _print_report(substituted.report, output_format, out)
        err.print(f"error: {substituted}", markup=False, highlight=False)
        raise typer.Exit(int(ExitCode.SUBSTITUTED)) from None
    except AttnSelectError as error:
        if output_format is ReportFormat.json and error.exit_code == ExitCode.CANNOT_RUN:
            from selector.smoke.report import cannot_run_json

            out.out(json.dumps(cannot_run_json(str(error), [p.name for p in plans]), indent=2),
                    highlight=False)
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
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print every kernel call the run would make, without a GPU or "
        "torch.")] = False,
) -> None:
    """Run the real attention kernels for each plan on this GPU and prove the outputs.

    Exit 0 when every check passes, 2 on a bad plans file, 3 when a kernel or check fails,
    4 when this machine cannot run it (no GPU, or a kernel library missing).
    """
    from selector.catalog import load_catalog
    from selector.smoke.plan import load_plans_file

    try:
        plans_file = load_plans_file(plan_file, load_catalog())
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
    if dry_run:
        try:
            _print_dry_run(plans_file.plans, options, output_format)
        except AttnSelectError as error:
            Console(stderr=True, soft_wrap=True).print(f"error: {error}", markup=False,
                                                       highlight=False)
            raise typer.Exit(int(error.exit_code)) from None
        return
    run_plans(plans_file.plans, options, output_format=output_format)


def _deployment_plans(config: Path, parity: bool | None = None) -> list[SmokePlan]:
    """The smoke plans of a deployment file, through the solver (and the KV planner)."""
    return _deployment_smoke(config, parity)[0]


def _deployment_smoke(config: Path, parity: bool | None = None
                      ) -> tuple[list[SmokePlan], list[str]]:
    """The smoke plans of a deployment file and the parity backends left out."""
    from selector.catalog import load_catalog
    from selector.inputs.config import load_deployment
    from selector.pipeline.smoke import deployment_smoke

    return deployment_smoke(load_deployment(str(config)), load_catalog(), parity=parity)


_RAY_HELP = ("Run on a Ray cluster, once per GPU type (the fleet smoke): auto (RAY_ADDRESS "
             "or a cluster running here), local (start one here) or HOST:PORT.")


def smoke_command(
    configs: Annotated[list[Path], typer.Argument(
        metavar="CONFIG...", show_default=False,
        help="Deployment file (YAML, TOML or JSON); several with --ray.")],
    output_format: Annotated[SmokeFormat, typer.Option(
        "--format", "-f", case_sensitive=False,
        help="Report format (junit, markdown, github and sarif: with --ray).")
    ] = SmokeFormat.text,
    repeats: Annotated[int | None, typer.Option(
        "--repeats", min=1, help="Timed repeats per kernel (median reported).")] = None,
    measure: Annotated[bool, typer.Option(
        "--measure/--no-measure", help="Time the kernels.")] = True,
    seed: Annotated[int, typer.Option("--seed", help="Batch and data seed.")] = 0,
    shards: Annotated[ShardMode, typer.Option(
        "--shards", case_sensitive=False,
        help="Shard check of a tensor- or decode-context-parallel deployment: every rank's "
             "share (its heads; under DCP its interleaved KV tokens), merged as vLLM merges "
             "them, against the whole-cache reference. auto: the shard check alone for "
             "DCP, the smoke check alone for TP; with: the smoke check, then the shard "
             "check; only; off.")] = ShardMode.auto,
    gpus: Annotated[int | None, typer.Option(
        "--gpus", min=1, help="Run the shard check with one process per rank on this many "
                              "GPUs (torch.distributed, NCCL); default: every rank in turn "
                              "on one GPU.")] = None,
    kernels: Annotated[KernelSource, typer.Option(
        "--kernels", case_sensitive=False,
        help="Shard check kernels: native (the backend's) or torch (a plain-torch stand-in "
             "that runs on the CPU, over gloo with --gpus).")] = KernelSource.native,
    merge_lse_base: Annotated[LseBaseChoice | None, typer.Option(
        "--merge-lse-base", case_sensitive=False,
        help="Merge the DCP partial outputs as if the kernels returned this LSE base "
             "(swapped: the other one of each backend's) instead of the backend's: a "
             "deliberate mix-up, the check must fail.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print every kernel call the run would make (backend, providers, "
        "entry points, arguments) without a GPU or torch.")] = False,
    parity: Annotated[bool | None, typer.Option(
        "--parity/--no-parity", show_default=False,
        help="Also run the other valid backend of a single-layer deployment (FlashAttention "
             "next to FlashInfer) on the same data and compare their outputs. Default: only "
             "when its kernels need no compile (FlashInfer JIT-compiles each variant on first "
             "use, 20-110 s on a fresh machine, so an FA3 deployment's FlashInfer parity runs "
             "with --parity only; a FlashInfer deployment's FA3 parity runs).")] = None,
    ray: Annotated[str | None, typer.Option(
        "--ray", metavar="auto|local|ADDRESS", help=_RAY_HELP)] = None,
    device: RayDevices = None,
    timeout: RayTimeout = DEFAULT_TIMEOUT_S,
    ship_code: Annotated[bool, typer.Option(
        "--ship-code", help="With --ray: send this attn-select to the workers (a Ray "
                            "runtime_env with py_modules); they still need its dependencies "
                            "and the gpu extra.")] = False,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="With --ray: write the report to this file.")] = None,
) -> None:
    """Check a deployment, then run its attention kernels on this GPU, called exactly as
    vLLM calls them (the engine's kernel call contract), on a paged KV cache built exactly
    as negotiated, and prove them against a reference.

    With --ray, run the same check on one node of every GPU type of a Ray cluster and merge
    the answers into one fleet report.

    A deployment `check` finds invalid runs nothing, --dry-run included: a selection
    or KV plan vLLM refuses, or a start-up refusal (memory MM001-MM003, --dtype SU001,
    --max-model-len SU002, the TP / DCP split SU003, SU006, SU008-SU016) exits 1 with
    check's code and vLLM's words. The refusal is the deployment's, on the device its
    file names (with --ray: on each GPU type, a refused type being an invalid row),
    whatever machine or stand-in kernels (--kernels torch) would run it. Change the
    file as `check` hints.

    Exit 0 when every check passes, 1 for a deployment vLLM would reject, 2 on bad input,
    3 when a kernel or check fails, 4 when this machine (with --ray: some device) cannot run
    it, 5 when every check passed but on another kernel than the plan negotiated
    (SUBSTITUTED).
    """
    from selector.catalog import load_catalog
    from selector.parallel.plan import ShardOptions
    from selector.pipeline.smoke import shard_plans
    from selector.smoke.plan import SmokeOptions

    options = SmokeOptions(seed=seed, measure=measure, **({"repeats": repeats} if repeats else {}))
    local_only = [name for name, given in (
        ("--dry-run", dry_run), ("--shards", shards is not ShardMode.auto),
        ("--gpus", gpus is not None), ("--kernels", kernels is not KernelSource.native),
        ("--merge-lse-base", merge_lse_base is not None)) if given]
    if ray is not None and not local_only:
        # --parity / --no-parity travel with the options: each node plans its own parity
        fleet_options = {**options.model_dump(mode="json"),
                         **({"parity": parity} if parity is not None else {})}
        raise run_smoke_fleet(configs, address=ray, devices=list(device or []),
                              timeout_s=timeout, options=fleet_options,
                              output_format=FleetFormat(output_format.value), output=output,
                              ship_code=ship_code)
    fleet_only = [name for name, given in (("several CONFIG files", len(configs) > 1),
                                           (f"--format {output_format.value}",
                                            output_format.value not in ("text", "json")),
                                           ("--device", bool(device)), ("--output", bool(output)),
                                           ("--ship-code", ship_code), ("--ray", bool(ray)))
                  if given]
    if fleet_only:
        Console(stderr=True, soft_wrap=True).print(
            f"error: {', '.join(fleet_only)}: only for a fleet run (--ray, without "
            f"{' or '.join(local_only) or '--dry-run'}); the local smoke takes one deployment "
            "on this machine", markup=False, highlight=False)
        raise typer.Exit(int(ExitCode.USAGE))
    config, local_format = configs[0], ReportFormat(output_format.value)
    try:
        plans, parity_left_out = _deployment_smoke(config, parity)
        shard_list, skipped = shard_plans(config, plans, load_catalog()) if shards is not ShardMode.off \
            else ([], [])
        if shards is ShardMode.auto:
            shard_list = [plan for plan in shard_list if plan.uses_dcp]
        if dry_run:
            _print_dry_run(plans, options, local_format, shard_list=shard_list,
                           standard=shards is not ShardMode.only and (
                               shards is not ShardMode.auto or not shard_list))
            return
        if shards in (ShardMode.only, ShardMode.with_smoke) and not shard_list:
            raise InputError("the deployment does not split attention over ranks "
                             "(tensor_parallel_size and decode_context_parallel_size are 1)",
                             file=str(config), field="parallel",
                             hint="drop --shards only, or set parallel.tensor_parallel_size")
        if gpus is not None and not shard_list:
            raise InputError("--gpus runs the shard check, and this deployment has none",
                             file=str(config), field="parallel",
                             hint="set parallel.tensor_parallel_size or "
                                  "decode_context_parallel_size")
    except AttnSelectError as error:
        message = error.render() if isinstance(error, InputError) else str(error)
        Console(stderr=True, soft_wrap=True).print(f"error: {message}", markup=False,
                                                   highlight=False)
        raise typer.Exit(int(error.exit_code)) from None
    standard = shards in (ShardMode.off, ShardMode.with_smoke) or (
        shards is ShardMode.auto and not shard_list)
    if parity_left_out and parity is None and not dry_run:
        Console(stderr=True, soft_wrap=True).print(
            f"note: parity with {', '.join(parity_left_out)} left out (its kernels JIT-compile "
            "on first use); --parity runs it", markup=False, highlight=False)
    for name in skipped:
        Console(stderr=True, soft_wrap=True).print(
            f"note: the shard check skips plan '{name}' (MLA, FP8 KV or sinks are not "
            "shard-checked yet)", markup=False, highlight=False)
    if standard:
        run_plans(plans, options, output_format=local_format)
    if shard_list:
        from selector.cli.shards import run_shards
        from selector.parallel.plan import ShardOptions

        shard_options = ShardOptions(
            seed=seed, kernels=kernels.value,
            merge_lse_base=merge_lse_base.value if merge_lse_base else None,
            **({"repeats": repeats} if repeats else {}))
        run_shards(shard_list, shard_options, gpus=gpus,
                   as_json=local_format is ReportFormat.json)


def _print_dry_run(plans: Sequence[SmokePlan], options: SmokeOptions,
                   output_format: ReportFormat, *, shard_list: Sequence[ShardPlan] = (),
                   standard: bool = True) -> None:
    from selector.smoke.dry_run import dry_run

    data = dry_run(plans, options) if standard else {}
    if shard_list:
        from selector.parallel.dry_run import shard_dry_run

        data.update(shard_dry_run(shard_list, options.seed))
    out = Console(soft_wrap=True)
    if output_format is ReportFormat.json:
        out.out(json.dumps(data, indent=2), highlight=False)
        return
    for shard in data.get("shards", []):
        out.print(f"{shard['plan']['name']}: shard check, {shard['split']}", markup=False,
                  highlight=False)
        for rank in shard["ranks"]:
            lengths = rank.get("kv_lens_read", rank.get("kv_lens"))
            out.print(f"  rank {rank['rank']}: q heads {rank['own_q_heads']}, KV heads "
                      f"{rank['kv_heads']}, KV lengths read {lengths}", markup=False,
                      highlight=False)
        for name, call in shard["calls"].items():
            out.print(f"  {name}: {call}", markup=False, highlight=False)
        if "merge" in shard:
            out.print(f"  merge: {shard['merge']['combine']}; {shard['merge']['second_pass']}",
                      markup=False, highlight=False)
    if not standard:
        return
    for entry in data["plans"]:
        plan = entry["plan"]
        out.print(f"{plan['name']}: {plan['backend']} ({entry['engine']})", markup=False,
                  highlight=False)
        order = ", ".join(p["id"] + ("" if p["runs_negotiated_kernel"] else " (substitute)")
                          for p in entry["providers"])
        out.print(f"  providers, in order: {order}", markup=False, highlight=False)
        for provider in entry["providers"]:
            if "runs" in provider:
                out.print(f"  {provider['id']}: {provider['runs']}", markup=False,
                          highlight=False)
        if entry.get("cross_checked_by"):
            out.print(f"  also through, where importable: {', '.join(entry['cross_checked_by'])}",
                      markup=False, highlight=False)
        for call in entry["calls"] + entry.get("graph_calls", []):
            out.print(f"  {call['call']}: {call['entry_point']}  ({call['source']})",
                      markup=False, highlight=False)
            for stage in ("construct", "plan", "run", "arguments"):
                if stage in call:
                    args = ", ".join(f"{k}={v}" for k, v in call[stage].items())
                    out.print(f"    {stage}: {args}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``smoke`` and ``smoke-plan`` commands to ``app``."""
    app.command(name="smoke", no_args_is_help=True)(smoke_command)
    app.command(name="smoke-plan", no_args_is_help=True)(smoke_plan_command)
