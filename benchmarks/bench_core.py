#!/usr/bin/env python3
"""Benchmarks of the check path, measured in one run next to their baselines.

1. ``attn-select check`` on a shipped example as a cold process, next to importing the
   dependencies alone (the issue's baseline, ``import pydantic, typer, rich, yaml``,
   and the imports the tool really needs: pydantic's ``BaseModel`` machinery,
   ``rich.console``/``rich.table``, ``typer`` with click, ``yaml``), with the on-disk
   cache warm and off.  The check's own work is its time above "deps as used" (goal:
   60 ms), in CPU time (user + sys: what a shared machine's load does not inflate much)
   and in wall time, medians of interleaved runs.
2. ``sweep`` throughput on one core in configs/s on the standard sample (20,000
   configs of ``tools/make_sample.py --family standard --seed 1``): the batch path
   (``sweep_lines``, goal: 50,000/s) and the per-config reference path
   (``sweep_lines_per_config``), interleaved in one process, medians of CPU-time rates
   (and of wall-time rates); both outputs are compared line for line first.  Next to
   the oracle (the real vLLM code) on the same file when its Python is given, like
   with like: evaluation only (the tool's warm in-process wall rate against the
   oracle's own wall timing of its evaluation, without its vLLM import) and whole cold
   processes (both with start-up).

    python3 benchmarks/bench_core.py [--runs 15] [--sweep-runs 5] [--configs 20000]
        [--family standard] [--seed 1] [--oracle /work/oracle]
        [--oracle-python /work/venvs/oracle-0.33.0/bin/python] [--skip-cold] [--skip-sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llama-3.1-8b-h100.yaml"
SWEEP_GOAL = 50_000
"""configs/s on one core (issue 14)."""
COLD_GOAL_MS = 60
"""The check's own work above "deps as used", ms (issue 14)."""


def _time(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


_ONE_MODEL = ("from pydantic import BaseModel; import typer, rich.console, rich.table, yaml\n"
              "class One(BaseModel):\n    value: int = 0\nOne(value=1)")


def cold_start(runs: int) -> dict[str, tuple[float, float]]:
    """Per command, the medians of (wall, CPU) seconds over ``runs`` interleaved runs."""
    py = sys.executable
    # measure the tool as installed: bytecode compiled (pip does that at install time; a
    # PYTHONDONTWRITEBYTECODE environment would otherwise recompile every module each run)
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "selector")], check=True)
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base_env["NO_COLOR"] = "1"
    no_cache = {**base_env, "ATTN_SELECT_NO_CACHE": "1"}
    commands = {
        "deps (issue baseline)": ([py, "-c", "import pydantic, typer, rich, yaml"], base_env),
        "deps as used": ([py, "-c", "from pydantic import BaseModel; import typer, rich.console, "
                          "rich.table, yaml"], base_env),
        # what pydantic itself costs on first real use (fields, schema building, the
        # validator): information only, the goal stays on "deps as used"
        "deps, one model validated": ([py, "-c", _ONE_MODEL], base_env),
        "check (cache warm)": ([py, "-m", "selector", "check", str(EXAMPLE)], base_env),
        "check (no cache)": ([py, "-m", "selector", "check", str(EXAMPLE)], no_cache),
    }
    _time(commands["check (cache warm)"][0], base_env)  # fill the cache
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):  # interleaved so machine noise hits every command alike
        for name, (cmd, env) in commands.items():
            samples[name].append(_time(cmd, env))
    return {name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
            for name, values in samples.items()}


_ORACLE_TIMING = re.compile(r"startup ([0-9.]+)s; evaluation ([0-9.]+)s")


