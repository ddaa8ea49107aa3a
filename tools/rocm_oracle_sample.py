#!/usr/bin/env python3
"""Record vLLM's ROCm attention-backend answers for one release (the ROCm oracle).

vLLM's real ``RocmPlatform`` answers on CPU through the ROCm oracle
(``rocm_oracle.py`` in the oracle directory: it stubs amdsmi's architecture
probe, the compiled extensions and the AITER package, and calls vLLM's own
``get_attn_backend``, ``RocmPlatform.get_valid_backends`` and
``_get_backend_priorities``).  This tool draws a seeded sample of standard and
MLA configs (``tools/make_sample.py``, ``generate_rocm``: the gfx architectures
of the catalog's AMD devices, AITER installed or not, the ``VLLM_ROCM_*``
switches), asks the release and writes its answers, selection and per-backend
reasons, to ``tests/golden/oracle/vllm-X/rocm-{standard,mla}.jsonl.gz``::

    ORACLE_DIR=/work/oracle python tools/rocm_oracle_sample.py 0.33.0 \\
        --python /work/.venvs/oracle-0.33.0/bin/python
    python tools/rocm_oracle_sample.py 0.30.0 --python ... --standard 200 --mla 100 --out /tmp/x

The release's vocabulary (its ``CacheDType`` values and which ROCm backends it
registers) is read from the release itself, so every drawn config is one the
release accepts.  A ROCm install always has Triton (it ships with ROCm's torch);
an oracle environment without it gets one on ``PYTHONPATH`` from
``--triton-path`` (``ORACLE_ROCM_EXTRA_PATH``, default /work/oracle-rocm-extra: a
folder holding ``triton`` and its ``.dist-info``, whose entry points name the
AMD backend).

The oracle must be ``ORACLE_VERSION`` 3 or newer: the shared oracle (version 1, checked
on 0.33.0 only) with ``tools/rocm_oracle.patch`` applied (``patch rocm_oracle.py
tools/rocm_oracle.patch`` in the oracle directory) runs every profiled release (only the
backends a release registers, only the ``get_attn_backend`` keywords it takes, its own
``validate_configuration`` call before 0.31.0), keeps aiter probes of ``VllmConfig``'s
construction apart from the selector's, and can trace an unmodelled aiter import
(``ROCM_ORACLE_TRACE_AITER=1``). The named configs (``--cases``) may use the fields of
``ORACLE_VERSION`` 4 (the same patch): ``model_attn_type`` (the model config's
``attn_type``, which vLLM's ROCm list reads), ``flash_attn_installed`` (the upstream
flash-attn package) and ``mla_prefill`` (the MLA dimensions: vLLM's ROCm MLA prefill
choice, ``RocmPlatform.get_mla_prefill_backend_cls``, recorded with the answer). The
pinned family (``--pinned N``) needs ``ORACLE_VERSION`` 5 (the same patch): any
``AttentionBackendEnum`` member may be pinned, so the worker imports every member's class
at start (a GPU workspace a module allocates at import made on ``meta``), and a member
without a class path is vLLM's own refusal (``unregistered``: "Backend X must be
registered before use", ``registry.py`` ``get_path``). Those imports reach model
modules that import torchvision and compressed-tensors (DeepSeek-V4, MiniMax-M3,
Step-5), which the oracle venvs lack: ``--extra-path`` (``ORACLE_EXTRA_PATH``, default
/work/oracle-extra) puts them on ``PYTHONPATH`` after Triton.

The oracle models a ROCm install's packages: those of vLLM's CUDA requirements that
``requirements/rocm.txt`` lacks (flashinfer-python's ``flashinfer`` and ``b12x``,
nvidia-cutlass-dsl, quack-kernels, tokenspeed-mla, cuda-bindings: the oracle's
``ROCM_ABSENT``), nor the parts of vLLM that its CMakeLists.txt builds for CUDA only
(``vllm.vllm_flash_attn``, ``vllm._flashmla_C``, ``vllm._flashmla_extension_C``,
``vllm._qutlass_C``: ``ROCM_ABSENT_VLLM``), cannot be imported, so a backend module needing one gives vLLM's
``["ImportError"]`` as on an AMD GPU. An ``ImportError`` counts as vLLM's answer only when
its cause is such a package or a ``vllm.`` module the release does not ship (0.33.0's
``NO_ATTENTION`` path); the oracle reports any other (``harness_import_errors``: the venv
lacking a package) and the run stops. The causes are recorded (``import_errors``).

Nothing a harness failure produced is written as vLLM's answer: an answer with a
harness ``error``, an exception outside vLLM's ``ValueError``, an AITER import the
stub does not model or an ``internal_inconsistency`` (the selection does not
follow from the recorded reasons) stops the run (exit 1), naming the configs.
The output is deterministic: fixed seeds, sorted keys, gzip without a timestamp.
Raw answers are cached under ``--data`` (keyed by the sample's digest).
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

__all__ = ["FAMILIES", "PINNED_HARNESS_GAPS", "golden_path", "main", "to_golden_line"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import make_sample  # noqa: E402

# family -> (default size, seed); the acceptance sample: 10,000 + 5,000 per release
FAMILIES: dict[str, tuple[int, int]] = {"standard": (10000, 271), "mla": (5000, 272),
                                        "pinned": (0, 273)}
"""pinned: every name of the release's AttentionBackendEnum pinned (--attention-backend)
in turn over standard and MLA configs; recorded with ``--pinned N`` (0: not drawn)."""
GOLDEN = "tests/golden/oracle/vllm-{version}/rocm-{family}.jsonl.gz"
_MINIMAX_GAP = ("its class's module imports MiniMax-M3's model code, whose compilation passes "
                "bind vllm._C's fused ops at import (compilation/passes/fusion/matcher_utils.py:"
                "32-40: torch.ops._C.rotary_embedding.default, static_scaled_fp8_quant, ...), "
                "which the oracle's empty vllm._C lacks (an AttributeError, the harness's)")
PINNED_HARNESS_GAPS: dict[str, dict[str, str]] = {
    "0.25.1": {"MINIMAX_M3_SPARSE": _MINIMAX_GAP},
    "0.26.0": {"MINIMAX_M3_SPARSE": _MINIMAX_GAP},
}
"""release -> the AttentionBackendEnum members the pinned family does not pin, with why:
the oracle cannot import their class (a harness failure, never recorded as vLLM's
answer), so vLLM is not asked about them."""
MIN_ORACLE_VERSION = 3
MIN_PINNED_ORACLE_VERSION = 5
V4_FIELDS = frozenset({"model_attn_type", "flash_attn_installed", "mla_prefill"})
"""Config fields the oracle answers from ORACLE_VERSION 4 (the model config's attn_type,
the upstream flash-attn package, the ROCm MLA prefill choice)."""

_PROBE = r"""
import json, typing
from vllm.config.cache import CacheDType
from vllm.v1.attention.backends.registry import AttentionBackendEnum
import vllm
print(json.dumps({"vllm_version": vllm.__version__,
                  "kv_cache_dtypes": list(typing.get_args(CacheDType)),
                  "backends": list(AttentionBackendEnum.__members__)}))
