#!/usr/bin/env python3
"""Benchmarks of the check path, measured as ratios against baselines in the same run.

1. ``attn-select check`` on a shipped example as a cold process, next to importing the
   dependencies alone (the issue's baseline, ``import pydantic, typer, rich, yaml``,
   and the imports the tool really needs: pydantic's ``BaseModel`` machinery,
   ``rich.console`` and ``typer`` with click), with the on-disk cache warm and off.
2. ``sweep`` throughput on one core in configs/s, next to the oracle (the real vLLM
   code) on the same file when its virtual environment is given, like with like: the
   evaluation-only rates (both warm) and whole cold processes (both with start-up).

    python3 benchmarks/bench_core.py [--runs 15] [--configs 20000] [--family standard]
        [--seed 1] [--oracle /work/oracle]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llama-3.1-8b-h100.yaml"


def _time(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - start


def cold_start(runs: int) -> dict[str, float]:
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
        "check (cache warm)": ([py, "-m", "selector", "check", str(EXAMPLE)], base_env),
        "check (no cache)": ([py, "-m", "selector", "check", str(EXAMPLE)], no_cache),
    }
    _time(commands["check (cache warm)"][0], base_env)  # fill the cache
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):  # interleaved so machine noise hits every command alike
        for name, (cmd, env) in commands.items():
            samples[name].append(_time(cmd, env))
    return {name: statistics.median(values) for name, values in samples.items()}


_ORACLE_TIMING = re.compile(r"startup ([0-9.]+)s; evaluation ([0-9.]+)s")


def sweep_throughput(configs: int, oracle: Path | None, family: str = "standard",
                     seed: int = 1) -> dict[str, float]:
    """configs/s of attn-select and of the oracle on the same sample, like with like:
    evaluation only (both warm: the tool's in-process rate after the first pass, the
    oracle's own "evaluation" timing without its vLLM import) and whole cold processes
    (both including start-up)."""
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "sample.jsonl"
        subprocess.run([sys.executable, str(ROOT / "tools" / "make_sample.py"), "--family", family,
                        "--n", str(configs), "--seed", str(seed), "-o", str(sample)], check=True,
                       cwd=ROOT)
        sys.path.insert(0, str(ROOT))
        from selector.catalog import load_catalog
        from selector.sweep import sweep_lines

        lines = sample.read_text().splitlines()
        engine = load_catalog().engine()
        list(sweep_lines(lines[:200], engine))  # compile once, warm up
        best = 0.0
        for _ in range(3):
            start = time.perf_counter()
            for _line in sweep_lines(lines, engine):
                pass
            best = max(best, len(lines) / (time.perf_counter() - start))
        result: dict[str, float] = {"attn-select configs/s (evaluation)": best}
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "selector", "sweep", str(sample), "-o",
                        str(Path(tmp) / "ours.jsonl")], cwd=ROOT, check=True)
        result["attn-select configs/s (cold process)"] = len(lines) / (time.perf_counter() - start)
        python = oracle / ".venv" / "bin" / "python" if oracle else None
        if python is not None and python.exists():
            as_list = Path(tmp) / "sample.json"
            as_list.write_text(json.dumps([json.loads(line) for line in lines]))
            start = time.perf_counter()
            proc = subprocess.run([str(python), str(oracle / "oracle.py"), str(as_list), "-o",
                                   str(Path(tmp) / "out.json"), "--compact"], cwd=oracle,
                                  capture_output=True, text=True, check=False)
            result["oracle configs/s (cold process)"] = len(lines) / (time.perf_counter() - start)
            timing = _ORACLE_TIMING.search(proc.stderr or "")
            if timing:  # the oracle's own timing of its evaluation, without the vLLM import
                result["oracle configs/s (evaluation)"] = len(lines) / float(timing.group(2))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--configs", type=int, default=20000)
    parser.add_argument("--oracle", type=Path, default=None, help="oracle folder with .venv (optional)")
    parser.add_argument("--family", default="standard",
                        help="make_sample.py family (the standard sample: standard, seed 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-cold", action="store_true")
    args = parser.parse_args()
    if not args.skip_cold:
        cold = cold_start(args.runs)
        print(f"cold process, median of {args.runs} interleaved runs:")
        for name, seconds in cold.items():
            print(f"  {name:28s} {seconds:.3f} s")
        for baseline in ("deps (issue baseline)", "deps as used"):
            for check in ("check (cache warm)", "check (no cache)"):
                print(f"  {check} - {baseline}: +{cold[check] - cold[baseline]:.3f} s")
    sweep = sweep_throughput(args.configs, args.oracle, args.family, args.seed)
    print(f"sweep, {args.configs} {args.family} configs (seed {args.seed}), one core:")
    for name, value in sweep.items():
        print(f"  {name:46s} {value:,.0f}")
    for kind, ours, theirs in (
            ("evaluation only", "attn-select configs/s (evaluation)",
             "oracle configs/s (evaluation)"),
            ("cold processes", "attn-select configs/s (cold process)",
             "oracle configs/s (cold process)")):
        if theirs in sweep:
            print(f"  ratio attn-select / oracle, {kind}: {sweep[ours] / sweep[theirs]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