def _rates(function: Callable[[], Iterator[str]], count: int) -> tuple[float, float]:
    """(configs/s in CPU time, configs/s in wall time) of one pass (lines thrown away)."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _line in function():
        pass
    return count / (time.process_time() - cpu), count / (time.perf_counter() - wall)


def sweep_throughput(configs: int, runs: int, oracle: Path | None, oracle_python: Path | None,
                     family: str = "standard", seed: int = 1) -> dict[str, float]:
    """configs/s of the batch and the per-config paths (medians of ``runs`` interleaved
    passes, CPU and wall), and of the oracle on the same sample, like with like."""
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "sample.jsonl"
        subprocess.run([sys.executable, str(ROOT / "tools" / "make_sample.py"), "--family", family,
                        "--n", str(configs), "--seed", str(seed), "-o", str(sample)], check=True,
                       cwd=ROOT)
        sys.path.insert(0, str(ROOT))
        from selector.catalog import load_catalog
        from selector.sweep import sweep_lines, sweep_lines_per_config

        lines = sample.read_text().splitlines()
        engine = load_catalog().engine()
        if list(sweep_lines(lines, engine, catalog=load_catalog())) \
                != list(sweep_lines_per_config(lines, engine, catalog=load_catalog())):
            raise SystemExit("the batch and per-config sweeps differ: not timing them")
        paths = {"batch": lambda: sweep_lines(lines, engine, catalog=load_catalog()),
                 "per-config": lambda: sweep_lines_per_config(lines, engine, catalog=load_catalog())}
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        for _ in range(runs):  # interleaved: machine noise hits both alike
            for name, function in paths.items():
                measured[name].append(_rates(function, len(lines)))
        result: dict[str, float] = {}
        for name, values in measured.items():
            result[f"{name} configs/s (CPU, in process)"] = statistics.median(c for c, _ in values)
            result[f"{name} configs/s (wall, in process)"] = statistics.median(w for _, w in values)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "selector", "sweep", str(sample), "-o",
                        str(Path(tmp) / "ours.jsonl")], cwd=ROOT, check=True)
        result["batch configs/s (wall, cold process)"] = len(lines) / (time.perf_counter() - start)
        python = oracle_python or (oracle / ".venv" / "bin" / "python" if oracle else None)
        if oracle is not None and python is not None and python.exists():
            as_list = Path(tmp) / "sample.json"
            as_list.write_text(json.dumps([json.loads(line) for line in lines]))
            start = time.perf_counter()
            proc = subprocess.run([str(python), str(oracle / "oracle.py"), str(as_list), "-o",
                                   str(Path(tmp) / "out.json"), "--compact"], cwd=oracle,
                                  capture_output=True, text=True, check=False)
            result["oracle configs/s (wall, cold process)"] = len(lines) / (time.perf_counter() - start)
            timing = _ORACLE_TIMING.search(proc.stderr or "")
            if timing:  # the oracle's own timing of its evaluation, without the vLLM import
                result["oracle configs/s (wall, evaluation)"] = len(lines) / float(timing.group(2))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="cold-process runs per command")
    parser.add_argument("--sweep-runs", type=int, default=5, help="in-process sweep passes per path")
    parser.add_argument("--configs", type=int, default=20000)
    parser.add_argument("--oracle", type=Path, default=None,
                        help="oracle folder (oracle.py; its Python: .venv or --oracle-python)")
    parser.add_argument("--oracle-python", type=Path, default=None,
                        help="the Python of an oracle virtual environment")
    parser.add_argument("--family", default="standard",
                        help="make_sample.py family (the standard sample: standard, seed 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--skip-sweep", action="store_true")
    args = parser.parse_args()
    if not args.skip_cold:
        cold = cold_start(args.runs)
        print(f"cold process, median of {args.runs} interleaved runs (wall s, CPU s):")
        for name, (wall, cpu) in cold.items():
            print(f"  {name:28s} {wall:.3f}  {cpu:.3f}")
        for baseline in ("deps (issue baseline)", "deps as used", "deps, one model validated"):
            for check in ("check (cache warm)", "check (no cache)"):
                wall = 1000 * (cold[check][0] - cold[baseline][0])
                cpu = 1000 * (cold[check][1] - cold[baseline][1])
                print(f"  {check} - {baseline}: +{wall:.0f} ms wall, +{cpu:.0f} ms CPU")
        own = 1000 * (cold["check (cache warm)"][1] - cold["deps as used"][1])
        print(f"  the check's own work (cache warm, CPU): {own:.0f} ms; goal <= {COLD_GOAL_MS} ms "
              f"({own / COLD_GOAL_MS:.2f}x the goal)")
    if not args.skip_sweep:
        sweep = sweep_throughput(args.configs, args.sweep_runs, args.oracle, args.oracle_python,
                                 args.family, args.seed)
        print(f"sweep, {args.configs} {args.family} configs (seed {args.seed}), one core, "
              f"median of {args.sweep_runs} interleaved passes:")
        for name, value in sweep.items():
            print(f"  {name:46s} {value:,.0f}")
        batch = sweep["batch configs/s (CPU, in process)"]
        single = sweep["per-config configs/s (CPU, in process)"]
        print(f"  batch / per-config (CPU): {batch / single:.2f}x; batch / goal {SWEEP_GOAL:,}: "
              f"{batch / SWEEP_GOAL:.2f}")
        for kind, ours, theirs in (
                ("evaluation only, wall", "batch configs/s (wall, in process)",
                 "oracle configs/s (wall, evaluation)"),
                ("cold processes, wall", "batch configs/s (wall, cold process)",
                 "oracle configs/s (wall, cold process)")):
            if theirs in sweep:
                print(f"  ratio attn-select / oracle, {kind}: {sweep[ours] / sweep[theirs]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