"""

# every backend a ROCm priority list names in some release (rocm_oracle.ROCM_BACKENDS)
ROCM_BACKENDS = (
    "ROCM_ATTN", "ROCM_AITER_FA", "ROCM_AITER_UNIFIED_ATTN", "TRITON_ATTN",
    "TURBOQUANT", "ROCM_OCTAVE", "ULTRAQUANT",
    "ROCM_AITER_MLA", "TRITON_MLA", "ROCM_AITER_TRITON_MLA", "ROCM_AITER_MLA_SPARSE",
)


class HarnessError(Exception):
    """The oracle could not answer (never recorded as vLLM's answer)."""


def golden_path(version: str, family: str, root: Path = ROOT) -> Path:
    return root / GOLDEN.format(version=version, family=family)


def _with_extra(env: dict[str, str], extra_path: Path) -> dict[str, str]:
    """``env`` with ``extra_path`` last on ``PYTHONPATH`` (only the oracle gets it: its
    torchvision imports only with the oracle's fake-registration stub)."""
    return dict(env, PYTHONPATH=os.pathsep.join(
        p for p in (env.get("PYTHONPATH", ""), str(extra_path)) if p))


def _env(python: Path, triton_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    has_triton = subprocess.run(
        [str(python), "-c", "import importlib.util,sys; "
         "sys.exit(importlib.util.find_spec('triton') is None)"],
        capture_output=True, check=False).returncode == 0
    if not has_triton:
        if not (triton_path / "triton").exists():
            raise HarnessError(f"{python} has no triton and {triton_path} holds none "
                               "(give --triton-path)")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(triton_path), env.get("PYTHONPATH", "")) if p)
    return env


def probe(python: Path, env: dict[str, str]) -> dict[str, Any]:
    r = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True,
                       env=env, check=False)
    if r.returncode != 0:
        raise HarnessError(f"probe failed: {r.stderr.strip()[-800:]}")
    data: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return data


