"""The prebuilt FlashInfer kernels (benchmarks/prebuild_flashinfer.py), checked on the CPU.

* the stand-in ``flashinfer_jit_cache`` package has what FlashInfer 0.6.13's loader reads of
  it (``schemas/flashinfer-jit.yaml`` ``prebuilt``, each line cited and recorded from the
  wheel by ``tools/flashinfer_jit_facts.py``); where FlashInfer 0.6.13 imports, its own
  ``jit/env.py`` takes the stand-in's folder as its AOT folder;
* the recorded manifest (``tests/fixtures/flashinfer_jit/prebuilt-0.6.13.json``, written by
  the tool) covers every FlashInfer plan of the deployments the H200 session and the GPU
  tests run, as the check negotiates them now, and names each module as the smoke does
  (``<module>_attn_select_<tag>``, the tag a hash of the kept instantiations: the mask modes
  the plan's calls run).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from selector.smoke.contract import TensorRef, resolve_calls
from selector.smoke.flashinfer_jit import (
    PREFIX,
    Instantiation,
    Selection,
    load_variant_data,
    needed_variants,
    parse_unit,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "flashinfer_jit"
STAND_IN = ROOT / "benchmarks" / "flashinfer_jit_cache" / "__init__.py"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tool() -> ModuleType:
    return _load("prebuild_flashinfer", ROOT / "benchmarks" / "prebuild_flashinfer.py")


def _manifest() -> dict[str, Any]:
    version = load_variant_data().flashinfer_version
    data: dict[str, Any] = json.loads((FIXTURES / f"prebuilt-{version}.json").read_text())
    return data


def test_the_stand_in_has_what_flashinfers_loader_reads() -> None:
    data = load_variant_data()
    prebuilt = data.prebuilt
    recorded = json.loads((FIXTURES / f"flashinfer-{data.flashinfer_version}.json")
                          .read_text(encoding="utf-8"))["lines"]
    for citation in prebuilt.citations:
        assert citation.quote in recorded[citation.source], citation
    quotes = " ".join(citation.quote for citation in prebuilt.citations)
    for name in (prebuilt.package, prebuilt.version_attribute, prebuilt.folder_function):
        assert name in quotes, name
    assert STAND_IN.parent.name == prebuilt.package
    stand_in = _load(prebuilt.package, STAND_IN)
    assert str(getattr(stand_in, prebuilt.version_attribute)).startswith(data.flashinfer_version)
    folder = Path(getattr(stand_in, prebuilt.folder_function)())
    assert folder == STAND_IN.parent.resolve() / "jit_cache"


def test_flashinfers_own_loader_takes_the_stand_ins_folder(tmp_path: Path) -> None:
    flashinfer = importlib.util.find_spec("flashinfer")
    if flashinfer is None:
        pytest.skip("FlashInfer is not installed (the H200; the oracle venv)")
    package = tmp_path / STAND_IN.parent.name
    package.mkdir()
    (package / "__init__.py").write_text(STAND_IN.read_text())
    probe = ("import flashinfer, flashinfer.jit.env as env; "
             "print(flashinfer.__version__); print(env.FLASHINFER_AOT_DIR)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                            check=False, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    version, folder = result.stdout.split()[-2:]
    if version != load_variant_data().flashinfer_version:
        pytest.skip(f"FlashInfer {version} installed")
    assert Path(folder) == package.resolve() / "jit_cache"


def _kept(texts: list[str]) -> tuple[Instantiation, ...]:
    unit = parse_unit("namespace flashinfer {\n\n" + "".join(f"{t};\n\n" for t in texts) + "};\n")
    assert unit is not None and len(unit.instantiations) == len(texts)
    return unit.instantiations


def test_each_module_is_named_as_the_smoke_names_it() -> None:
    modules = _manifest()["modules"]
    assert modules, "nothing prebuilt yet: run benchmarks/prebuild_flashinfer.py"
    for name, module in modules.items():
        kept = _kept(module["kept"])
        tag = Selection((), (), kept, ()).tag
        assert name == f"{module['module']}_{PREFIX}{tag}"
        assert module["stubbed"] > 0 and module["xz_bytes"] > 0


def test_the_manifest_covers_every_flashinfer_plan_of_the_h200_deployments() -> None:
    tool = _tool()
    manifest = _manifest()
    assert manifest["arch"] == "9.0a" and manifest["flashinfer"] == \
        load_variant_data().flashinfer_version
    data = load_variant_data()
    by_plan = manifest["plans"]
    plans = tool.flashinfer_plans()
    assert plans, "no FlashInfer plan among the deployments"
    for label, plan in plans:
        key = f"{label}: {plan.name}"
        assert key in by_plan, f"{key}: not prebuilt (run benchmarks/prebuild_flashinfer.py)"
        entry = by_plan[key]
        assert entry["fingerprint"] == tool.plan_fingerprint(plan), \
            f"{key}: the plan changed since its kernels were prebuilt (run the tool again)"
        assert entry["modules"] and all(name in manifest["modules"] for name in entry["modules"])
        # the modules keep what the plan's calls run (the contract's calls, the data's modes)
        kept = {(item.kernel, item.mask_mode) for name in entry["modules"]
                for item in _kept(manifest["modules"][name]["kept"])}
        needs: set[tuple[str, str]] = set()
        for call in resolve_calls(plan):
            if (call.phase or call.name) in ("decode", "prefill"):
                literal = {name: value for name, value in call.arguments("plan").items()
                           if not isinstance(value, TensorRef)}
                needs |= needed_variants(data, call.entry_point, literal) or set()
        assert {mode for _, mode in kept} == {mode for _, mode in needs}, key
        assert {kernel for kernel, _ in kept} <= {kernel for kernel, _ in needs}, key


def test_the_session_scripts_carry_the_stand_in() -> None:
    setup = (ROOT / "benchmarks" / "gpu_setup.sh").read_text()
    assert ".gpucarry-jit" in setup and "flashinfer_jit_cache" in setup
    assert "/.gpucarry-jit/" in (ROOT / ".gitignore").read_text().splitlines()
