"""tools/oracle/: the recorders' harness, without vLLM (locating, answers, fresh runs,
capabilities)."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

import tools  # noqa: F401  (tools/ on sys.path: the harness imports as ``oracle``)

import oracle  # isort: skip

ROOT = Path(__file__).resolve().parents[2]


def test_no_oracle_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORACLE_DIR", str(tmp_path))
    with pytest.raises(oracle.OracleNotFoundError, match=r"no oracle.py in .*\$ORACLE_DIR"):
        oracle.oracle_dir()
    (tmp_path / "oracle.py").write_text("")
    assert oracle.oracle_dir() == tmp_path.resolve()
    assert oracle.oracle_dir(tmp_path) == tmp_path.resolve()


def test_gzip_answers_are_the_bytes_of_the_goldens(tmp_path: Path) -> None:
    """A golden written by hand (GzipFile on the open file, mtime 0) and by the harness."""
    target = tmp_path / "answers.jsonl.gz"
    rows = [{"b": 1, "a": [1, 2]}, {"id": "x"}]
    with open(target, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        handle.write(b'{"a":[1,2],"b":1}\n{"id":"x"}\n')
    by_hand = target.read_bytes()
    oracle.write_jsonl_gz(target, rows)
    assert target.read_bytes() == by_hand
    assert list(oracle.read_jsonl(target)) == rows
    oracle.write_gz(target, b"abc", name_in_header=False)
    assert target.read_bytes() == gzip.compress(b"abc", mtime=0)


def test_json_answers_read_back_as_json(tmp_path: Path) -> None:
    target = oracle.write_json(tmp_path / "a.json", {"b": {10: 1, 9: 2}, "a": (1,)})
    assert target.read_text() == '{\n "a": [\n  1\n ],\n "b": {\n  "10": 1,\n  "9": 2\n }\n}\n'


def test_fresh_run_answers_through_a_file(tmp_path: Path) -> None:
    tool = tmp_path / "tool.py"
    tool.write_text("import oracle\nimport sys\n\n\ndef ask(x):\n"
                    "    print('noise on stdout')\n    return {'x': x, 'caps': len(oracle.cuda_capabilities())}\n\n\n"
                    "def fail():\n    sys.exit(3)\n")
    tools_dir = str(ROOT / "tools")
    (tmp_path / "oracle").symlink_to(Path(tools_dir) / "oracle")
    answer = oracle.run_fresh(tool, "ask", {"x": [1, "two"]}, python=sys.executable)
    assert answer["x"] == [1, "two"] and answer["caps"] > 0
    with pytest.raises(oracle.FreshProcessError, match="exit 3, no answer"):
        oracle.run_fresh(tool, "fail", python=sys.executable)


def test_capabilities_come_from_the_device_catalog() -> None:
    caps = oracle.cuda_capabilities()
    catalog = {str(d["capability"]) for d in oracle.catalog_devices()}
    assert set(caps) == catalog | set(oracle.UNCATALOGUED)
    assert list(caps) == sorted(caps, key=lambda c: tuple(map(int, c.split("."))))
    assert "8.7" not in oracle.cuda_capabilities(without=("8.7",))
    with pytest.raises(ValueError, match="not among"):
        oracle.cuda_capabilities(without=("1.0",))
