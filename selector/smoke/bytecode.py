"""Whether this Python keeps compiled bytecode for a package the smoke imports.

Python compiles a module's source once and caches it as a ``.pyc`` next to it (in
``__pycache__``) or under ``PYTHONPYCACHEPREFIX``; where that folder cannot be written, or
``PYTHONDONTWRITEBYTECODE`` is set, and no cached file exists, every process compiles the
package again. torch, FlashInfer and pydantic are about 1,200 modules: on the H200 test
image (its torch in a venv without bytecode that the run does not write) that was 3.0 s of
a 7.5 s FlashInfer verdict, every run (``builtins.compile`` in a profile of the verdict;
docs/smoke.md, "Cold verdicts"). The smoke names it and the fix; it changes nothing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

__all__ = ["uncached_bytecode_note"]


def uncached_bytecode_note(module: ModuleType) -> str | None:
    """A note when ``module`` was imported from source with no cached bytecode (so the
    next run compiles it again), naming why and the fix; None when its bytecode is cached
    (or it has no Python source)."""
    source = getattr(module, "__file__", None)
    if not source or not source.endswith(".py"):
        return None
    cached = importlib.util.cache_from_source(source)
    if os.path.exists(cached):
        return None
    folder = os.path.dirname(cached)
    why = ("PYTHONDONTWRITEBYTECODE is set" if sys.dont_write_bytecode
           else f"{folder} cannot be written")
    return (f"Python keeps no bytecode for {module.__name__} here ({why}): every run compiles "
            "its modules from source again (3.0 s of each verdict on the H200 test image); "
            "set PYTHONPYCACHEPREFIX to a folder you can write (e.g. ~/.cache/pycache) and "
            "leave PYTHONDONTWRITEBYTECODE unset, and the next verdict starts faster")
