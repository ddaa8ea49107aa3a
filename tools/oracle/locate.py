"""Where the oracle instrument is, and the instrument itself (vLLM's CPU-only importer).

The oracle folder (``oracle.py``, its README: how vLLM is made to believe it runs on a
CUDA GPU) is ``$ORACLE_DIR``, else ``../shared/oracle`` next to the repository. The
instrument module is loaded from there under the name ``oracle_instrument`` (this package
is ``oracle`` inside tools/); ``ORACLE_EXTRA_PATH`` adds folders of pure-Python packages
some model modules import and the oracle interpreters lack. Importing the harness puts
the repository on ``sys.path`` (after the tool's own folder), so a tool imports this
checkout's ``selector`` package.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["INSTRUMENT", "REPO", "TOOLS", "OracleNotFoundError", "extra_paths", "instrument",
           "oracle_dir"]

TOOLS = Path(__file__).resolve().parent.parent
REPO = TOOLS.parent
if str(REPO) not in sys.path:  # the checkout's selector/, not an installed copy
    sys.path.insert(1 if sys.path and Path(sys.path[0] or ".").resolve() == TOOLS else 0, str(REPO))
INSTRUMENT = "oracle_instrument"
"""The module name the instrument (``$ORACLE_DIR/oracle.py``) is loaded under."""


class OracleNotFoundError(SystemExit):
    """No oracle folder: the message says where it was looked for and how to point at it."""


def oracle_dir(given: str | os.PathLike[str] | None = None) -> Path:
    """The oracle folder: ``given`` (a tool's ``--oracle-dir``), else ``$ORACLE_DIR``, else
    ``../shared/oracle`` relative to the repository; it must hold ``oracle.py``."""
    if given:
        where, how = Path(given), "the --oracle-dir given"
    elif os.environ.get("ORACLE_DIR"):
        where, how = Path(os.environ["ORACLE_DIR"]), "$ORACLE_DIR"
    else:
        where, how = REPO.parent / "shared" / "oracle", "the default ../shared/oracle"
    if not (where / "oracle.py").is_file():
        raise OracleNotFoundError(
            f"oracle: no oracle.py in {where} ({how}); set ORACLE_DIR to the oracle folder "
            "(the one whose README explains the CUDA emulation), e.g. ORACLE_DIR=/work/oracle")
    return where.resolve()


def extra_paths() -> list[str]:
    """``ORACLE_EXTRA_PATH``'s folders (``os.pathsep``-separated), in order."""
    return [p for p in os.environ.get("ORACLE_EXTRA_PATH", "").split(os.pathsep) if p]


def instrument(given: str | os.PathLike[str] | None = None) -> ModuleType:
    """The instrument module, loaded once per process (the oracle folder first on
    ``sys.path``, as every recorder had it)."""
    loaded = sys.modules.get(INSTRUMENT)
    if loaded is not None:
        return loaded
    where = oracle_dir(given)
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))
    spec = importlib.util.spec_from_file_location(INSTRUMENT, where / "oracle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[INSTRUMENT] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[INSTRUMENT]
        raise
    return module
