#!/usr/bin/env python3
"""Record vLLM's CUDA answer for every ``AttentionBackendEnum`` member no CUDA priority
list holds, pinned (``--attention-backend NAME``), with the CUDA oracle.

vLLM accepts every enum member at the command line; on an NVIDIA GPU
``CudaPlatform.get_attn_backend_cls`` then validates the pinned member alone (0.33.0
``vllm/platforms/cuda.py:429-449``): its class's ``validate_configuration`` reasons
("Selected backend ... is not valid for this configuration. Reason: [...]", an
``ImportError`` / ``OSError`` as ``[Type: message]``), the registry's own ValueError for a
member without a class path ("Backend X must be registered before use",
``registry.py:203-221``), or the member accepted. The CUDA oracle (``oracle.py`` of the
oracle directory, ``ORACLE_DIR``, unmodified) asks exactly that: ``get_attn_backend`` with
``AttentionConfig(backend=NAME)``. This tool pins each such member on a few
representative configs (a dense GQA layer, head size 128, bfloat16, KV ``auto`` and
``fp8``; an MLA layer, head size 576) on SM90 (H100 / H200) and SM100 (B200), and writes
vLLM's answers to ``tests/golden/oracle/vllm-X/cuda-pinned.jsonl.gz``::

    ORACLE_DIR=/work/shared/oracle python tools/cuda_pinned_oracle.py 0.33.0 \\
        --python /work/.venvs/oracle-0.33.0/bin/python

Which members to pin is asked of the release (its enum, less the backends the oracle
evaluates: the union of ``_get_backend_priorities``' lists). The oracle runs after the harness's
model start (``oracle.start_models``, ``ask_with_models``), whose inert compiled ops let a
class whose module reaches vLLM's model / quantization code be imported (the answers of
the other members are the same as the plain oracle's: checked on 0.33.0). A member vLLM's
``AttentionConfig`` turns into automatic selection (the MiniMax-M3 MSA aliases) is
recorded as such (``pin_selects_auto``). Nothing a harness failure produced is written as
vLLM's answer: a member whose class the CPU oracle cannot import or validate
(``CUDA_PINNED_HARNESS_GAPS``, with the cause) is not pinned, and any other
answer with an oracle ``error``, an ``EXCEPTION`` or an ``internal_inconsistency`` stops
the run (exit 1). An ``ImportError`` counts as vLLM's answer only for a ``vllm.`` module
the release does not ship (0.33.0's ``NO_ATTENTION`` path names a module the wheel lacks).
Output: sorted keys, gzip without a timestamp.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["CONFIGS", "CUDA_PINNED_HARNESS_GAPS", "NAMES", "golden_path", "main", "names_path",
           "to_golden_line"]

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = "tests/golden/oracle/vllm-{version}/cuda-pinned.jsonl.gz"
NAMES_GOLDEN = "tests/golden/oracle/vllm-{version}/attention-backend-names.json"
NAMES = ("BOGUS", "flash_attn", "Flash_Attn", "auto", "AUTO", "FLASH-ATTN", "NOT_A_BACKEND")
"""``--attention-backend`` words asked of the release's conversion (``EngineArgs.
create_engine_config`` reuses ``AttentionConfig.validate_backend_before``, 0.33.0
arg_utils.py:2727-2737, config/attention.py:218-231: "auto" in any case is automatic
selection, else ``AttentionBackendEnum[value.upper()]``, whose metaclass refuses a
non-member with "Unknown attention backend: ..." (registry.py:18-31)); argparse takes any
string for the flag (no ``choices``: ``tools/serve_flags.py --parse``)."""
CAPABILITIES = ("9.0", "10.0")
"""SM90 (H100, H200) and SM100 (B200)."""
CONFIGS: tuple[dict[str, Any], ...] = (
    {"head_size": 128, "kv_cache_dtype": "auto", "use_mla": False},
    {"head_size": 128, "kv_cache_dtype": "fp8", "use_mla": False},
    {"head_size": 576, "kv_cache_dtype": "auto", "use_mla": True},
)
"""A dense GQA layer (Llama-3.1-8B's head size), the same with an fp8 KV cache, an MLA
layer (DeepSeek's 512 + 64); bfloat16, no block size given, decoder attention."""

_ROCM_ARCH = ("vllm/platforms/rocm.py's import reads torch.cuda.get_device_properties("
              "'cuda').gcnArchName (rocm.py:205-215), which the CPU torch cannot answer "
              "(AssertionError: Torch not compiled with CUDA enabled: the harness's)")
_C_OPS_NOTE = ("its class's module imports vLLM's model / quantization code, whose import calls "
          "compiled ops (w8a8_utils.py, 0.33.0 :28-41: torch.ops._C."
          "cutlass_scaled_mm_supports_block_fp8; 0.25.1: cutlass_scaled_mm_supports_fp8), "
          "which the oracle's empty vllm._C lacks "
          "(an AttributeError, the harness's)")
_TRITON_EXTRA_NOTE = ("its module reads triton.language.extra at import, which the oracle "
                 "venv's Triton stand-in lacks (an AttributeError, the harness's)")
_TRITON_LANG = ("its module reads triton.language.float16 at import, which the oracle "
                "venv's Triton stand-in lacks (an AttributeError, the harness's)")
_GAPS: dict[str, str] = {
    "ROCM_AITER_FA": _ROCM_ARCH, "ROCM_AITER_UNIFIED_ATTN": _ROCM_ARCH,
    "ROCM_OCTAVE": _ROCM_ARCH, "ROCM_FLASHMLA_SPARSE_DSV4": _ROCM_ARCH,
    "ROCM_FLASHMLA_SPARSE_DSV41": _ROCM_ARCH, "ULTRAQUANT": _TRITON_LANG,
}
RELEASES = ("0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0",
            "0.32.0", "0.33.0")
CUDA_PINNED_HARNESS_GAPS: dict[str, dict[str, str]] = dict.fromkeys(RELEASES, _GAPS)
"""release -> the members not pinned, with why: the CPU oracle cannot import or validate
their class (a harness failure, never recorded as vLLM's answer)."""

_PROBE = r"""
import json, os
import vllm
from vllm.v1.attention.backends.registry import AttentionBackendEnum as E
paths = {}
for m in E:
    try:
        paths[m.name] = m.get_path()
    except ValueError as e:
        paths[m.name] = None
root = os.path.dirname(os.path.dirname(vllm.__file__))
shipped = {n: p is not None and os.path.exists(
    os.path.join(root, *p.rsplit(".", 1)[0].split("."))  + ".py") for n, p in paths.items()}
print(json.dumps({"vllm_version": vllm.__version__, "paths": paths, "shipped": shipped}))
"""


_NAMES_PROBE = r"""
import json, sys
from vllm.config.attention import AttentionConfig
out = []
for name in json.loads(sys.argv[1]):
    try:
        r = AttentionConfig.validate_backend_before(name)
        out.append({"name": name, "backend": None if r is None else r.name, "error": None})
    except ValueError as e:
        out.append({"name": name, "backend": None, "error": f"ValueError: {e}"})
print(json.dumps(out))
"""


class HarnessError(Exception):
    """The oracle could not answer (never recorded as vLLM's answer)."""


def golden_path(version: str, root: Path = ROOT) -> Path:
    return root / GOLDEN.format(version=version)


def names_path(version: str, root: Path = ROOT) -> Path:
    return root / NAMES_GOLDEN.format(version=version)


def _run(python: Path, args: list[str], cwd: Path, env: dict[str, str]) -> str:
    r = subprocess.run([str(python), *args], cwd=str(cwd), env=env, capture_output=True,
                       text=True, check=False)
    if r.returncode != 0:
        raise HarnessError(f"{args[0]} failed (rc={r.returncode}): {r.stderr.strip()[-1500:]}")
    return r.stdout


def pinned_members(probed: dict[str, Any], evaluated: list[str], version: str) -> list[str]:
    gaps = CUDA_PINNED_HARNESS_GAPS.get(version, {})
    return [n for n in probed["paths"] if n not in evaluated and n not in gaps]


def _gaps_of(version: str, probed: dict[str, Any]) -> dict[str, str]:
    return {n: why for n, why in CUDA_PINNED_HARNESS_GAPS.get(version, {}).items()
            if n in probed["paths"]}


def sample(members: list[str]) -> list[dict[str, Any]]:
    return [{"device_capability": cap, "dtype": "bfloat16", "block_size": None,
             "attn_type": "decoder", "attention_backend": m, **shape}
            for m in members for cap in CAPABILITIES for shape in CONFIGS]


def to_golden_line(cfg: dict[str, Any], answer: dict[str, Any], probed: dict[str, Any],
                   version: str) -> dict[str, Any]:
    """vLLM's answer for one pinned config, or HarnessError."""
    name = cfg["attention_backend"]
    path = probed["paths"][name]
    if answer.get("error"):
        raise HarnessError(f"{name} {cfg}: {answer['error'][:300]}")
    if path is not None and answer.get("config_backend", name) is None:
        # AttentionConfig.__post_init__ made the pin automatic selection: vLLM's own choice
        error = answer.get("selection_error")
        valid = answer["valid_in_priority"]
        if (error or "").startswith("EXCEPTION") or answer["selected"] != (valid[0] if valid else None):
            raise HarnessError(f"{name} {cfg}: automatic selection {answer['selected']} / {error}")
        return {"input": cfg, "selected": answer["selected"], "error": error,
                "priority": answer["priority"], "vllm_version": version,
                "pin_selects_auto": True, "backends": {}}
    error = answer.get("selection_error")
    if error and error.startswith("EXCEPTION"):
        raise HarnessError(f"{name} {cfg}: {error[:300]}")
    selected = answer.get("selected")
    if selected is not None and path is not None and selected in (
            name, f"<unregistered {path}>"):
        selected = name  # the oracle names only the classes it evaluates
    line: dict[str, Any] = {"input": cfg, "selected": selected, "error": error,
                            "priority": answer["priority"], "vllm_version": version}
    if path is None:  # registry.py get_path: vLLM's own ValueError
        if not (error or "").startswith(f"ValueError: Backend {name} must be registered"):
            raise HarnessError(f"{name} has no class path but vLLM answered {error!r}")
        line["unregistered"] = error
        line["backends"] = {}
        return line
    reasons = answer["backends"][name]
    for r in reasons:
        m = re.match(r"(?:ModuleNotFoundError|ImportError): No module named '([^']+)'", r)
        if r.startswith("EXCEPTION") or (m and not (m.group(1).startswith("vllm.")
                                                    and not probed["shipped"][name])):
            raise HarnessError(f"{name} {cfg}: {r[:300]}")
    line["backends"] = {name: reasons}
    expected = name if not reasons else None
    if selected != expected:
        raise HarnessError(f"{name} {cfg}: selected {selected}, reasons imply {expected}")
    return line


def ask_with_models(configs: list[dict[str, Any]], backends: list[str]) -> list[dict[str, Any]]:
    """vLLM's answers, in the oracle interpreter (``oracle.run_fresh``): the CUDA oracle's
    ``Oracle`` after the harness's model start (``oracle.start_models``: the compiled ops a
    backend module's import reaches through vLLM's model and quantization code, inert;
    ``_C_OPS_NOTE``, ``_TRITON_EXTRA_NOTE``), every class imported at start; with each
    config, whether vLLM's ``AttentionConfig`` keeps the pinned name (an alias its
    ``__post_init__`` turns into automatic selection does not)."""
    import oracle

    oracle.start_models()
    inst = oracle.instrument()
    from vllm.config import AttentionConfig

    engine = inst.Oracle(backends=backends, initial_capability=(9, 0), kv_cache=False)
    answers = []
    for cfg in configs:
        answer: dict[str, Any] = engine.evaluate(cfg)
        kept = AttentionConfig(backend=cfg["attention_backend"]).backend
        answer["config_backend"] = None if kept is None else kept.name
        answers.append(answer)
    return answers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("version")
    ap.add_argument("--python", type=Path, required=True, help="the release's oracle venv python")
    ap.add_argument("--oracle-dir", type=Path, default=Path(
        os.environ.get("ORACLE_DIR", str(ROOT.parent / "shared" / "oracle"))))
    ap.add_argument("--out", type=Path, default=ROOT, help="repository root to write under")
    a = ap.parse_args(argv)
    oracle = a.oracle_dir / "oracle.py"
    if not oracle.exists():
        print(f"error: no {oracle} (set ORACLE_DIR)", file=sys.stderr)
        return 2
    env = dict(os.environ)
    try:
        probed = json.loads(_run(a.python, ["-c", _PROBE], a.oracle_dir, env).splitlines()[-1])
        if probed["vllm_version"] != a.version:
            raise HarnessError(f"{a.python} has vLLM {probed['vllm_version']}, not {a.version}")
        facts = json.loads(_run(a.python, [str(oracle), "--env", "--compact"], a.oracle_dir, env))
        members = pinned_members(probed, list(facts["backends_evaluated"]), a.version)
        for name, why in _gaps_of(a.version, probed).items():
            print(f"  {name} not pinned (harness gap): {why}", file=sys.stderr)
        configs = sample(members)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import oracle as harness

        try:
            answers = harness.run_fresh(
                Path(__file__).resolve(), "ask_with_models",
                {"configs": configs, "backends": list(facts["backends_evaluated"])
                 + [m for m in members if probed["paths"][m] is not None]},
                python=a.python, env=dict(env, ORACLE_DIR=str(a.oracle_dir)))
        except harness.FreshProcessError as e:
            raise HarnessError(str(e)) from e
        bad: list[str] = []
        lines = []
        for cfg, ans in zip(configs, answers, strict=True):
            try:
                lines.append(to_golden_line(cfg, ans, probed, a.version))
            except HarnessError as e:
                bad.append(str(e))
        if bad:
            print(f"error: {len(bad)} answers are harness failures, nothing written:",
                  file=sys.stderr)
            for b in bad[:20]:
                print("  " + b, file=sys.stderr)
            return 1
        names = json.loads(_run(a.python, ["-c", _NAMES_PROBE, json.dumps(NAMES)],
                                a.oracle_dir, env).splitlines()[-1])
        harness.write_json(names_path(a.version, a.out),
                           {"vllm_version": a.version, "answers": names})
        path = golden_path(a.version, a.out)
        harness.write_jsonl_gz(path, lines)
        print(f"  wrote {path} ({len(lines)} lines, {len(members)} members)", file=sys.stderr)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
