"""Packaging, public API and import hygiene."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import selector

ROOT = Path(__file__).resolve().parents[2]


def test_public_api_resolves_and_is_listed() -> None:
    for name in selector.__all__:
        assert getattr(selector, name) is not None, name
    with pytest.raises(AttributeError):
        selector.not_a_name  # noqa: B018


BLOCK_TORCH = """
import sys
for name in ("torch", "flashinfer", "flash_attn", "flash_attn_interface", "vllm", "numpy"):
    sys.modules[name] = None  # any import raises ImportError
sys.argv = ["attn-select", "check", sys.argv[1], "--format", "json"]
from selector.cli import main
main()
"""


def test_check_path_never_imports_torch() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH, str(ROOT / "examples" / "llama-3.1-8b-h100.yaml")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"selected": "FLASH_ATTN"' in proc.stdout


def test_import_graph_of_the_check_path_is_light() -> None:
    code = (
        "import sys\n"
        "from selector.catalog import load_catalog\n"
        "from selector.solver import solve\n"
        "from selector.inputs.config import load_deployment\n"
        "heavy = [m for m in ('torch', 'numpy', 'flashinfer', 'flash_attn') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_python_dash_m_selector_runs() -> None:
    proc = subprocess.run([sys.executable, "-m", "selector", "list", "engines", "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "vllm==0.33.0" in proc.stdout


@pytest.mark.slow
def test_built_wheel_contains_and_loads_the_data(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("attn_select-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    assert "selector/_schemas/engines/vllm-0.33.0/profile.yaml" in names
    assert "selector/_schemas/reason-codes.yaml" in names
    assert "selector/_schemas/devices.yaml" in names
    assert any(n.startswith("selector/_schemas/engines/vllm-0.33.0/backends/") for n in names)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "ATTN_SELECT_NO_CACHE": "1"}
    code = ("import selector.util.resources as r, selector.catalog as c; "
            "print(r.schemas_dir()); print(len(c.load_catalog().engine().backends))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    directory, count = out.stdout.split()
    assert directory.endswith("selector/_schemas") and str(tmp_path) in directory
    assert int(count) >= 24
