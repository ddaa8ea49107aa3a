#!/usr/bin/env python3
"""Record every answer of one vLLM release that the test suite needs, with one command.

Adding a release is its profile (``schemas/engines/vllm-X/profile.yaml``, see
docs/engine-profiles.md), then::

    python tools/record_release.py 0.34.0 --python /work/venvs/oracle-0.34.0/bin/python

and then ``attn-select docs``. The interpreter is the release's oracle environment
(vLLM installed, CPU only). Every answer is vLLM's own: each step runs one of the
project's oracle tools, which calls the release's unmodified code, and writes the
file the tests read (goldens never write themselves: a profile without them fails).

``STEPS`` below is the registry of those recorders, one per fact: the tool, its arguments
and the files it writes (``{version}`` is the release); tools/oracle/README.md says how to
add one. They run in that order; the first failing
step stops the run, naming the steps already done. Options:

* ``--root DIR``: write under DIR (a copy of the repository, for checking) instead of
  this repository; the tools themselves always run from this repository.
* ``--only STEP ...``: run only these steps; ``--list``: print the steps and exit.
* ``--oracle-dir`` (``ORACLE_DIR``, else ../shared/oracle next to the repository): the vLLM
  oracle instrument (tools/oracle/ locates it); ``--extra-path`` (``ORACLE_EXTRA_PATH``):
  torchvision, compressed-tensors and loguru for the multimodal and quantized models;
  ``--dist-port`` (``ORACLE_DIST_PORT``).
* ``--data DIR`` (default /work/oracle-data): big intermediates (the conformance
  samples and the oracle's raw answers, cached by release, size, seed and digest; the
  release probe; the parser's flags before they become ``serve-flags.yaml``). The
  conformance step reuses cached answers: give a fresh folder to ask vLLM again.

Each written file's sha256 is printed, so a re-recording is compared by its bytes.

Exit status: 0 every step done, 1 a step failed, 2 bad arguments or interpreter.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import oracle
from oracle import ORACLE_GOLDEN, PROFILE, RELEASE_GOLDEN, REPO, TOOLS

__all__ = ["STEPS", "Step", "main", "step_outputs"]

EXIT_FAILED = 1
EXIT_USAGE = 2


@dataclass(frozen=True)
class Step:
    """One recorder: ``python tools/<tool> <args>`` writing ``outputs`` itself (with the
    harness's writers, tools/oracle/answers.py; nothing is read from its stdout).

    ``interpreter`` is ``oracle`` (the release's ``--python``: the tool imports vLLM) or
    ``project`` (this interpreter: the tool drives the oracle interpreter itself).
    ``ok_status`` are the exit statuses that mean done;
    ``required``: the outputs must exist afterwards (false where no change means no file).
    Placeholders in ``args``: ``{version} {python} {venv} {oracle} {data} {root}
    {out}`` (``{out}`` is the first output under the root) and ``{claims}``.
    """

    name: str
    tool: str
    args: tuple[str, ...]
    outputs: tuple[str, ...]
    interpreter: str = "oracle"
    ok_status: tuple[int, ...] = (0,)
    note: str = ""
    env: tuple[str, ...] = field(default=())
    required: bool = True


STEPS: tuple[Step, ...] = (
    Step("probe", "release_probe.py", ("--oracle", "{oracle}", "-o", "{out}"),
         (f"{RELEASE_GOLDEN}/probe.json.gz",),
         note="what each backend class states (tests/golden/test_release_goldens.py)"),
    Step("selection", "conformance.py",
         ("{version}", "--oracle", "{oracle}", "--venv", "{venv}", "--work", "{data}/conformance",
          "--golden", "{root}/tests/golden/oracle/releases"),
         (f"{RELEASE_GOLDEN}/standard.jsonl.gz", f"{RELEASE_GOLDEN}/mla.jsonl.gz"),
         interpreter="project", ok_status=(0, 1),
         note="the selection oracle on 20,000 standard + 10,000 MLA configs, feature-covering "
              "subsets; exit 1 (the profile differs) still wrote them"),
    Step("config-aliases", "config_aliases_oracle.py",
         ("ask", "--claims", "{claims}", "--out", "{out}"),
         (f"{RELEASE_GOLDEN}/config_aliases.json",),
         env=("HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"),
         note="the config fields vLLM reads (tests/golden/test_config_aliases.py)"),
    Step("dcp", "dcp_oracle.py", ("{out}",), (f"{ORACLE_GOLDEN}/dcp.json.gz",),
         note="DCP / TP splits at start-up (tests/golden/test_dcp_oracle.py)"),
    Step("max-model-len", "max_len_oracle.py", ("--out", "{out}"),
         (f"{ORACLE_GOLDEN}/max-model-len.jsonl.gz",),
         note="derived and refused max_model_len (tests/golden/test_startup_facts.py)"),
    Step("defaults", "defaults_oracle.py", ("--out", "{out}"),
         (f"{ORACLE_GOLDEN}/defaults.jsonl.gz",),
         note="vLLM's defaults on emulated GPUs: batch limits by device, gpu_memory_utilization, "
              "cudagraph_mode, capture sizes (tests/golden/test_engine_defaults.py)"),
    Step("weights", "weights_oracle.py", ("--out", "{out}"), (f"{ORACLE_GOLDEN}/weights.jsonl.gz",),
         note="model-class parameters on the meta device (tests/golden/test_startup_facts.py)"),
    Step("quant-weights", "quant_oracle.py", ("--out", "{out}"),
         (f"{ORACLE_GOLDEN}/quant-weights.jsonl.gz",),
         note="quantized models' parameters on the meta device (tests/golden/test_quant_weights.py); "
              "needs compressed-tensors in the oracle environment (ORACLE_EXTRA_PATH)"),
    Step("pp-stages", "pp_oracle.py",
         ("--indices", f"{{root}}/{ORACLE_GOLDEN}/pp-indices.json", "--out", "{out}"),
         (f"{ORACLE_GOLDEN}/pp-weights.jsonl.gz", f"{ORACLE_GOLDEN}/pp-indices.json"),
         note="pipeline stages: get_pp_indices and each stage's parameters "
              "(tests/golden/test_pp_stages.py)"),
    Step("weights-configs", "weights_oracle.py", ("--real", "--out", "{out}"),
         (f"{ORACLE_GOLDEN}/weights-configs.jsonl.gz",),
         note="per-rank parameters of every real config and preset at TP 1 / 2 (4 / 8) "
              "(tests/golden/test_weights_configs.py, docs/memory.md)"),
    Step("encoder", "encoder_oracle.py", ("--out", "{out}"), (f"{ORACLE_GOLDEN}/encoder.json.gz",),
         note="the ViT attention backend per capability and the encoder budget check "
              "(tests/golden/test_encoder_oracle.py)"),
    Step("cudagraph-mode", "cudagraph_mode_oracle.py", ("--out", "{out}"),
         (f"{ORACLE_GOLDEN}/cudagraph-mode.jsonl.gz",),
         note="the runner type and CUDA-graph mode after VllmConfig.__post_init__ of every "
              "config the model reference built (tests/golden/test_cudagraph_mode_oracle.py)"),
    Step("runner-types", "runner_type_oracle.py", ("--out", "{out}"),
         (f"{PROFILE}/runner_types.json",),
         note="the architectures --runner auto resolves to the pooling runner (the CUDA-graph "
              "mode a pooling model starts with: tests/golden/test_cudagraph_mode_oracle.py)"),
    Step("draft", "draft_oracle.py", ("--out", "{out}"), (f"{ORACLE_GOLDEN}/draft.jsonl.gz",),
         note="the speculative draft vLLM builds on the meta device: its layers, backend, "
              "KV specs in the groups, parameters, refusals (tests/golden/test_draft_oracle.py)"),
    Step("runtime-facts", "runtime_facts_oracle.py",
         ("all", "--python", "{python}", "--oracle-dir", "{oracle}", "-o", "{out}"),
         (f"{ORACLE_GOLDEN}/runtime_facts.json",), interpreter="project",
         note="kernel block sizes, CUDA graphs, reorder threshold per capability "
              "(tests/golden/test_runtime_facts.py)"),
    Step("wired-backends", "wired_backends_oracle.py",
         ("ask", "--oracle-dir", "{oracle}", "--out", "{out}"),
         (f"{ORACLE_GOLDEN}/wired_backends.json",),
         note="Mamba / GDN / indexer backends (tests/golden/test_wired_backends.py)"),
    Step("model-registry", "extract_model_registry.py", ("{package}", "--out", "{out}"),
         (f"{PROFILE}/model_registry.json",),
         note="vLLM's model registry tables (tests/unit/test_model_architectures.py, "
              "test_cache_key.py)"),
    Step("serve-flags-ask", "serve_flags.py", ("--ask", "--oracle", "{oracle}", "-o", "{out}"),
         ("{data}/serve-flags/flags-{version}.json",),
         note="the engine flags of the release's own parser (an intermediate)"),
    Step("serve-flags", "serve_flags.py",
         ("--write", "{data}/serve-flags/flags-{version}.json", "-o", "{root}/schemas/engines"),
         (f"{PROFILE}/serve-flags.yaml",), interpreter="project", required=False,
         note="its engine_flags section: flags added / removed since the parent profile "
              "(tests/unit/test_serve_parsing.py; no file when none changed)"),
    Step("serve-arity", "serve_flags.py", ("--arity", "--oracle", "{oracle}", "-o", "{out}"),
         (f"{ORACLE_GOLDEN}/serve-arity.json",),
         note="words per `vllm serve` flag; the newest release's is compared "
              "(tests/golden/test_serve_arity.py); needs the "
              "frontend's packages (fastapi ...) in the oracle environment"),
    Step("serve-configs", "serve_flags.py", ("--configs", "--oracle", "{oracle}", "-o", "{out}"),
         (f"{ORACLE_GOLDEN}/serve-configs.json",),
         note="the fields of the JSON config classes, their Literal fields, the flags' "
              "choices and the speculative methods (tests/golden/test_serve_parse_oracle.py)"),
    Step("serve-parser", "serve_flags.py",
         ("--write-parser", f"{{root}}/{ORACLE_GOLDEN}/serve-arity.json",
          f"{{root}}/{ORACLE_GOLDEN}/serve-configs.json", "-o", "{root}/schemas/engines"),
         (f"{PROFILE}/serve-flags.yaml",), interpreter="project",
         note="its frontend_flags, speculative_methods, config_fields, config_literals and "
              "flag_choices sections "
              "(tests/golden/test_serve_parse_oracle.py)"),
    Step("config-defaults", "config_defaults_oracle.py", ("--out", "{out}"),
         (f"{ORACLE_GOLDEN}/config-defaults.json.gz",),
         env=("HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"),
         note="the defaults of the config class vLLM reads each text model type through; "
              "then `python tools/config_defaults_oracle.py --data` rewrites "
              "schemas/models/config_defaults.yaml (tests/unit/test_config_defaults.py)"),
    Step("serve-parse", "serve_flags.py",
         ("--parse", "{root}/tests/data/serve_parse_lines.json", "--oracle", "{oracle}",
          "-o", "{out}"),
         (f"{ORACLE_GOLDEN}/serve-parse.json",),
         note="the release parser's answer to typed `vllm serve` lines "
              "(tests/golden/test_serve_parse_oracle.py)"),
    Step("cuda-pinned", "cuda_pinned_oracle.py",
         ("{version}", "--python", "{python}", "--oracle-dir", "{oracle}", "--out", "{root}"),
         (f"{ORACLE_GOLDEN}/cuda-pinned.jsonl.gz", f"{ORACLE_GOLDEN}/attention-backend-names.json"),
         interpreter="project",
         note="every AttentionBackendEnum member no CUDA priority list holds, pinned on SM90 / "
              "SM100, and vLLM's refusal of a word no member is "
              "(tests/golden/test_cuda_pinned.py)"),
)

NOT_PER_RELEASE: dict[str, str] = {
    f"{ORACLE_GOLDEN}/weights-dotsmuse.jsonl.gz":
        "0.33.0's parameters of the Muse Spark / Muse Glimmer synthetic configs "
        "(tools/weights_oracle.py --configs; tests/golden/test_weights_dotsmuse.py reads 0.33.0)",
    f"{ORACLE_GOLDEN}/weights-step5.jsonl.gz":
        "0.33.0's parameters of the synthetic Step5 config (tools/weights_oracle.py --configs; "
        "cited by families.yaml's step5 weights: not counted)",
    f"{ORACLE_GOLDEN}/rocm-standard.jsonl.gz":
        "vLLM's ROCm platform's answers: tools/rocm_oracle_sample.py VERSION --python VENV "
        "(the ROCm oracle, with Triton on its path; not yet a step of this tool)",
    f"{ORACLE_GOLDEN}/rocm-mla.jsonl.gz": "as rocm-standard.jsonl.gz",
    f"{ORACLE_GOLDEN}/rocm-pinned.jsonl.gz":
        "as rocm-standard.jsonl.gz, with --standard 0 --mla 0 --pinned 600 "
        "(tests/golden/test_rocm_oracle.py: every profiled release has them)",
    f"{ORACLE_GOLDEN}/rocm-cases.jsonl.gz":
        "0.33.0's ROCm acceptance cases (tests/unit/test_rocm_cli.py), by tools/rocm_oracle_sample.py",
    f"{ORACLE_GOLDEN}/standard.jsonl.gz":
        "0.33.0's older-format sample (2,000 lines, tools/run_oracle_sample.sh); newer "
        "releases get releases/vllm-X/standard.jsonl.gz (step selection)",
    f"{ORACLE_GOLDEN}/mla.jsonl.gz":
        "0.33.0's older-format sample; newer releases get releases/vllm-X/mla.jsonl.gz",
    f"{ORACLE_GOLDEN}/all.jsonl.gz":
        "0.25.1's older-format sample (with the KV-cache report); tests/golden/test_oracle_golden_0251.py",
    f"{ORACLE_GOLDEN}/memory-fit.jsonl.gz":
        "0.33.0 only (tools/memory_oracle.py --write; tests/golden/test_memory_oracle.py reads 0.33.0's)",
    f"{ORACLE_GOLDEN}/mla_prefill.jsonl.gz":
        "0.33.0 only (tools/mla_prefill_oracle.py; tests/golden/test_mla_prefill_golden.py reads 0.33.0's)",
}
"""Answer files in the per-release folders that no test requires of a new release."""


def step_outputs(version: str) -> dict[str, str]:
    """Every file the steps write for ``version`` (relative to the root) -> its step."""
    return {path.format(version=version, data="{data}"): step.name
            for step in STEPS for path in step.outputs}


class RecordError(Exception):
    """A step or the interpreter could not give its answer."""


def _interpreter_facts(python: Path) -> tuple[str, str]:
    """(vLLM version, vllm package folder) of the oracle interpreter, without importing vLLM."""
    code = ("import importlib.metadata as m, importlib.util as u, json; "
            "s = u.find_spec('vllm'); "
            "print(json.dumps([m.version('vllm'), list(s.submodule_search_locations)[0]]))")
    try:
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                              check=False, timeout=120)
    except OSError as exc:
        raise RecordError(f"--python {python}: {exc}") from exc
    if done.returncode != 0:
        raise RecordError(f"--python {python} has no vLLM: {done.stderr.strip()[-500:]}")
    version, package = json.loads(done.stdout)
    return str(version), str(package)


def _claims() -> str:
    spec = importlib.util.spec_from_file_location("config_aliases_oracle",
                                                  TOOLS / "config_aliases_oracle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    claims: dict[str, Any] = module.claims_from_families(REPO / "schemas/models/families.yaml")
    return json.dumps(claims)


def run_step(step: Step, values: dict[str, str], root: Path, env: dict[str, str]) -> None:
    outputs = [root / path.format(**values) for path in step.outputs]
    for path in outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
    values = {**values, "out": str(outputs[0])}
    python = values["python"] if step.interpreter == "oracle" else sys.executable
    command = [python, str(TOOLS / step.tool), *(arg.format(**values) for arg in step.args)]
    step_env = {**env, **dict(item.split("=", 1) for item in step.env)}
    done = subprocess.run(command, cwd=REPO, env=step_env, check=False)
    if done.returncode not in step.ok_status:
        raise RecordError(f"step {step.name}: tools/{step.tool} exited {done.returncode}")
    missing = [str(path) for path in outputs if not path.is_file()]
    if missing and step.required:
        raise RecordError(f"step {step.name}: tools/{step.tool} wrote no {', '.join(missing)}")


def _list(version: str) -> None:
    for step in STEPS:
        print(f"{step.name}: tools/{step.tool} ({step.interpreter} interpreter)")
        for path in step.outputs:
            print(f"  -> {path.format(version=version, data='{data}')}")
        if step.note:
            print(f"     {step.note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="the vLLM release, e.g. 0.34.0")
    parser.add_argument("--python", type=Path, help="the release's oracle interpreter")
    parser.add_argument("--root", type=Path, default=REPO, help="write under this repository copy")
    parser.add_argument("--only", nargs="+", metavar="STEP", help="run only these steps")
    parser.add_argument("--list", action="store_true", help="print the steps and exit")
    parser.add_argument("--oracle-dir", type=Path,
                        help="the oracle instrument (default: $ORACLE_DIR, else ../shared/oracle)")
    parser.add_argument("--extra-path", default=os.environ.get("ORACLE_EXTRA_PATH", ""),
                        help="folders of extra pure-Python packages (default: $ORACLE_EXTRA_PATH)")
    parser.add_argument("--dist-port", default=os.environ.get("ORACLE_DIST_PORT", "29533"))
    parser.add_argument("--data", type=Path, default=Path("/work/oracle-data"),
                        help="folder for big intermediates")
    args = parser.parse_args(argv)
    if args.list:
        _list(args.version)
        return 0
    names = [step.name for step in STEPS]
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        print(f"record_release: unknown step(s) {unknown}; the steps: {names}", file=sys.stderr)
        return EXIT_USAGE
    if args.python is None:
        print("record_release: --python PATH (the release's oracle interpreter) is needed",
              file=sys.stderr)
        return EXIT_USAGE
    root = args.root.resolve()
    if not (root / "schemas" / "engines").is_dir():
        print(f"record_release: --root {root} is not a copy of the repository "
              "(no schemas/engines/)", file=sys.stderr)
        return EXIT_USAGE
    try:
        found, package = _interpreter_facts(args.python)
    except RecordError as exc:
        print(f"record_release: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if found != args.version:
        print(f"record_release: {args.python} has vLLM {found}, not {args.version}", file=sys.stderr)
        return EXIT_USAGE
    chosen = [step for step in STEPS if not args.only or step.name in args.only]
    try:
        oracle_dir = str(oracle.oracle_dir(args.oracle_dir))
    except oracle.OracleNotFoundError as exc:  # an error here for the steps that are given it
        needing = [step.name for step in chosen if any("{oracle}" in arg for arg in step.args)]
        if needing:
            print(f"record_release: {exc} (needed by {', '.join(needing)})", file=sys.stderr)
            return EXIT_USAGE
        oracle_dir = ""
    python = str(args.python.absolute())
    values = {"version": args.version, "python": python,
              "venv": str(args.python.absolute().parent.parent),
              "oracle": oracle_dir, "data": str(args.data.absolute()),
              "root": str(root), "package": package, "claims": ""}
    env = {**os.environ, "ORACLE_DIR": oracle_dir,
           "ORACLE_EXTRA_PATH": str(args.extra_path), "ORACLE_DIST_PORT": str(args.dist_port)}
    done: list[str] = []
    for step in chosen:
        if "{claims}" in step.args:
            values["claims"] = _claims()
        print(f"== {step.name}: tools/{step.tool}", file=sys.stderr, flush=True)
        start = time.monotonic()
        try:
            run_step(step, values, root, env)
        except RecordError as exc:
            print(f"record_release: {exc}\n  done: {', '.join(done) or 'nothing'}; "
                  f"not run: {', '.join(s.name for s in chosen[len(done) + 1:]) or 'nothing'}",
                  file=sys.stderr)
            return EXIT_FAILED
        done.append(step.name)
        print(f"   {step.name} done in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
        for path in step.outputs:
            written = root / path.format(**values)
            if written.is_file():
                print(f"   {oracle.digest(written)}  {path.format(**values)}", file=sys.stderr)
    print(f"record_release: vLLM {args.version}: {len(done)} step(s) done under {root}: "
          f"{', '.join(done)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
