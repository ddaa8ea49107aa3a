"""`attn-select diff` says what it sees: a deployment invalid under both engines is STILL
INVALID (not "SAME BACKEND none -> none"), and a row whose values are equal (the same KV
layout under its old and new name, a value one engine does not report) is not shown as a
change."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.test_config_fuzz import run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "diff"


def _diff(path: Path, *extra: str) -> tuple[int, str]:
    code, out, err = run_cli(["diff", str(path), "--from", "vllm==0.25.1", "--to", "vllm==0.33.0",
                              *extra])
    return code, out + err


def test_invalid_under_both_engines_is_still_invalid(tmp_path: Path) -> None:
    text = (FIXTURES / "h100-head256-fp16-nvfp4.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("head_size: 256", "head_size: 1000"))
    _, output = _diff(bad)
    assert "STILL INVALID" in output and "SAME BACKEND" not in output
    assert "none -> none" not in output


def test_equal_values_are_not_shown_as_changes() -> None:
    for path in sorted(FIXTURES.glob("*.yaml")):
        _, output = _diff(path, "--verbose")
        for line in output.splitlines():
            cells = [c.strip() for c in line.split("│")]
            if len(cells) != 6 or cells[1] != "" or not cells[2]:
                continue  # not an unmarked row of the Verdict table (mark, item, before, after)
            before, after = cells[3], cells[4]
            if before and after and before != after:  # an unmarked row reads as equal
                assert after.startswith(("same (", "not reported")), (path, line)
