"""Prebuild the FlashInfer kernels the H200 smoke's FlashInfer plans run, as
FlashInfer's ``flashinfer-jit-cache`` package ships prebuilt kernels.

A first FlashInfer verdict on a fresh H200 spends 90 s in nvcc (docs/smoke.md, "Cold
verdicts"). FlashInfer 0.6.13 loads a module with no compile when its AOT folder holds
``<name>/<name>.so`` (``JitSpec.aot_path`` / ``build_and_load``, flashinfer/jit/core.py:
256-261, 307-309), and takes that folder from an importable ``flashinfer_jit_cache``
package whose ``__version__`` starts with FlashInfer's and whose ``get_jit_cache_dir()``
names it (flashinfer/jit/env.py:100-132). This tool builds, on the development machine
(nvcc, no GPU), the reduced modules the smoke asks for (``<module>_attn_select_<tag>``,
:mod:`selector.smoke.flashinfer_jit`) and writes them into such a package
(``benchmarks/flashinfer_jit_cache/__init__.py``, the stand-in) under ``.gpucarry-jit/``
(git-ignored), each library xz-compressed, with ``MANIFEST.json``.
``benchmarks/gpu_setup.sh`` unpacks it on the H200 and puts it on ``PYTHONPATH``; the
smoke then loads the modules (``note: FlashInfer JIT: ...: prebuilt kernels, as
flashinfer-jit-cache ships them: ...``). Without the tree the JIT path is unchanged.

The modules are found the way the smoke finds them: per FlashInfer plan of the
deployments below, the smoke's own :class:`selector.smoke.steps.FlashInferWrappers` and
:class:`~selector.smoke.steps.FlashInferStep` on the CPU, FlashInfer's wrappers planned
under ``FLASHINFER_DISABLE_JIT`` (:func:`selector.smoke.flashinfer_jit.reduced_modules`);
the CPU stands in for an SM90 device (compute capability 9.0, CUDA 13.0, no pinned
memory) only while FlashInfer picks the module. Each module is compiled by FlashInfer's
own ``JitSpec.build`` (its ninja file, flags and sources; ``FLASHINFER_CUDA_ARCH_LIST=9.0a``)
against the H200's tvm-ffi headers (``--tvm-ffi``: an unpacked
``apache_tvm_ffi-0.1.15.post2`` wheel), one module at a time (``MAX_JOBS``, default 1).
Built modules are kept: a second run compiles only what is missing.

    nice -n 10 /work/.venvs/oracle-0.25.1/bin/python benchmarks/prebuild_flashinfer.py \\
        --tvm-ffi /work/h26-tvmffi --curand /work/h26-curand/nvidia/cu13/include \\
        [--load-with TVM_FFI_PYTHON] [--list] [--only gqa16-tp2-h200] > prebuild.log 2>&1

``--list`` prints the modules (and writes the manifest's plan part) without compiling. The
manifest's copy, ``tests/fixtures/flashinfer_jit/prebuilt-0.6.13.json``, is committed:
``tests/smoke/test_prebuilt_flashinfer_cpu.py`` checks the manifest against the
deployments' plans and the stand-in's interface against ``schemas/flashinfer-jit.yaml``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ARCH = "9.0a"
OUT = ROOT / ".gpucarry-jit"
PACKAGE = "flashinfer_jit_cache"
STAND_IN = ROOT / "benchmarks" / PACKAGE / "__init__.py"
MANIFEST = "MANIFEST.json"
RECORDED = ROOT / "tests" / "fixtures" / "flashinfer_jit" / "prebuilt-{version}.json"
"""The manifest's committed copy (what the CPU tests check)."""
FIXTURES = ROOT / "tests" / "fixtures" / "smoke"

DEPLOYMENTS: tuple[tuple[str, bool | None], ...] = (
    # (fixture, parity): the H200 session's smokes and the GPU tests' deployments with a
    # FlashInfer plan; first the one the cold verdict measures (h200_session.sh cold)
    ("gqa16-tp2-h200", None),
    ("gqa16-tp2-h200", True),
    ("llama-fp8kv-h200", True),
    ("gpt-oss-20b-h200", True),
    ("gemma-2-9b-h200", True),
    ("llama-h200", True),
    ("gemma-3-27b-h200", True),
)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    # plans the GPU tests derive from a deployment's (tests/smoke/test_smoke_gpu.py)
    "gqa16-fp8": ("gqa16-tp2-h200", {"kv_cache_dtype": "fp8", "k_scale": 0.5,
                                     "v_scale": 2.0, "name": "gqa16-fp8"}),
}


