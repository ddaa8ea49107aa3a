"""A small on-disk cache that keeps the cold start of ``attn-select`` light.

The validated catalog and the compiled evaluator are derived from the data files
alone, so they are cached under a key made of the package version and a hash of
every data file.  A missing, unreadable or stale cache is simply rebuilt; set
``ATTN_SELECT_NO_CACHE=1`` to bypass it and ``ATTN_SELECT_CACHE_DIR`` to move it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cache_get", "cache_put", "cached_file", "data_digest"]

T = TypeVar("T")

_VERSION = "1"


def _cache_dir() -> Path | None:
    if os.environ.get("ATTN_SELECT_NO_CACHE"):
        return None
    base = os.environ.get("ATTN_SELECT_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg or Path.home() / ".cache") / "attn-select"


_CODE_MODULES = ("selector.expr", "selector.catalog", "selector.util.cache", "selector.schema",
                 "selector.platforms", "selector.solver.compiled")
"""The modules whose code shapes the cached objects. Their files follow from the names (a
package: every file under it; nothing is imported), so a move rewrites the names only."""


def _code_files() -> list[Path]:
    root = Path(__file__).resolve().parents[1]  # selector/
    files: list[Path] = []
    for module in _CODE_MODULES:
        target = root.joinpath(*module.split(".")[1:])
        files += sorted(target.rglob("*.py")) if target.is_dir() else [target.with_suffix(".py")]
    return files


@functools.cache
def _code_digest(extra: tuple[str, ...] = ()) -> bytes:
    """A hash of the code that shapes the cached objects (``extra``: more files, relative
    to the package) so an upgrade or a local edit never reads a stale cache."""
    digest = hashlib.sha256(_VERSION.encode())
    package = Path(__file__).resolve().parents[1]
    extra_files = [path for name in extra for path in (
        sorted((package / name).rglob("*.py")) if (package / name).is_dir() else [package / name])]
    for path in (*_code_files(), *extra_files):
        digest.update(path.read_bytes())
    return digest.digest()


def _data_files(root: Path) -> list[str]:
    found: list[str] = []
    for folder, _, names in os.walk(root):
        found.extend(os.path.join(folder, n) for n in names if n.endswith((".yaml", ".json")))
    return sorted(found)


def data_digest(root: Path) -> str:
    """A hash of where ``root`` is, of every data file under it and of the code that
    shapes the cached objects (so an upgrade, a local edit or another checkout never
    reads a stale cache).  The hash of the files' bytes is itself kept in the cache
    under their names, sizes, inodes and change times, so an unchanged tree is not
    read again."""
    base = str(root.resolve())
    files = _data_files(root)
    stamp = hashlib.sha256(_code_digest())
    stamp.update(base.encode())
    for name in files:
        info = os.stat(name)
        stamp.update(f"{name}\0{info.st_size}\0{info.st_ino}\0{info.st_mtime_ns}\0"
                     f"{info.st_ctime_ns}\n".encode())
    stamp_key = stamp.hexdigest()[:24]
    known = cache_get("digest", stamp_key)
    if isinstance(known, str):
        return known
    # the cached objects hold paths under ``root``: two checkouts never share an entry
    digest = hashlib.sha256(_code_digest())
    digest.update(base.encode())
    for name in files:
        digest.update(os.path.relpath(name, base).encode())
        with open(name, "rb") as handle:
            digest.update(handle.read())
    result = digest.hexdigest()[:24]
    cache_put("digest", stamp_key, result)
    return result


def cached_file(kind: str, path: Path, build: Callable[[bytes], T],
                code: tuple[str, ...] = ()) -> T:
    """``build(path's bytes)``, kept in the cache under a hash of the file (its place and
    bytes) and of the code that shapes the result (``code``: files or folders relative to
    the package, beyond the catalog's); ``build`` runs when the file or the code changed.
    Errors are not cached: they come from ``build`` each time."""
    data = path.read_bytes()
    digest = hashlib.sha256(_code_digest(code))
    digest.update(str(path.resolve()).encode())
    digest.update(data)
    key = digest.hexdigest()[:24]
    cached = cache_get(kind, key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    value = build(data)
    cache_put(kind, key, value)
    return value


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
    target = directory / f"{kind}-{key}.pickle"
    partial = target.with_name(f"{target.name}.{os.getpid()}.{id(value)}.partial")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with partial.open("xb") as handle:
            pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, target)  # readers see the old file or the whole new one
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
