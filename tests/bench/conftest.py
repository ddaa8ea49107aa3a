"""Bench tests import their helpers from this folder; the skip-without-a-GPU hook lives
in tests/conftest.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
