"""The oracle harness: what every recorder in tools/ shares to ask the real vLLM.

Import it as ``import oracle`` from a tool in tools/ (a tool's own folder is first on
``sys.path`` when it runs as a script; ``oracle.child`` and the tests put tools/ there).

* locate the oracle instrument: ``oracle_dir()`` (``$ORACLE_DIR``, else
  ``../shared/oracle`` next to the repository, else a clear error), ``instrument()``;
* start vLLM on the emulated CUDA platform: ``start(capability)``, ``engine(capability)``
  (the instrument's selection ``Oracle``), ``emulate(capability, name=, memory_bytes=)``,
  and ``start_models()`` for model builds on the meta device (``oracle.models``);
* ``run_fresh(tool, function, arguments, python=)``: one function in a fresh process (of
  another interpreter), its JSON answer back through a file, never parsed from stdout;
* reproducible answers: ``write_gz`` / ``write_jsonl_gz`` / ``write_json`` / ``compact``
  / ``read_jsonl`` / ``digest`` (``oracle.answers``);
* the golden paths: ``ORACLE_GOLDEN``, ``RELEASE_GOLDEN``, ``PROFILE``, ``golden()``;
* the capabilities to ask about, from ``schemas/devices.yaml``: ``cuda_capabilities()``.

The instrument's own names read through this package too (``oracle.set_capability``,
``oracle.Oracle``, ``oracle.bootstrap``), so a tool written for the instrument module
keeps working. tools/oracle/README.md says how to add a recorder.
"""

from __future__ import annotations

from typing import Any

from .answers import compact, digest, read_jsonl, write_bytes, write_gz, write_json, write_jsonl_gz
from .capabilities import UNCATALOGUED, catalog_devices, cuda_capabilities
from .fresh import FreshProcessError, run_fresh
from .golden import ORACLE_GOLDEN, PROFILE, RELEASE_GOLDEN, golden, release_golden
from .locate import REPO, TOOLS, OracleNotFoundError, extra_paths, instrument, oracle_dir
from .start import capability, emulate, engine, start

__all__ = [
    "ORACLE_GOLDEN", "PROFILE", "RELEASE_GOLDEN", "REPO", "TOOLS", "UNCATALOGUED",
    "FreshProcessError", "OracleNotFoundError", "capability", "catalog_devices", "compact",
    "cuda_capabilities", "digest", "emulate", "engine", "extra_paths", "golden", "instrument",
    "oracle_dir", "read_jsonl", "release_golden", "run_fresh", "start", "start_models",
    "write_bytes", "write_gz", "write_json", "write_jsonl_gz",
]


def start_models(stand_ins: tuple[str, ...] | frozenset[str] = ()) -> None:
    """vLLM started for model builds on the CPU (``oracle.models.start_models``)."""
    from .models import start_models as _start_models

    _start_models(stand_ins)


def __getattr__(name: str) -> Any:
    """The instrument's names (``set_capability``, ``Oracle``, ``bootstrap`` ...). A
    private name is never the instrument's: pytest's collection probes a module it finds
    in a test module for such names (``_fixture_function_marker``), which must not need
    the oracle."""
    if name.startswith("_"):
        raise AttributeError(name)
    return getattr(instrument(), name)
