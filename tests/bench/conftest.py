"""GPU bench tests run only where torch sees a CUDA device; elsewhere they skip cleanly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs torch with a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and "tests/bench" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)
