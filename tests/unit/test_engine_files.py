"""One loader for every engine file: each file of an engine profile folder has one
inheritance rule (``ENGINE_FILES``), which ``Catalog.engine_file`` and
``Catalog.merged_file`` follow along the ``extends`` chain; no file goes unlisted."""

from __future__ import annotations

from pathlib import Path

import yaml

from selector.catalog import ENGINE_FILES, PLATFORMS_DIR, _load_catalog_files, load_catalog
from selector.inputs.serve.flags import SERVE_FLAGS_FILE


def test_every_file_of_every_engine_folder_has_a_rule() -> None:
    catalog = load_catalog()
    for name, folder in catalog.engine_dirs.items():
        for path in folder.iterdir():
            if path.is_dir():
                assert path.name in ("backends", PLATFORMS_DIR), (name, path)
                continue
            assert path.name in ENGINE_FILES, (name, path.name)
        for path in (folder / PLATFORMS_DIR).glob("*"):
            assert path.suffix == ".yaml", path


def test_the_chain_is_read_from_the_headers() -> None:
    catalog = load_catalog()
    for name in catalog.engine_names:
        header = yaml.safe_load((catalog.engine_dirs[name] / "profile.yaml").read_text())
        assert catalog.engine_parents[name] == header.get("extends")


def test_whole_files_come_from_the_nearest_profile_and_recorded_ones_never(
        schemas: Path) -> None:
    newest = load_catalog().default_engine
    family, version = newest.split("==", 1)
    major, minor, _ = (int(p) for p in version.split("."))
    child = f"{family}=={major}.{minor + 1}.0"
    folder = schemas / "engines" / child.replace("==", "-", 1)
    folder.mkdir()
    (folder / "profile.yaml").write_text(yaml.safe_dump({"engine": child, "extends": newest}))
    catalog = _load_catalog_files(schemas)
    for filename, rule in ENGINE_FILES.items():
        if rule.kind == "whole":
            assert catalog.engine_file(child, filename) == catalog.engine_file(newest, filename)
    assert catalog.engine_file(newest, "model_registry.json") is not None
    assert catalog.engine_file(child, "model_registry.json") is None  # a recorded answer
    assert catalog.merged_file(child, SERVE_FLAGS_FILE) == catalog.merged_file(newest,
                                                                               SERVE_FLAGS_FILE)
