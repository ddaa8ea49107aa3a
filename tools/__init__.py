"""The project's tools: vLLM recorders (tools/oracle/ is their harness) and data makers.

Each tool runs as a script (``python tools/<name>.py``), its folder first on ``sys.path``,
so the tools import each other and the harness by their bare names (``import oracle``,
``from startup_fact_grid import ...``). Imported as ``tools.<name>`` (the tests), the same
names resolve through this folder on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)
