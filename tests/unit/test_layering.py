"""The package's layering holds: the import-linter contracts (``[tool.importlinter]`` in
pyproject.toml) are kept, no module imports itself back through others, a function-level
import of a ``selector`` module is one of the start-up imports listed in
:data:`selector._lazy.START_UP_IMPORTS`, and no module takes another module's private
names."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import grimp

from selector._lazy import START_UP_IMPORTS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "selector"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _imported(node: ast.Import | ast.ImportFrom, importer: str) -> Iterator[tuple[str, str]]:
    """(module, name) of each ``selector`` import in ``node`` (name: "" for ``import m``);
    ``from package import submodule`` names the submodule."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, ""
        return
    base = node.module or ""
    if node.level:
        anchor = _package_of(importer).split(".")
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join([*anchor, *([base] if base else [])])
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        yield (submodule, "") if submodule in MODULES else (base, alias.name)


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _imports(tree: ast.AST, importer: str, in_function: bool = False
             ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import under ``tree`` outside ``if TYPE_CHECKING:``, with whether it sits in a
    function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports(child, importer, in_function)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        yield from _imports(node, importer, in_function or isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def _selector_imports() -> Iterator[tuple[str, str, str, int, bool]]:
    """(importer, imported module, name, line, in a function) of every ``selector`` import."""
    for importer, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, in_function in _imports(tree, importer):
            for module, name in _imported(node, importer):
                if module == "selector" or module.startswith("selector."):
                    yield importer, module, name, node.lineno, in_function


def test_import_contracts_are_kept() -> None:
    """``lint-imports`` (as .ci/run runs it): the layers and the acyclic-siblings contracts."""
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


def _ancestors(module: str) -> set[str]:
    """The packages above ``module`` (below ``selector``), which importing it runs first."""
    parts = module.split(".")
    return {".".join(parts[:n]) for n in range(2, len(parts))}


def _cycle(edges: Mapping[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph ``edges``, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_import_cycle() -> None:
    """No module reaches itself through the imports that run (function-level ones
    included).  Importing ``a.b.c`` from outside ``a.b`` runs ``a.b`` first, so that counts
    as an import of ``a.b`` too; ``selector`` itself imports nothing at run time but
    :mod:`selector._lazy`."""
    graph = grimp.build_graph("selector", exclude_type_checking_imports=True, cache_dir=None)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        own = _ancestors(module) | {module}
        targets = edges.setdefault(module, set())
        for imported in graph.find_modules_directly_imported_by(module):
            targets |= ({imported} | _ancestors(imported)) - own
    assert graph.find_modules_directly_imported_by("selector") <= {"selector._lazy"}
    assert _cycle(edges) is None, " -> ".join(_cycle(edges) or [])


def test_function_level_imports_are_the_listed_start_up_imports() -> None:
    """An import of a ``selector`` module inside a function is one kept for start-up speed
    and listed in ``selector._lazy.START_UP_IMPORTS``; none is there to dodge a cycle."""
    found: dict[tuple[str, str], str] = {}
    for importer, module, _, line, in_function in _selector_imports():
        if in_function:
            found.setdefault((importer, module), f"{MODULES[importer].relative_to(ROOT)}:{line}")
    listed = {(importer, module) for importer, modules in START_UP_IMPORTS.items()
              for module in modules}
    unlisted = [f"{where} imports {module}" for (importer, module), where in sorted(found.items())
                if (importer, module) not in listed]
    assert not unlisted, (
        "function-level imports not listed in selector._lazy.START_UP_IMPORTS: import them at "
        "the top of the module, or list them if a command must not load them at start-up:\n"
        + "\n".join(unlisted))
    stale = sorted(listed - set(found))
    assert not stale, f"START_UP_IMPORTS lists imports that no longer exist: {stale}"


def test_start_up_imports_name_real_modules() -> None:
    named = {m for importer, modules in START_UP_IMPORTS.items() for m in (importer, *modules)}
    assert named <= set(MODULES), sorted(named - set(MODULES))


def test_no_private_names_across_modules() -> None:
    """A ``_private`` name is its module's own: no other module imports it (what two
    modules share is public, in ``__all__``)."""
    crossing = [
        f"{importer}:{line} imports {module}.{name}"
        for importer, module, name, line, _ in _selector_imports()
        if name.startswith("_") and not name.startswith("__")
        and module != importer
    ]
    assert not crossing, crossing
