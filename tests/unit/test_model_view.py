"""The model / `vllm serve` text view of a failing layer group: vLLM's error as a
paragraph, a per-backend reasons table and the suggested fixes (as JSON and GitHub
annotations have them)."""

from __future__ import annotations

from tests.fuzz.test_config_fuzz import run_cli

SERVE = ["check", "--device", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
         "--block-size", "8"]


def test_a_failing_group_gets_a_reasons_table_and_the_fixes() -> None:
    code, out, _ = run_cli(SERVE)
    assert code == 1
    assert "Backends for layers 0-31 (full_attention)" in out
    assert "block_size not supported [BS001]" in out
    # the suggested fixes of the JSON and GitHub formats, here too
    assert "remove --block-size (let vLLM choose)" in out
    assert "use --block-size 16" in out
    # vLLM's long error is a paragraph, not squeezed into a table cell
    assert not any("AttentionSelectorConfig" in line and "│" in line for line in out.splitlines())
    assert "vLLM would fail at start-up with:" in out


def test_suggestions_read_as_flags() -> None:
    _, out, _ = run_cli(["check", "--device", "H100", "--format", "json", "--", *SERVE[4:]])
    assert "use remove" not in out
