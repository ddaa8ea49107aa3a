"""Access to the packaged ``schemas/`` data (read-only).

An installed wheel carries the data as ``selector/_schemas``; a source checkout
reads the top-level ``schemas/`` folder.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["schemas_dir"]


@functools.cache
def schemas_dir() -> Path:
    """The directory holding the capability data."""
    packaged = Path(__file__).resolve().parents[1] / "_schemas"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "schemas"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(
        "attn-select's data folder is missing (neither selector/_schemas nor schemas/ exists); "
        "reinstall the package"
    )