def plan_fingerprint(plan: Any) -> str:
    """What the manifest records of a plan: a hash of its JSON (a changed plan needs a
    new prebuild)."""
    text = json.dumps(plan.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


H200_VLLM = "vllm==0.25.1"
"""The vLLM the H200 sessions carry (benchmarks/stage_vllm_engine.sh): with it importable
the smoke reproduces its calls; without it, the newest profile's."""


@contextlib.contextmanager
def _engine(name: str) -> Iterator[None]:
    from selector.catalog import DEFAULT_ENGINE_ENV

    before = os.environ.get(DEFAULT_ENGINE_ENV)
    os.environ[DEFAULT_ENGINE_ENV] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DEFAULT_ENGINE_ENV, None)
        else:
            os.environ[DEFAULT_ENGINE_ENV] = before


def flashinfer_plans(only: list[str] | None = None) -> list[tuple[str, Any]]:
    """(label, SmokePlan) of every FlashInfer plan the deployments and variants give, for
    each engine the H200 smoke may reproduce (the newest profile, and the carried vLLM's):
    the same here whichever vLLM this Python has."""
    from selector.catalog import load_catalog

    plans: list[tuple[str, Any]] = []
    for engine in dict.fromkeys((load_catalog().default_engine, H200_VLLM)):
        with _engine(engine):
            plans += [(f"{label}, {engine}", plan) for label, plan in _plans(only)]
    return plans


def _plans(only: list[str] | None) -> list[tuple[str, Any]]:
    from selector.catalog import load_catalog
    from selector.inputs.config import load_deployment
    from selector.pipeline.smoke import deployment_smoke

    catalog = load_catalog()
    plans: list[tuple[str, Any]] = []
    for name, parity in DEPLOYMENTS:
        if only and name not in only:
            continue
        deployment = load_deployment(str(FIXTURES / f"{name}.yaml"))
        for plan in deployment_smoke(deployment, catalog, parity=parity)[0]:
            if plan.backend == "FLASHINFER":
                plans.append((f"{name} (parity {parity})", plan))
    for label, (name, update) in VARIANTS.items():
        if only and name not in only:
            continue
        base = next(plan for plan in deployment_smoke(
            load_deployment(str(FIXTURES / f"{name}.yaml")), catalog)[0]
            if plan.backend == "FLASHINFER")
        plans.append((label, base.model_copy(update=update)))
    return plans


@contextlib.contextmanager
def as_sm90(torch: Any, flashinfer: Any) -> Iterator[None]:
    """FlashInfer picks its module on the CPU as on an SM90 device: compute capability
    9.0 (flashinfer/utils.py get_compute_capability, which determine_attention_backend
    reads), CUDA 13.0 (the H200's torch 2.11+cu130) and no pinned host buffers."""
    from flashinfer import utils

    saved_capability = utils.get_compute_capability
    saved_cuda = torch.version.cuda
    factories = {name: getattr(torch, name) for name in ("empty", "zeros", "ones", "tensor",
                                                        "arange", "full")}

    def unpinned(factory: Any) -> Any:
        @functools.wraps(factory)
        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("pin_memory", None)
            return factory(*args, **kwargs)
        return call

    utils.get_compute_capability = lambda device: (9, 0)
    torch.version.cuda = "13.0"
    for name, factory in factories.items():
        setattr(torch, name, unpinned(factory))
    try:
        yield
    finally:
        utils.get_compute_capability = saved_capability
        torch.version.cuda = saved_cuda
        for name, factory in factories.items():
            setattr(torch, name, factory)


def modules_for(torch: Any, flashinfer: Any, plan: Any) -> list[Any]:
    """The reduced modules the smoke's FlashInfer step of ``plan`` asks for."""
    from selector.smoke.flashinfer_jit import reduced_modules
    from selector.smoke.plan import SmokeOptions
    from selector.smoke.steps import FlashInferStep, FlashInferWrappers
    from selector.smoke.workload import long_context_for, mixed_batch

    workload = mixed_batch(plan.kernel_block_size, SmokeOptions().seed,
                           long_context=long_context_for(plan))
    with as_sm90(torch, flashinfer):
        wrappers = FlashInferWrappers(torch, flashinfer, plan, "cpu")
        step = FlashInferStep(torch, wrappers, plan, workload.batch, "cpu")
        modules, notes = reduced_modules(
            flashinfer, *wrappers.variant_calls(step.plan_tensors(), step.phases()))
    for note in notes:
        print(f"  {note}")
    return modules


