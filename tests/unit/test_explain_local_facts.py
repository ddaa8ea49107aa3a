"""``explain`` evaluates a backend's own facts (its ``facts:`` list) as the compiled
evaluator does: NO_ATTENTION pinned on an NVIDIA GPU in vLLM 0.29.0+ fails with vLLM's
ModuleNotFoundError naming the module its class path names (a local fact), not an internal
KeyError (tests/golden/oracle/vllm-X/cuda-pinned.jsonl.gz has vLLM's words)."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.test_config_fuzz import run_cli


def test_explain_reads_the_backends_own_facts(tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("device: H100\nattention_backend: NO_ATTENTION\ndtype: bfloat16\n"
                          "layer: {head_size: 128, num_heads: 32, num_kv_heads: 8}\n")
    code, out, err = run_cli(["explain", "NO_ATTENTION", str(deployment), "-f", "json"])
    assert code in (0, 1) and "internal error" not in err, (code, err)
    assert "No module named 'vllm.v1.attention.backends.no_attention'" in out
