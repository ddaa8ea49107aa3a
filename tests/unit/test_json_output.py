"""docs/json-output.md and the JSON output stay in step."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "json-output.md").read_text()


def _documented(section: str) -> set[str]:
    part = DOC.split(section, 1)[1].split("\n## ", 1)[0] if section else DOC
    keys: set[str] = set()
    for cell in re.findall(r"^\| ([^|]+) \|", part, flags=re.MULTILINE):
        keys.update(re.findall(r"`([a-z_]+)`", cell))
    return keys


def test_every_top_level_and_runtime_key_is_documented_and_present() -> None:
    code, out, _ = run_cli(["check", str(ROOT / "examples" / "llama-3.1-8b-h100.yaml"), "--format", "json"])
    assert code == 0
    doc = json.loads(out)
    documented = _documented("## Single-layer deployment")
    runtime_keys = set(doc["runtime"])
    assert set(doc) <= documented, set(doc) - documented
    assert runtime_keys <= documented, runtime_keys - documented
    assert {"schema_version", "valid", "selected", "backends", "runtime"} <= set(doc)
    assert doc["schema_version"] == "1.0"
    for diagnostic in doc["backends"]["TURBOQUANT"]["reasons"]:
        assert set(diagnostic) == {"code", "name", "severity", "message", "hint", "backend"}
