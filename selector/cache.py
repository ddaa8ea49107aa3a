"""A small on-disk cache that keeps the cold start of ``attn-select`` light.

The validated catalog and the compiled evaluator are derived from the data files
alone, so they are cached under a key made of the package version and a hash of
every data file.  A missing, unreadable or stale cache is simply rebuilt; set
``ATTN_SELECT_NO_CACHE=1`` to bypass it and ``ATTN_SELECT_CACHE_DIR`` to move it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["cache_get", "cache_put", "data_digest"]

_VERSION = "1"


def _cache_dir() -> Path | None:
    if os.environ.get("ATTN_SELECT_NO_CACHE"):
        return None
    base = os.environ.get("ATTN_SELECT_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg or Path.home() / ".cache") / "attn-select"


_CODE_FILES = ("expr.py", "catalog.py", "cache.py", "schema", "solver/compiled.py")


def data_digest(root: Path) -> str:
    """A hash of where ``root`` is, of every data file under it and of the code that
    shapes the cached objects (so an upgrade, a local edit or another checkout never
    reads a stale cache)."""
    digest = hashlib.sha256(_VERSION.encode())
    # the cached objects hold paths under ``root``: two checkouts never share an entry
    digest.update(str(root.resolve()).encode())
    for path in sorted([*root.rglob("*.yaml"), *root.rglob("*.json")]):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    package = Path(__file__).resolve().parent
    for name in _CODE_FILES:
        target = package / name
        for path in sorted(target.rglob("*.py")) if target.is_dir() else [target]:
            digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def cache_get(kind: str, key: str) -> Any | None:
    directory = _cache_dir()
    if directory is None:
        return None
    path = directory / f"{kind}-{key}.pickle"
    try:
        with path.open("rb") as handle:
            return pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None


def cache_put(kind: str, key: str, value: Any) -> None:
    directory = _cache_dir()
    if directory is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, delete=False) as handle:
            pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(handle.name, directory / f"{kind}-{key}.pickle")
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return
