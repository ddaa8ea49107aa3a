"""The catalog is loaded once, by the command, and passed down: no stage below the CLI
loads it for itself (an ambient ``load_catalog()`` answers for the shipped catalog and the
default engine, never for the catalog or engine the command resolved)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "selector"

ENTRY_POINTS = {
    "selector/cli/": "the command line: each command loads the catalog once",
    "selector/catalog.py": "the catalog module itself (load_catalog's definition; the code "
                           "tables' view of the shipped registry)",
    "selector/fleet/entry.py": "the process entry of a fleet node (a Ray task), the CLI's "
                               "counterpart on each GPU node",
}
"""Where ``load_catalog()`` may be called, and why."""

NOT_YET: dict[str, str] = {}
"""Modules that still read catalog-wide tables (no engine) for themselves: each one is
a follow-up; none may be added."""


def _calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else None
            if name == "load_catalog":
                lines.append(node.lineno)
    return lines


def _where() -> dict[str, list[int]]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT.parent).as_posix()
        lines = _calls(path)
        if lines:
            found[relative] = lines
    return found


def _allowed(relative: str) -> bool:
    return any(relative == place or (place.endswith("/") and relative.startswith(place))
               for place in ENTRY_POINTS)


def test_no_stage_below_the_cli_loads_the_catalog() -> None:
    calls = {f"{path}:{line}" for path, lines in _where().items()
             if not _allowed(path) and path not in NOT_YET for line in lines}
    assert not calls, (f"load_catalog() called below the CLI at {sorted(calls)}: take the "
                       "catalog as a parameter from the command (selector/cli/) instead")


def test_the_exceptions_are_still_needed() -> None:
    where = _where()
    stale = sorted(path for path in NOT_YET if path not in where)
    assert not stale, f"{stale} no longer call load_catalog(): drop them from NOT_YET"


def test_the_scan_finds_a_call() -> None:
    assert _calls(ROOT / "catalog.py"), "the AST scan finds no load_catalog() call at all"
    assert any(_allowed(path) for path in _where())
