"""``--ship-code``: this checkout's ``selector`` package, packed for a Ray ``runtime_env``
(``py_modules``), with its data folder inside as an installed wheel has it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import selector
from selector.util.resources import schemas_dir

__all__ = ["shipped_code"]


def shipped_code() -> Path:
    """A fresh folder ``.../selector`` holding the package and ``_schemas`` (the data)."""
    source = Path(selector.__file__).resolve().parent
    target = Path(tempfile.mkdtemp(prefix="attn-select-ship-")) / "selector"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if not (target / "_schemas").is_dir():
        shutil.copytree(schemas_dir(), target / "_schemas",
                        ignore=shutil.ignore_patterns("__pycache__"))
    return target