def use_tvm_ffi_headers(folder: Path) -> str:
    """Point FlashInfer's ninja generator (flashinfer/jit/cpp_ext.py get_system_includes)
    at the unpacked tvm-ffi wheel's headers; returns its version."""
    import tvm_ffi.libinfo  # type: ignore[import-not-found]

    include = folder / "tvm_ffi" / "include"
    if not (include / "tvm" / "ffi").is_dir() or not (include / "dlpack").is_dir():
        raise SystemExit(f"--tvm-ffi {folder}: no tvm_ffi/include/tvm/ffi and "
                         "tvm_ffi/include/dlpack (unpack apache_tvm_ffi-0.1.15.post2's wheel "
                         "there: python3 -m zipfile -e WHEEL FOLDER)")
    tvm_ffi.libinfo.find_include_path = lambda: str(include)
    tvm_ffi.libinfo.find_dlpack_include_path = lambda: str(include)
    versions = sorted(folder.glob("apache_tvm_ffi-*.dist-info"))
    return versions[-1].name.removeprefix("apache_tvm_ffi-").removesuffix(".dist-info") \
        if versions else "?"


def use_cuda_extras(curand: Path | None, work: Path) -> None:
    """What a full CUDA toolkit has and a compiler-only one lacks, given to the compilers
    through the environment (FlashInfer's ninja commands stay as they are): curand's
    headers (``CPATH``; cutlass/util/reference/device/tensor_fill.h includes
    curand_kernel.h: ``--curand`` is an unpacked ``nvidia-curand`` 10.4.0.35 wheel's
    ``nvidia/cu13/include``) and, when the toolkit has no ``lib64/stubs/libcuda.so``, a
    stub with the driver's soname for ``-lcuda`` (``LIBRARY_PATH``): the library then
    needs ``libcuda.so.1``, the H200's driver, as FlashInfer's own build there does."""
    cuda = Path(os.environ["CUDA_HOME"])
    if curand is not None:
        if not (curand / "curand_kernel.h").is_file():
            raise SystemExit(f"--curand {curand}: no curand_kernel.h there")
        os.environ["CPATH"] = os.pathsep.join(filter(None, [str(curand), os.environ.get("CPATH")]))
    elif not (cuda / "include" / "curand_kernel.h").is_file():
        raise SystemExit(f"{cuda}/include has no curand_kernel.h: give --curand FOLDER")
    if any((cuda / folder / "libcuda.so").exists() for folder in ("lib64", "lib64/stubs")):
        return
    stubs = work / "stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    source = stubs / "libcuda_stub.c"
    source.write_text("/* link-time stand-in for the driver's libcuda.so.1 */\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", str(source),
                    "-o", str(stubs / "libcuda.so")], check=True)
    os.environ["LIBRARY_PATH"] = os.pathsep.join(
        filter(None, [str(stubs), os.environ.get("LIBRARY_PATH")]))


def ninja_steps(build_dir: Path) -> list[tuple[str, float]]:
    """(unit, seconds) of the last build, from ninja's .ninja_log, slowest first."""
    log = build_dir / ".ninja_log"
    steps: list[tuple[str, float]] = []
    if log.is_file():
        for line in log.read_text().splitlines()[1:]:
            fields = line.split("\t")
            if len(fields) >= 4:
                steps.append((Path(fields[3]).name, (int(fields[1]) - int(fields[0])) / 1000))
    return sorted(steps, key=lambda step: -step[1])


LOAD_PROBE = """
import sys, tvm_ffi
module = tvm_ffi.load_module(sys.argv[1])
print(tvm_ffi.__version__, *[name for name in sys.argv[2:] if getattr(module, name, None)])
"""
ENTRY_POINTS = ("plan", "paged_run", "ragged_run")
"""The functions FlashInfer calls on a batch-prefill module (flashinfer/prefill.py
get_batch_prefill_module)."""


def load_check(python: str | None, library: Path) -> list[str] | str:
    """Load ``library`` with the H200's tvm-ffi (``python``: one that has
    apache-tvm-ffi 0.1.15.post2 installed, e.g. a python3.12 venv with the carried wheel)
    and list the entry points it holds; an error's text when it does not load."""
    if python is None:
        return "not checked"
    result = subprocess.run([python, "-c", LOAD_PROBE, str(library), *ENTRY_POINTS],
                            capture_output=True, text=True, check=False, timeout=300,
                            env={**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [
                                str(Path(os.environ["CUDA_HOME"]) / "lib64"),
                                os.environ.get("LD_LIBRARY_PATH")]))})
    if result.returncode != 0:
        return result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"
    return result.stdout.split()


