#!/usr/bin/env python3
"""Conformance harness: one vLLM release's real answers against its attn-select profile.

For a release on PyPI it (1) finds or builds a CPU-only environment with that
vLLM (the vLLM oracle's ``setup.sh`` and requirement files), (2) reads the
release's vocabulary from vLLM itself (``tools/release_probe.py``: its
``CacheDType`` values and which backends are standard, MLA or reachable only by
name), (3) draws a seeded random sample of standard and MLA configs
(``tools/make_sample.py``), (4) asks vLLM (``oracle.py``, the real selection
code) and the profile (``attn-select sweep --engine vllm==X``, in process) and
(5) prints the per-field agreement and every difference, grouped
(``tools/compare_sweep.py``).

    python tools/conformance.py 0.29.0 --oracle ../shared/oracle
    python tools/conformance.py 0.29.0 --oracle ../shared/oracle --venv /venvs/oracle-0.29.0
    python tools/conformance.py 0.34.0 --oracle ../shared/oracle --build      # setup.sh into --venv-root
    python tools/conformance.py 0.29.0 --profile vllm==0.28.0 ...             # another profile
    python tools/conformance.py 0.29.0 ... --golden tests/golden/oracle/releases   # write CI goldens
    python tools/conformance.py 0.29.0 ... --json report.json                 # machine-readable

The environment: ``--venv`` if given, else ``ORACLE/.venv-X`` (``.venv`` for the
oracle's default release), else ``--venv-root/oracle-X``; ``--build`` runs the
oracle's ``setup.sh X VENV`` when none exists.  Samples: ``--standard`` configs
(seed ``--seed-standard``) and ``--mla`` configs (seed ``--seed-mla``); the
defaults are the project's acceptance sample (20,000 + 10,000, seeds 1 and 2).
The oracle's answers are cached under ``--work`` (keyed by release, family,
size, seed and the sample's digest), so re-checking a profile after an edit
costs only the profile's side.  Exit status: 0 when every field agrees, 1 when
something differs, 2 when the environment or the oracle is not usable.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import compare_sweep
import make_golden
import make_sample
import oracle
import oracle_to_sweep
from oracle import TOOLS as HERE

from selector.catalog import load_catalog

FAMILIES = ("standard", "mla")
# the four fields of the acceptance table, and how compare_sweep names them
TABLE_FIELDS = (("configs", "backends"), ("per-backend reasons", "backend_lists"),
                ("selection", "selected"), ("error text", "error"))
EXIT_DIFFERENT, EXIT_UNUSABLE = 1, 2


class HarnessError(Exception):
    """The environment or the oracle cannot answer."""


def find_venv(release: str, oracle_dir: Path, venv: Path | None, venv_root: Path,
              build: bool) -> Path:
    """The interpreter's venv for ``release`` (built with the oracle's setup.sh if asked)."""
    candidates = [venv] if venv else [oracle_dir / f".venv-{release}", venv_root / f"oracle-{release}"]
    if not venv and _oracle_default_release(oracle_dir) == release:
        candidates.insert(0, oracle_dir / ".venv")
    for path in candidates:
        if path is not None and (path / "bin" / "python").exists():
            return path
    target = venv or venv_root / f"oracle-{release}"
    if not build:
        raise HarnessError(f"no environment for vLLM {release} (looked in "
                           + ", ".join(str(c) for c in candidates if c)
                           + "); pass --venv or --build")
    setup = oracle_dir / "setup.sh"
    print(f"building {target} with {setup} {release} (a few minutes)", file=sys.stderr)
    done = subprocess.run(["bash", str(setup), release, str(target)], check=False)
    if done.returncode != 0 or not (target / "bin" / "python").exists():
        raise HarnessError(f"{setup} {release} {target} failed (exit {done.returncode}); "
                           f"a release needs {oracle_dir}/requirements-oracle-{release}.txt")
    return target


def _oracle_default_release(oracle_dir: Path) -> str | None:
    reqs = oracle_dir / "requirements-oracle.txt"
    if not reqs.exists():
        return None
    for line in reqs.read_text().splitlines():
        if line.strip().startswith("vllm=="):
            return line.split("==", 1)[1].split()[0].strip()
    return None


def probe(python: Path, oracle_dir: Path, cache: Path) -> dict[str, Any]:
    """vLLM's own vocabulary and static backend facts (tools/release_probe.py), cached."""
    if cache.exists():
        data: dict[str, Any] = json.loads(cache.read_text())
        return data
    cache.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([str(python), str(HERE / "release_probe.py"), "--oracle", str(oracle_dir),
                           "-o", str(cache)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise HarnessError("release_probe failed:\n" + done.stderr[-3000:])
    return json.loads(cache.read_text())


def vocabulary(release: str, probed: dict[str, Any]) -> dict[str, list[str]]:
    """What the sample draws from: make_sample's built-in tables for the releases it
    knows (so the committed samples reproduce), else the release's own answers."""
    if release in make_sample.VERSIONS:
        return make_sample._vocabulary(release)
    evaluated = probed["backends_evaluated"]
    mla = [n for n in evaluated if probed["backends"].get(n, {}).get("is_mla") is True]
    explicit = [n for n in probed["explicit_only"]
                if not n.startswith(("ROCM_", "AMX_", "CPU_", "XPU_"))]
    return {"kv_cache_dtypes": probed["kv_cache_dtypes"],
            "standard_backends": [n for n in evaluated if n not in mla],
            "mla_backends": mla, "explicit_only": explicit}


def oracle_answers(python: Path, oracle_dir: Path, release: str, family: str, n: int,
                   seed: int, work: Path) -> list[dict[str, Any]]:
    """The oracle's sweep records for the sample (cached under ``work``)."""
    configs = make_sample.generate(family, n, seed, release)
    text = json.dumps(configs)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    out = work / f"vllm-{release}" / f"{family}-{n}-{seed}-{digest}.sweep.jsonl.gz"
    if out.exists():
        with gzip.open(out, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = f".{os.getpid()}"  # concurrent runs never share a temporary file
    inputs = out.with_name(out.name.replace(".sweep.jsonl.gz", f"{tag}.inputs.json"))
    raw = out.with_name(out.name.replace(".sweep.jsonl.gz", f"{tag}.oracle.json"))
    inputs.write_text(text)
    start = time.monotonic()
    done = subprocess.run([str(python), "oracle.py", str(inputs), "-o", str(raw), "--compact",
                           "--no-kv-cache"], cwd=oracle_dir, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise HarnessError(f"oracle.py failed for vLLM {release} ({family}):\n{done.stderr[-3000:]}")
    print(f"  oracle: {n} {family} configs in {time.monotonic() - start:.0f} s", file=sys.stderr)
    records = oracle_to_sweep.convert(json.loads(raw.read_text()))
    partial = out.with_name(out.name + tag)
    with gzip.open(partial, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    partial.replace(out)
    inputs.unlink()
    raw.unlink()
    return records


def profile_answers(engine: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``attn-select sweep --engine ENGINE`` on the records' inputs (in process)."""
    from selector.sweep import sweep_lines

    data = load_catalog().engine(engine)
    lines = sweep_lines((json.dumps(r["input"]) for r in records), data, catalog=load_catalog())
    return [json.loads(line) for line in lines]


def restrict_to_oracle_backends(ours: list[dict[str, Any]],
                                theirs: list[dict[str, Any]]) -> None:
    """Compare only the backends vLLM reported (its evaluated set plus a forced one);
    a backend vLLM reports and the profile lacks still counts as a difference."""
    for o, t in zip(ours, theirs, strict=True):
        o["backends"] = {k: v for k, v in (o.get("backends") or {}).items()
                         if k in (t.get("backends") or {})}


def table_row(report: dict[str, Any]) -> dict[str, Any]:
    fields = report["fields"]
    return {label: {"agree": fields[key]["agree"], "total": fields[key]["total"]}
            for label, key in TABLE_FIELDS}


def render_table(rows: dict[str, dict[str, Any]]) -> list[str]:
    head = f"{'release / family':24s}" + "".join(f"{label:>24s}" for label, _ in TABLE_FIELDS)
    out = [head]
    for name, row in rows.items():
        cells = []
        for label, _ in TABLE_FIELDS:
            a, t = row[label]["agree"], row[label]["total"]
            pct = 100.0 * a / t if t else 100.0
            cells.append(f"{a:>7d}/{t:<7d}{pct:8.3f}%")
        out.append(f"{name:24s}" + "".join(f"{c:>24s}" for c in cells))
    return out


def write_golden(records: list[dict[str, Any]], path: Path, n: int) -> None:
    """A feature-covering subset (tools/make_golden.py), gzip-compressed, for CI."""
    keep = [{k: v for k, v in r.items() if k != "kv_cache"} for r in records]
    indices, _core = make_golden.select(keep, n, seed=0)
    subset = [keep[i] for i in indices]
    oracle.write_gz(path, "".join(json.dumps(rec, separators=(",", ":")) + "\n" for rec in subset))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("releases", nargs="+", help="vLLM releases, e.g. 0.29.0")
    ap.add_argument("--oracle", type=Path,
                    help="the vLLM oracle directory (oracle.py, setup.sh, requirement files; "
                         "default $ORACLE_DIR, else ../shared/oracle)")
    ap.add_argument("--venv", type=Path, help="the release's environment (one release only)")
    ap.add_argument("--venv-root", type=Path, default=Path.home() / ".cache" / "attn-select-oracle",
                    help="where environments are looked for and built (oracle-X)")
    ap.add_argument("--build", action="store_true", help="build a missing environment")
    ap.add_argument("--profile", help="compare with this engine profile (default: vllm==RELEASE)")
    ap.add_argument("--standard", type=int, default=20000, help="standard configs (0: none)")
    ap.add_argument("--mla", type=int, default=10000, help="MLA configs (0: none)")
    ap.add_argument("--seed-standard", type=int, default=1)
    ap.add_argument("--seed-mla", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "attn-select-conformance",
                    help="cache of probes and oracle answers")
    ap.add_argument("--max-groups", type=int, default=30, help="difference groups shown per family")
    ap.add_argument("--golden", type=Path,
                    help="write gzip golden subsets to GOLDEN/vllm-X/{standard,mla}.jsonl.gz")
    ap.add_argument("--golden-standard", type=int, default=1500)
    ap.add_argument("--golden-mla", type=int, default=1000)
    ap.add_argument("--json", type=Path, help="write the agreement table and differences as JSON")
    a = ap.parse_args(argv)
    if a.venv and len(a.releases) > 1:
        ap.error("--venv names one release's environment; give one release")
    try:
        oracle_dir = oracle.oracle_dir(a.oracle)
    except oracle.OracleNotFoundError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    rows: dict[str, dict[str, Any]] = {}
    reports: dict[str, Any] = {}
    status = 0
    for release in a.releases:
        engine = a.profile or f"vllm=={release}"
        try:
            venv = find_venv(release, oracle_dir, a.venv, a.venv_root, a.build)
            python = venv / "bin" / "python"
            probed = probe(python, oracle_dir, a.work / f"vllm-{release}" / "probe.json")
            if probed["vllm_version"] != release:
                raise HarnessError(f"{venv} has vLLM {probed['vllm_version']}, not {release}")
            if release not in make_sample.VERSIONS:
                make_sample.register_vocabulary(release, vocabulary(release, probed))
            for family, n, seed in (("standard", a.standard, a.seed_standard),
                                    ("mla", a.mla, a.seed_mla)):
                if n <= 0:
                    continue
                theirs = oracle_answers(python, oracle_dir, release, family, n, seed, a.work)
                ours = profile_answers(engine, theirs)
                restrict_to_oracle_backends(ours, theirs)
                report = compare_sweep.compare(ours, theirs, max_examples=2)
                name = f"{release} {family}"
                rows[name] = {"configs": n, **table_row(report)}
                reports[name] = report
                print(f"== vLLM {release} ({family}, {n} configs, seed {seed}) vs {engine}")
                for line in compare_sweep.render_text(report, ours_name="profile",
                                                      theirs_name="vllm",
                                                      max_groups=a.max_groups):
                    print(line)
                if not report["identical"]:
                    status = max(status, EXIT_DIFFERENT)
                if a.golden:
                    size = a.golden_standard if family == "standard" else a.golden_mla
                    write_golden(theirs, a.golden / f"vllm-{release}" / f"{family}.jsonl.gz", size)
        except HarnessError as exc:
            print(f"conformance: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
    print()
    print("agreement (profile vs vLLM):")
    for line in render_table(rows):
        print(line)
    if a.json:
        a.json.write_text(json.dumps({"table": rows, "reports": reports}, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
