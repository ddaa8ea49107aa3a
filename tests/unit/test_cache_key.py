"""The on-disk cache key: another checkout, or any data file (YAML or JSON), changes it."""

from __future__ import annotations

import shutil
from pathlib import Path

from selector.util.cache import data_digest
from selector.util.resources import schemas_dir


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(schemas_dir(), target)
    return target


def test_two_checkouts_with_the_same_data_never_share_a_key(tmp_path: Path) -> None:
    assert data_digest(_copy(tmp_path, "a")) != data_digest(_copy(tmp_path, "b"))


def test_a_json_data_file_changes_the_key(tmp_path: Path) -> None:
    root = _copy(tmp_path, "a")
    before = data_digest(root)
    (root / "engines" / "vllm-0.33.0" / "model_registry.json").write_text("{}")
    assert data_digest(root) != before


def test_every_engine_profile_has_its_model_registry() -> None:
    """An engine without vLLM's registry would answer VALID for removed architectures."""
    engines = sorted(p for p in (schemas_dir() / "engines").iterdir() if p.is_dir())
    assert engines
    assert [p.name for p in engines if not (p / "model_registry.json").is_file()] == []


def test_an_edit_of_the_same_size_changes_the_key(tmp_path: Path) -> None:
    """The hash of the files is remembered under their sizes and change times: an edit
    that keeps the size still changes the key."""
    root = _copy(tmp_path, "a")
    before = data_digest(root)
    assert data_digest(root) == before  # (read back from the cache)
    path = root / "devices.yaml"
    text = path.read_text()
    path.write_text(text.replace("H100", "H10X", 1))
    assert len(path.read_text()) == len(text)
    assert data_digest(root) != before
