"""Engine profiles chain forward: a profile extends only an older one and states what
changed; every section (inputs, facts, checks, priority branches by id, backends,
the MLA prefill selector) is inherited; the default engine is the newest profile.

Each test copies ``schemas/`` to a temporary folder, writes a scratch profile there
and loads the catalog from it (``ATTN_SELECT_NO_CACHE`` keeps the user's cache out).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from selector.catalog import CatalogError, _load_catalog_files
from selector.schema.engine import PriorityEntry
from selector.schema.platform import PLATFORM_SECTIONS
from selector.solver.mla_prefill import load_mla_prefill
from selector.util.resources import schemas_dir

ROOT = Path(__file__).resolve().parents[2]


def _newest_shipped() -> tuple[str, Path]:
    catalog = _load_catalog_files(schemas_dir())
    name = catalog.default_engine
    return name, catalog.engine_dirs[name]


def _next_version(name: str) -> str:
    family, version = name.split("==", 1)
    parts = [int(p) for p in version.split(".")]
    return f"{family}=={parts[0]}.{parts[1] + 1}.0"


def _write_profile(schemas: Path, engine: str, body: dict[str, object]) -> Path:
    """A scratch profile; its platform sections (priorities, environment, reported
    backends) go to ``platforms/cuda.yaml``, where profiles state them."""
    folder = schemas / "engines" / engine.replace("==", "-", 1)
    (folder / "backends").mkdir(parents=True, exist_ok=True)
    own = {k: v for k, v in body.items() if k not in PLATFORM_SECTIONS}
    platform = {k: v for k, v in body.items() if k in PLATFORM_SECTIONS}
    (folder / "profile.yaml").write_text(yaml.safe_dump({"engine": engine, **own}, sort_keys=False))
    if platform:
        (folder / "platforms").mkdir(exist_ok=True)
        (folder / "platforms" / "cuda.yaml").write_text(yaml.safe_dump(
            {"engine": engine, "platform": "cuda", **platform}, sort_keys=False))
    return folder


def _order(branch_order: tuple[str | PriorityEntry, ...]) -> list[str]:
    return [e.backend if isinstance(e, PriorityEntry) else e for e in branch_order]


def test_the_default_engine_is_the_newest_profile(schemas: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATTN_SELECT_ENGINE", raising=False)  # the suite's pin (conftest)
    newest, _ = _newest_shipped()
    child = _next_version(newest)
    _write_profile(schemas, child, {"extends": newest})
    catalog = _load_catalog_files(schemas)
    assert catalog.default_engine == child
    assert catalog.engine().engine == child


def test_an_empty_child_inherits_every_section(schemas: Path) -> None:
    newest, _ = _newest_shipped()
    child = _next_version(newest)
    _write_profile(schemas, child, {"extends": newest})
    catalog = _load_catalog_files(schemas)
    parent, data = catalog.engine(newest), catalog.engine(child)
    assert data.profile.extends == newest
    skip = {"engine", "extends"}
    assert data.profile.model_dump(exclude=skip) == parent.profile.model_dump(exclude=skip)
    assert list(data.backends) == list(parent.backends)
    for name, spec in data.backends.items():
        assert spec.engine == child
        assert spec.model_dump(exclude={"engine"}) == parent.backends[name].model_dump(exclude={"engine"})
    parent_prefill = load_mla_prefill(parent, catalog)
    prefill = load_mla_prefill(data, catalog)
    # MLA prefill selection is inherited (it used to turn off silently without a copy)
    assert parent_prefill is not None and prefill is not None
    assert prefill.engine == child
    assert prefill.model_dump(exclude={"engine"}) == parent_prefill.model_dump(exclude={"engine"})
    # whole files (start-up data, kernel call contract) come from the nearest profile
    for filename in ("startup.yaml", "kernel-calls.yaml"):
        assert catalog.engine_file(child, filename) == catalog.engine_file(newest, filename)
        assert catalog.engine_file(newest, filename) is not None
    assert catalog.engine_file(child, "no-such-file.yaml") is None
    from selector.memory.profile import startup_profile

    assert startup_profile(catalog, child) == startup_profile(catalog, newest)


def test_a_child_overrides_one_priority_branch_by_id(schemas: Path) -> None:
    newest, _ = _newest_shipped()
    child = _next_version(newest)
    catalog = _load_catalog_files(schemas)
    parent = catalog.engine(newest).profile
    first = parent.priorities[0]
    reversed_order = list(reversed(_order(first.order)))
    _write_profile(schemas, child, {"extends": newest, "priorities": [
        {"id": first.id, "when": first.when, "order": reversed_order}]})
    data = _load_catalog_files(schemas).engine(child).profile
    assert [b.id for b in data.priorities] == [b.id for b in parent.priorities]
    assert _order(data.priorities[0].order) == reversed_order
    assert data.priorities[1:] == parent.priorities[1:]


def test_keyed_entries_are_added_moved_and_removed(schemas: Path) -> None:
    newest, _ = _newest_shipped()
    child = _next_version(newest)
    parent = _load_catalog_files(schemas).engine(newest).profile
    ids = [b.id for b in parent.priorities]
    checks = [c.code for c in parent.checks]
    _write_profile(schemas, child, {"extends": newest, "priorities": [
        {"id": ids[0], "remove": True},
        {"id": "scratch", "before": ids[1], "when": "cc_major == 12", "order": ["TRITON_ATTN"]},
        {"id": ids[1], "after": ids[-1]},
    ], "checks": [{"code": checks[-1], "remove": True}]})
    data = _load_catalog_files(schemas).engine(child).profile
    assert [b.id for b in data.priorities] == ["scratch", *ids[2:], ids[1]]
    assert data.priorities[-1] == parent.priorities[1]  # moved, content inherited
    assert [c.code for c in data.checks] == checks[:-1]


@pytest.mark.parametrize(("body", "message"), [
    ({"priorities": [{"id": "no_such_branch", "remove": True}]}, "cannot remove id 'no_such_branch'"),
    ({"priorities": [{"id": "x", "after": "no_such_branch", "order": ["TRITON_ATTN"]}]},
     "no entry 'no_such_branch'"),
    ({"priorities": [{"when": "true", "order": ["TRITON_ATTN"]}]}, "every entry needs a `id`"),
    ({"remove_backends": ["NO_SUCH_BACKEND"]}, "NO_SUCH_BACKEND"),
])
def test_a_bad_child_is_named_not_dropped(schemas: Path, body: dict[str, object], message: str) -> None:
    newest, _ = _newest_shipped()
    child = _next_version(newest)
    _write_profile(schemas, child, {"extends": newest, **body})
    with pytest.raises(CatalogError, match=re.escape(message)):
        _load_catalog_files(schemas).engine(child)


def test_a_profile_may_extend_only_an_older_one(schemas: Path) -> None:
    catalog = _load_catalog_files(schemas_dir())
    oldest = catalog.engine_names[0]
    family, version = oldest.split("==", 1)
    older = f"{family}=={'0.0.1' if version != '0.0.1' else '0.0.0'}"
    _write_profile(schemas, older, {"extends": oldest})
    with pytest.raises(CatalogError, match="not an older"):
        _load_catalog_files(schemas).engine(older)


def test_the_base_profile_extends_nothing() -> None:
    catalog = _load_catalog_files(schemas_dir())
    chain = [catalog.engine(name).profile.extends for name in catalog.engine_names]
    assert chain[0] is None
    assert chain[1:] == catalog.engine_names[:-1]  # each newer profile states its changes


def test_a_child_mla_prefill_file_patches_one_branch(schemas: Path) -> None:
    newest, _ = _newest_shipped()
    child = _next_version(newest)
    folder = _write_profile(schemas, child, {"extends": newest})
    catalog = _load_catalog_files(schemas)
    parent = load_mla_prefill(catalog.engine(newest), catalog)
    assert parent is not None
    last = parent.priorities[-1]
    (folder / "mla_prefill.yaml").write_text(yaml.safe_dump({
        "engine": child, "inherit": True,
        "priorities": [{"id": last.id, "order": ["CPU", *last.order]}]}))
    catalog = _load_catalog_files(schemas)
    prefill = load_mla_prefill(catalog.engine(child), catalog)
    assert prefill is not None
    assert prefill.priorities[-1].order == ("CPU", *last.order)
    assert prefill.priorities[:-1] == parent.priorities[:-1]
    assert prefill.backends == parent.backends


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module except docstrings (statement-level strings)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_no_engine_version_literal_in_code() -> None:
    """Messages name the engine from its profile; a new profile changes no Python."""
    versions = [name.split("==", 1)[1] for name in _load_catalog_files(schemas_dir()).engine_names]
    pattern = re.compile("|".join(rf"(?<![\d.]){re.escape(v)}(?![\d])" for v in versions))
    hits = [f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}"
            for path in sorted((ROOT / "selector").rglob("*.py"))
            for line, text in _string_constants(path) if pattern.search(text)]
    assert not hits, "engine versions in code (take them from the catalog):\n" + "\n".join(hits)


@pytest.mark.parametrize(("schema", "pattern"), [
    ("engine-profile", "engines/*/profile.yaml"),
    ("backend", "engines/*/backends/*.yaml"),
    ("mla-prefill", "engines/*/mla_prefill.yaml"),
    ("serve-flags", "engines/*/serve-flags.yaml"),
    ("engine-platform", "engines/*/platforms/*.yaml"),
])
def test_every_engine_file_matches_its_json_schema(schema: str, pattern: str) -> None:
    """The published JSON Schemas (base and child forms) accept every shipped file."""
    jsonschema = pytest.importorskip("jsonschema")
    import json

    document = json.loads((ROOT / "schemas" / "jsonschema" / f"{schema}.schema.json").read_text())
    files = sorted((ROOT / "schemas").glob(pattern))
    assert files
    for path in files:
        jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), document)
