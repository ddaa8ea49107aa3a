"""Random `vllm serve` command lines never crash `check`: exit 0, 1 or 2 only."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.test_config_fuzz import run_cli

FLAGS = ["--attention-backend", "--kv-cache-dtype", "--block-size", "--dtype", "-tp",
         "--tensor-parallel-size", "--decode-context-parallel-size", "--speculative-config",
         "--compilation-config", "-cc.cudagraph_mode", "-ac.backend", "-ac.flash_attn_version",
         "--attention-config", "--kv-transfer-config", "--max-model-len", "--hf-overrides",
         "--gpu-memory-utilization", "--enable-prefix-caching", "-O", "--trust-remote-code",
         "--no-such-flag"]
VALUES = ["FLASH_ATTN", "flashinfer", "auto", "fp8", "16", "0", "-3", "1.5", "bfloat16", "{",
          '{"num_speculative_tokens": 2}', '{"cudagraph_mode": "FULL"}', "FULL", "x=y", "",
          '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}', "[1]", "4", "512"]
MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "deepseek-ai/DeepSeek-V3.2", "openai/gpt-oss-20b",
          "llama-3.1-8b", "unknown/model", "./nowhere", "Qwen/Qwen3-Next-80B-A3B-Instruct"]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MODELS),
       st.lists(st.tuples(st.sampled_from(FLAGS), st.sampled_from(VALUES)), max_size=5),
       st.sampled_from(["H100", "B200", "9.0", "RTX 5090"]),
       st.booleans())
def test_random_command_lines(model: str, flags: list[tuple[str, str]], device: str,
                              env_prefix: bool) -> None:
    argv = ["VLLM_ATTENTION_BACKEND=FLASHINFER"] if env_prefix else []
    argv += ["vllm", "serve", model]
    for flag, value in flags:
        argv += [flag, value] if value else [flag]
    code, out, err = run_cli(["check", "--device", device, "--", *argv])
    assert "Traceback" not in out + err
    assert code in (0, 1, 2), (argv, code, err[-500:])


CONTAINER_WORDS = ["docker", "podman", "sudo", "run", "container", "-it", "--rm", "--gpus", "all",
                   "-e", "HF_TOKEN=x", "--env=VLLM_X=1", "-v", "a:b", "--ipc=host", "-p",
                   "8000:8000", "vllm/vllm-openai", "vllm", "serve", "python3", "-m",
                   "vllm.entrypoints.openai.api_server", "--model", "llama-3.1-8b", "--"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(CONTAINER_WORDS), min_size=1, max_size=12))
def test_random_container_lines(words: list[str]) -> None:
    argv = ["docker", "run", *words]
    code, out, err = run_cli(["check", "--device", "H100", "--", *argv])
    assert "Traceback" not in out + err
    assert code in (0, 1, 2), (argv, code, err[-500:])
