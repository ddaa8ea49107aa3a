"""Golden reports of `attn-select check` (markdown and text at COLUMNS=120, NO_COLOR=1).

Regenerate with ``python -m pytest tests/golden/test_check_golden.py --update-goldens``
and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.test_config_fuzz import run_cli
from tests.recorded import pinned

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "check"
VALID = "examples/llama-3.1-8b-h100.yaml"
INVALID = "examples/gpt-oss-20b-l40s-flashinfer.yaml"

CASES: dict[str, tuple[list[str], int]] = {
    "files.md": (["check", INVALID, VALID, "--format", "markdown"], 1),
    # the example pins dtype: bfloat16, which vLLM refuses on a T4 (SU001)
    "fleet.md": (["check", VALID, "--device", "H100", "--device", "B200", "--device", "T4",
                  "--format", "markdown"], 1),
    "serve.md": (["check", "--device", "H100", "--format", "markdown", "--",
                  "VLLM_ATTENTION_BACKEND=FLASHINFER", "vllm", "serve", "openai/gpt-oss-20b",
                  "--kv-cache-dtype", "fp8", "--max-model-len", "32768"], 0),
    "invalid.txt": (["check", INVALID], 1),
    "fleet.txt": (["check", VALID, "--device", "H100", "--device", "B200", "--device",
                   "RTX 5090", "--device", "T4"], 1),
    "serve-fleet.txt": (["check", "--device", "H100", "--device", "L40S", "--", "vllm", "serve",
                         "deepseek-ai/DeepSeek-V3.2-Exp", "-tp", "8", "--kv-cache-dtype", "fp8"],
                        1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_report_golden(name: str, update_goldens: bool,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("NO_COLOR", "1")
    argv, expected_code = CASES[name]
    code, out, err = run_cli(pinned(argv))
    assert code == expected_code, err
    path = GOLDEN / name
    if update_goldens:
        path.write_text(out, encoding="utf-8")
    assert path.is_file(), f"missing golden {path.name}: run pytest --update-goldens"
    assert out == path.read_text(encoding="utf-8")
