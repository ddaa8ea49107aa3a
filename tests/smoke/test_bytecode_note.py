"""The smoke names a Python that keeps no bytecode for torch (every verdict compiles its
modules again: 3.0 s of each on the H200 test image) and the fix; it changes nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from selector.smoke.bytecode import uncached_bytecode_note
from selector.smoke.render import render_report
from selector.smoke.report import SmokeReport


def _import_from(folder: Path, name: str) -> ModuleType:
    source = folder / f"{name}.py"
    source.write_text("VALUE = 1\n")
    spec = importlib.util.spec_from_file_location(name, source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_bytecode_written_is_named_with_the_fix(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    module = _import_from(tmp_path, "fresh_module")
    note = uncached_bytecode_note(module)
    assert note is not None
    assert "Python keeps no bytecode for fresh_module here (PYTHONDONTWRITEBYTECODE is set)" in note
    assert "PYTHONPYCACHEPREFIX" in note


def test_an_unwritable_cache_folder_is_named(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    source = tmp_path / "other_module.py"
    source.write_text("VALUE = 1\n")
    module = ModuleType("other_module")
    module.__file__ = str(source)  # imported elsewhere; nothing cached for it here
    note = uncached_bytecode_note(module)
    assert note is not None
    folder = Path(importlib.util.cache_from_source(str(source))).parent
    assert f"({folder} cannot be written)" in note


def test_cached_bytecode_or_no_source_says_nothing(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    module = _import_from(tmp_path, "cached_module")
    cached = Path(importlib.util.cache_from_source(module.__file__ or ""))
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(b"")  # what Python's import writes there
    assert uncached_bytecode_note(module) is None
    assert uncached_bytecode_note(ModuleType("builtin_like")) is None
    assert uncached_bytecode_note(sys) is None


def test_the_report_shows_and_carries_the_note() -> None:
    report = SmokeReport(device="NVIDIA H200", notes=["Python keeps no bytecode for torch here"])
    assert report.to_json()["notes"] == ["Python keeps no bytecode for torch here"]
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render_report(report))
    assert "note: Python keeps no bytecode for torch here" in console.export_text()
    assert SmokeReport(device="x").to_json()["notes"] == []
