"""Shared test options and fixtures."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from selector.util.resources import schemas_dir
from tests.recorded import RECORDED_ENGINE

os.environ.setdefault("ATTN_SELECT_NO_CACHE", "1")
os.environ.setdefault("NO_COLOR", "1")
os.environ.setdefault("COLUMNS", "120")
# the default engine must not depend on a vLLM installed next to the tests (GPU hosts)
os.environ.setdefault("ATTN_SELECT_INSTALLED_VLLM", "none")
# nor on the newest profile: a new engine version leaves every snapshot as recorded
# (tests about the default itself unset it)
os.environ.setdefault("ATTN_SELECT_ENGINE", RECORDED_ENGINE)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite golden files from the current output instead of comparing",
    )
    parser.addoption(
        "--gpu-required",
        action="store_true",
        default=False,
        help="GPU tests may not skip: no CUDA GPU is an error (a missing library already "
             "fails the GPU tests with its install hint)",
    )


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` run only where torch sees a CUDA device; elsewhere they skip
    (with ``--gpu-required``, the run is an error instead)."""
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or _cuda_available():
        return
    if config.getoption("--gpu-required"):
        raise pytest.UsageError(
            f"--gpu-required: {len(gpu_items)} GPU tests, but torch sees no CUDA GPU "
            "(install a CUDA build of torch and the GPU extra: pip install 'attn-select[gpu]')")
    skip = pytest.mark.skip(reason="needs torch with a CUDA GPU")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture()
def schemas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch copy of the shipped data files (the on-disk cache off), for tests that
    edit data: a new backend, a new engine profile."""
    monkeypatch.setenv("ATTN_SELECT_NO_CACHE", "1")
    target = tmp_path / "schemas"
    shutil.copytree(schemas_dir(), target, ignore=shutil.ignore_patterns("jsonschema"))
    return target
