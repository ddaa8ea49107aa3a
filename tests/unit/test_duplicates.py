"""No pair of places sharing 10 or more lines in selector/ or tools/, where the
``duplicates`` command is installed (CI has none: the test skips itself there)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("folder", ["selector", "tools"])
def test_no_ten_line_duplicates(folder: str) -> None:
    command = shutil.which("duplicates")
    if command is None:
        pytest.skip("the duplicates command is not installed")
    done = subprocess.run([command, "--repo", str(ROOT / folder), "--min-lines", "10",
                           "--most", "20", "--seconds", "120"],
                          capture_output=True, text=True, check=False, timeout=300)
    lines = done.stdout.splitlines()
    assert lines and lines[0].startswith("no duplicates"), done.stdout
    assert not any(line.startswith("incomplete:") for line in lines), done.stdout
