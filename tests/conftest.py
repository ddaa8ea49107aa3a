"""Shared test options and fixtures."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("ATTN_SELECT_NO_CACHE", "1")
os.environ.setdefault("NO_COLOR", "1")
os.environ.setdefault("COLUMNS", "120")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite golden files from the current output instead of comparing",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))