def write_package(out: Path, manifest: dict[str, Any]) -> None:
    package = out / PACKAGE
    (package / "jit_cache").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(STAND_IN, package / "__init__.py")
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    (out / MANIFEST).write_text(text)
    Path(str(RECORDED).format(version=manifest["flashinfer"])).write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tvm-ffi", type=Path, required=True,
                        help="folder holding the H200's apache_tvm_ffi wheel, unpacked")
    parser.add_argument("--curand", type=Path,
                        help="curand's headers, where the CUDA toolkit lacks them")
    parser.add_argument("--load-with", metavar="PYTHON",
                        help="a python with the H200's tvm-ffi: each library is loaded by it")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", action="append", help="a deployment fixture's name")
    parser.add_argument("--list", action="store_true", help="list the modules, compile none")
    args = parser.parse_args(argv)

    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", ARCH)
    os.environ.setdefault("MAX_JOBS", "1")
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", str(args.out.parent / ".gpucarry-jit-work"))
    import flashinfer
    import torch

    tvm_ffi_version = use_tvm_ffi_headers(args.tvm_ffi)
    use_cuda_extras(args.curand, Path(os.environ["FLASHINFER_WORKSPACE_BASE"]))
    nvcc = subprocess.run([str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"), "--version"],
                          capture_output=True, text=True, check=True).stdout.strip()
    manifest_path = args.out / MANIFEST
    manifest: dict[str, Any] = json.loads(manifest_path.read_text()) \
        if manifest_path.is_file() else {}
    manifest.update({
        "flashinfer": flashinfer.__version__, "tvm_ffi": tvm_ffi_version, "arch": ARCH,
        "nvcc": nvcc.splitlines()[-1], "tool": "benchmarks/prebuild_flashinfer.py"})
    manifest.setdefault("modules", {})
    plans: dict[str, Any] = {}
    modules: dict[str, Any] = {}
    for label, plan in flashinfer_plans(args.only):
        print(f"{label}: plan {plan.name}", flush=True)
        found = modules_for(torch, flashinfer, plan)
        plans[f"{label}: {plan.name}"] = {
            "plan": plan.name, "fingerprint": plan_fingerprint(plan),
            "modules": [module.spec.name for module in found]}
        for module in found:
            modules.setdefault(module.spec.name, module)
            print(f"  {module.spec.name}: {len(module.selection.kept)} kept, "
                  f"{len(module.selection.stubbed)} stubs, "
                  f"{len(module.spec.sources)} units", flush=True)
    manifest["plans"] = {**manifest.get("plans", {}), **plans} if args.only else plans
    write_package(args.out, manifest)
    if args.list:
        return 0
    cache = args.out / PACKAGE / "jit_cache"
    failed = 0
    for name, module in modules.items():
        target = cache / name / f"{name}.so.xz"
        if target.is_file():
            print(f"{name}: prebuilt already ({target.stat().st_size / 2**20:.2f} MiB)")
            entry = manifest["modules"].get(name)
            library = Path(module.spec.jit_library_path)
            if entry is not None and args.load_with and library.is_file():
                entry["loads"] = load_check(args.load_with, library)
                write_package(args.out, manifest)
                print(f"  loads: {entry['loads']}")
            continue
        print(f"{name}: compiling {len(module.spec.sources)} units", flush=True)
        start = time.monotonic()
        try:
            module.spec.build(verbose=True)
        except Exception as error:  # reported; the other modules still build
            print(f"{name}: FAILED: {error}", flush=True)
            failed += 1
            continue
        seconds = time.monotonic() - start
        library = Path(module.spec.jit_library_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(lzma.compress(library.read_bytes(), preset=9 | lzma.PRESET_EXTREME))
        steps = ninja_steps(Path(module.spec.build_dir))
        manifest["modules"][name] = {
            "module": module.name, "compile_s": round(seconds, 1),
            "so_bytes": library.stat().st_size, "xz_bytes": target.stat().st_size,
            "kept": [item.text for item in module.selection.kept],
            "stubbed": len(module.selection.stubbed),
            "units": {unit: round(s, 1) for unit, s in steps},
            "loads": load_check(args.load_with, library)}
        write_package(args.out, manifest)
        print(f"{name}: built in {seconds:.0f} s, {library.stat().st_size / 2**20:.1f} MiB, "
              f"xz {target.stat().st_size / 2**20:.2f} MiB; units: "
              + ", ".join(f"{unit} {s:.0f} s" for unit, s in steps), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
