"""The README's sample output is what the commands print today
(`python tools/readme_samples.py --write` regenerates it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_samples", ROOT / "tools" / "readme_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_samples"] = module
    spec.loader.exec_module(module)
    return module


def test_readme_samples_match_real_runs() -> None:
    tool = _tool()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len([s for b in tool._BLOCK.findall(text) for s in tool.samples(b)]) >= 3
    stale = tool.differences(text)
    assert not stale, "README sample out of date (python tools/readme_samples.py --write): " + \
        "; ".join(command.splitlines()[0] for command, _, _ in stale)


def test_readme_keeps_its_two_set_up_commands_at_the_top() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "pip install -e . && attn-select check examples/llama-3.1-8b-h100.yaml" in head
    assert "pip install -e '.[dev]' && python -m pytest -q" in head