def _oracle_version(oracle: Path) -> int:
    for line in oracle.read_text(encoding="utf-8").splitlines():
        if line.startswith("ORACLE_VERSION"):
            return int(line.split("=")[1])
    return 0


def ask(python: Path, oracle: Path, configs: list[dict[str, Any]], cache: Path,
        env: dict[str, str]) -> list[dict[str, Any]]:
    digest = hashlib.sha256(json.dumps(configs, sort_keys=True).encode()
                            + oracle.read_bytes()).hexdigest()[:16]
    out = cache / f"{digest}.oracle.json.gz"
    if out.exists():
        with gzip.open(out, "rt", encoding="utf-8") as f:
            cached: list[dict[str, Any]] = json.load(f)
            return cached
    cache.mkdir(parents=True, exist_ok=True)
    inputs = cache / f"{digest}.inputs.json"
    raw = cache / f"{digest}.oracle.json"
    inputs.write_text(json.dumps(configs), encoding="utf-8")
    t0 = time.perf_counter()
    r = subprocess.run([str(python), str(oracle), str(inputs), "-o", str(raw), "--compact"],
                       cwd=str(oracle.parent), env=env, capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        raise HarnessError(f"rocm_oracle.py failed (rc={r.returncode}): "
                           f"{r.stderr.strip()[-1500:]}")
    summary = [x for x in r.stderr.splitlines() if x.startswith("rocm-oracle:")]
    print(f"  {len(configs)} configs in {time.perf_counter() - t0:.0f}s "
          f"({summary[-1] if summary else ''})", file=sys.stderr)
    answers: list[dict[str, Any]] = json.loads(raw.read_text(encoding="utf-8"))
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write(json.dumps(answers).encode())
    raw.unlink()
    inputs.unlink()
    return answers


def harness_failures(answers: list[dict[str, Any]]) -> list[str]:
    bad = []
    for i, a in enumerate(answers):
        why = (a.get("error") or a.get("exceptions") or a.get("internal_inconsistency")
               or a.get("aiter_unmodelled_imports")
               or ("EXCEPTION" in (a.get("selection_error") or "") and a["selection_error"]))
        if why:
            bad.append(f"config {i}: {str(why)[:300]}")
        for name, err in (a.get("harness_import_errors") or {}).items():
            bad.append(f"config {i}: {name} ImportError is the harness's: {err[:300]}")
    return bad


def to_golden_line(cfg: dict[str, Any], answer: dict[str, Any], version: str) -> dict[str, Any]:
    line: dict[str, Any] = {
        "input": cfg,
        "backends": answer["backends"],
        "priority": answer["priority"],
        "selected": answer["selected"],
        "error": answer["selection_error"],
        "aiter": answer["aiter"],
        "device_capability": answer["device_capability"],
        "vllm_version": version,
    }
    if answer.get("not_passed"):
        line["not_passed"] = answer["not_passed"]
    if answer.get("unregistered"):  # ORACLE_VERSION 5: vLLM's own ValueError
        line["unregistered"] = answer["unregistered"]
    if answer.get("import_errors"):  # ORACLE_VERSION 5: the cause of an "ImportError"
        line["import_errors"] = answer["import_errors"]
    if "mla_prefill" in answer:  # ORACLE_VERSION 4: the config asked for it
        line["mla_prefill"] = answer["mla_prefill"]
    return line


def write_golden(lines: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(x, sort_keys=True, separators=(",", ":")) + "\n" for x in lines)
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:
        f.write(text.encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("version")
    ap.add_argument("--python", type=Path, required=True, help="the release's oracle venv python")
    ap.add_argument("--oracle-dir", type=Path,
                    default=Path(os.environ.get("ORACLE_DIR", "/work/oracle")))
    ap.add_argument("--triton-path", type=Path, default=Path(
        os.environ.get("ORACLE_ROCM_EXTRA_PATH", "/work/oracle-rocm-extra")))
    ap.add_argument("--extra-path", type=Path, default=Path(
        os.environ.get("ORACLE_EXTRA_PATH", "/work/oracle-extra")),
        help="pure-Python packages the backend modules' imports reach (torchvision, "
        "compressed-tensors, loguru)")
    ap.add_argument("--data", type=Path, default=Path("/work/oracle-data"))
    ap.add_argument("--standard", type=int, default=FAMILIES["standard"][0])
    ap.add_argument("--mla", type=int, default=FAMILIES["mla"][0])
    ap.add_argument("--pinned", type=int, default=FAMILIES["pinned"][0],
                    help="configs pinning each AttentionBackendEnum name in turn "
                    "(written to rocm-pinned.jsonl.gz)")
    ap.add_argument("--out", type=Path, default=ROOT, help="repository root to write under")
    ap.add_argument("--cases", type=Path, help="named configs (tools/rocm_acceptance_cases.json) "
                    "instead of the sample: written to tests/golden/oracle/vllm-X/rocm-cases.jsonl.gz")
    a = ap.parse_args(argv)
    oracle = a.oracle_dir / "rocm_oracle.py"
    if not oracle.exists():
        print(f"error: no {oracle} (set ORACLE_DIR)", file=sys.stderr)
        return 2
    if _oracle_version(oracle) < MIN_ORACLE_VERSION:
        print(f"error: {oracle} is ORACLE_VERSION < {MIN_ORACLE_VERSION} "
              "(0.33.0 only); update the oracle", file=sys.stderr)
        return 2
    try:
        if a.pinned and _oracle_version(oracle) < MIN_PINNED_ORACLE_VERSION:
            raise HarnessError(f"{oracle} is ORACLE_VERSION < {MIN_PINNED_ORACLE_VERSION}, "
                               "which cannot pin every member (apply tools/rocm_oracle.patch)")
        env = _env(a.python, a.triton_path)
        probed = probe(a.python, env)
        if probed["vllm_version"] != a.version:
            raise HarnessError(f"{a.python} has vLLM {probed['vllm_version']}, not {a.version}")
        if a.cases:  # named configs: the CLI tests' expected answers
            named = json.loads(a.cases.read_text(encoding="utf-8"))
            newer = sorted({k for c in named for k in c} & V4_FIELDS)
            if newer and _oracle_version(oracle) < 4:
                raise HarnessError(f"{oracle} is ORACLE_VERSION < 4, which has no {newer} "
                                   "(apply tools/rocm_oracle.patch)")
            answers = ask(a.python, oracle, named, a.data / "rocm" / f"vllm-{a.version}", env)
            bad = harness_failures(answers)
            if bad:
                print("error: harness failures, nothing written:\n  " + "\n  ".join(bad),
                      file=sys.stderr)
                return 1
            lines = [dict(to_golden_line({k: v for k, v in c.items() if k != "id"}, ans,
                                         a.version), id=c["id"])
                     for c, ans in zip(named, answers, strict=True)]
            path = golden_path(a.version, "cases", a.out)
            write_golden(lines, path)
            print(f"  wrote {path} ({len(lines)} lines)", file=sys.stderr)
            return 0
        backends = [b for b in ROCM_BACKENDS if b in probed["backends"]]
        samples = {}
        families = [("standard", a.standard), ("mla", a.mla), ("pinned", a.pinned)]
        families = [(f, n) for f, n in families if n > 0]
        for family, n in families:
            seed = FAMILIES[family][1]
            if family == "pinned":
                gaps = PINNED_HARNESS_GAPS.get(a.version, {})
                samples[family] = make_sample.generate_rocm_pinned(
                    n, seed, probed["kv_cache_dtypes"], backends,
                    [b for b in probed["backends"] if b not in gaps])
                for name, why in gaps.items():
                    print(f"  {name} not pinned (harness gap): {why}", file=sys.stderr)
            else:
                samples[family] = make_sample.generate_rocm(
                    family, n, seed, probed["kv_cache_dtypes"], backends)
            print(f"vLLM {a.version} ROCm {family}: {n} configs (seed {seed})",
                  file=sys.stderr)
        # one oracle run for both families: one vLLM start per (arch, aiter)
        configs = [dict(c, id=i) for i, c in enumerate(
            [c for f, _ in families for c in samples[f]])]
        answers = ask(a.python, oracle, configs, a.data / "rocm" / f"vllm-{a.version}",
                      _with_extra(env, a.extra_path) if a.pinned else env)
        bad = harness_failures(answers)
        if bad:
            print(f"error: {len(bad)} answers are harness failures, nothing written:",
                  file=sys.stderr)
            for b in bad[:20]:
                print("  " + b, file=sys.stderr)
            return 1
        start = 0
        for family, _ in families:
            sample = samples[family]
            lines = [to_golden_line(c, ans, a.version)
                     for c, ans in zip(sample, answers[start:start + len(sample)], strict=True)]
            start += len(sample)
            path = golden_path(a.version, family, a.out)
            write_golden(lines, path)
            print(f"  wrote {path} ({len(lines)} lines)", file=sys.stderr)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
