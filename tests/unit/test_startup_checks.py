"""The start-up checks that decide whether `vllm serve` comes up: each refusal with vLLM's
own text (the expected strings are vLLM's f-strings filled by hand, file and lines cited)
and exit code 1."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.kv.specs import FullAttentionSpec
from selector.memory import format_gib, kv_fit, startup_profile
from tests.fuzz.test_config_fuzz import run_cli

GIB = 1024**3


def _json(argv: list[str]) -> tuple[int, dict[str, object]]:
    code, out, err = run_cli(["check", "--format", "json", *argv])
    assert out, err
    document = json.loads(out)
    return code, document


def _codes(document: dict[str, object]) -> dict[str, str]:
    findings = document["findings"]
    assert isinstance(findings, list)
    return {f["code"]: f["message"] for f in findings}


# ---------------------------------------------------------------- dtype vs compute capability


def test_explicit_bfloat16_on_v100_is_refused_with_vllms_text() -> None:
    code, doc = _json(["--device", "V100", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", "--dtype", "bfloat16"])
    assert code == 1 and doc["valid"] is False
    # vllm/platforms/cuda.py:650-656 (0.33.0), the device name as the catalog calls it
    assert _codes(doc)["SU001"] == (
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
        "Your V100 GPU has compute capability 7.0. You can use float16 instead by explicitly "
        "setting the `dtype` flag in CLI, for example: --dtype=half.")


@pytest.mark.parametrize("dtype", [[], ["--dtype", "auto"], ["--dtype", "half"]])
def test_auto_or_half_on_t4_is_not_refused(dtype: list[str]) -> None:
    _, doc = _json(["--device", "T4", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct",
                    "--max-model-len", "4096", *dtype])
    assert "SU001" not in _codes(doc)


# ---------------------------------------------------------------- max_model_len


def test_max_model_len_1m_on_gpt_oss_20b_is_refused() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "openai/gpt-oss-20b",
                       "--max-model-len", "1M"])
    assert code == 1 and doc["passed"] is False
    # vllm/config/model.py:2662-2684 (0.33.0): the yarn factor is already in
    # max_position_embeddings, so the derived length is 131072 * 1.0
    assert _codes(doc)["SU002"] == (
        "User-specified max_model_len (1048576) is greater than the derived max_model_len "
        "(max_position_embeddings=131072.0 or model_max_length=None in model's config.json). "
        "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses "
        "relative position encoding (RoPE), positions exceeding derived_max_model_len lead to "
        "nan. If the model uses absolute position encoding, positions exceeding "
        "derived_max_model_len will cause a CUDA array out-of-bounds error.")


def test_allow_long_max_model_len_lifts_the_refusal() -> None:
    _, doc = _json(["--device", "H100", "--", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "vllm",
                    "serve", "openai/gpt-oss-20b", "--max-model-len", "262144"])
    assert "SU002" not in _codes(doc)


def test_max_model_len_within_the_model_is_fine() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "openai/gpt-oss-20b",
                       "--max-model-len", "131072"])
    assert code == 0 and "SU002" not in _codes(doc)


def test_rope_factor_scales_the_derived_length() -> None:
    """A linear rope factor multiplies max_position_embeddings (model.py:2608-2640)."""
    from selector.memory import derived_max_model_len

    profile = startup_profile(load_catalog())
    raw = {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}}
    assert derived_max_model_len(raw, profile) == (16384.0, "max_position_embeddings")
    yarn = {"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    assert derived_max_model_len(yarn, profile) == (4096.0, "max_position_embeddings")
    gemma = {"model_type": "gemma3_text", "max_position_embeddings": 131072,
             "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    assert derived_max_model_len(gemma, profile) == (131072, "max_position_embeddings")


# ---------------------------------------------------------------- tensor parallelism


def test_tensor_parallel_not_dividing_the_heads_is_invalid_not_bad_input() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", "-tp", "3"])
    assert code == 1
    # vllm/config/model.py:1557-1565 (0.33.0)
    assert _codes(doc)["SU003"] == ("Total number of attention heads (32) must be divisible by "
                                    "tensor parallel size (3).")


def test_tensor_parallel_not_dividing_the_padded_vocab_is_refused() -> None:
    """28 heads divide by 7, but VocabParallelEmbedding's divide() asserts on 152064
    (vllm/model_executor/layers/vocab_parallel_embedding.py:304, distributed/utils.py:51-55)."""
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct",
                       "-tp", "7"])
    assert code == 1
    assert _codes(doc)["SU006"] == "AssertionError: 152064 is not divisible by 7"


# ---------------------------------------------------------------- removed flags, JSON keys


def test_removed_flag_is_refused() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", "--use-v2-block-manager"])
    assert code == 1 and doc["valid"] is False
    # argparse: "vllm serve: error: unrecognized arguments: ..."
    assert _codes(doc)["SU004"] == "unrecognized arguments: --use-v2-block-manager"


def test_unknown_compilation_config_key_is_refused_with_did_you_mean() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", "--compilation-config",
                       '{"cudagraph_mod": "FULL"}'])
    assert code == 1
    # vllm/engine/arg_utils.py:367-374 wraps pydantic's ValidationError of CompilationConfig
    # (extra="forbid", vllm/config/utils.py) in argparse.ArgumentTypeError
    finding = next(f for f in doc["findings"] if f["code"] == "SU005")  # type: ignore[union-attr]
    assert finding["message"] == (
        "argument --compilation-config/-cc: 1 validation error for CompilationConfig\n"
        "cudagraph_mod\n  Unexpected keyword argument [type=unexpected_keyword_argument, "
        "input_value='FULL', input_type=str]")
    assert finding["hint"] == "did you mean 'cudagraph_mode'?"


def test_known_compilation_config_keys_pass() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", "--compilation-config",
                       '{"cudagraph_mode": "PIECEWISE", "max_cudagraph_capture_size": 256}'])
    assert code == 0 and "SU005" not in _codes(doc)


# ---------------------------------------------------------------- memory


def test_gpt_oss_120b_h100_095_budget_counts_the_weights() -> None:
    """Issue 12: KV capacity was GPU memory x utilization. vLLM 0.33.0 runs gpt-oss's
    experts on the OAI Triton kernels on Hopper (no padding): about 6.6 GiB are left."""
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "openai/gpt-oss-120b",
                       "--gpu-memory-utilization", "0.95"])
    memory = doc["memory"]
    assert isinstance(memory, dict)
    weights = memory["weights"]["bytes_per_gpu"] / GIB
    assert 60 < weights < 62 and memory["weights"]["moe_backend"] == "TRITON"
    assert 5.5 < memory["available_kv_bytes"] / GIB < 7.5
    assert memory["log"][0].startswith("Available KV cache memory: ")
    assert memory["log"][1].startswith("GPU KV cache size: ")
    assert "Maximum concurrency for 131,072 tokens per request: " in memory["log"][1]
    assert code == 0


def test_gpt_oss_120b_h100_095_on_marlin_refuses_the_full_length() -> None:
    """The MoE backend of vLLM <= 0.11 on H100 (issue #27508, 1.71 GiB left): vLLM refuses
    max_model_len 131072 and accepts what fits."""
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "openai/gpt-oss-120b",
                       "--gpu-memory-utilization", "0.95", "--moe-backend", "marlin"])
    assert code == 1
    message = _codes(doc)["MM002"]
    assert message.startswith("To serve at least one request with the model's max seq len "
                              "(131072), (4.79 GiB KV cache is needed, which is larger than "
                              "the available KV cache memory (")
    assert "Based on the available memory, the estimated maximum model length is" in message
    available = doc["memory"]["available_kv_bytes"] / GIB  # type: ignore[index]
    assert available == pytest.approx(1.71, abs=0.3)
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "openai/gpt-oss-120b",
                       "--gpu-memory-utilization", "0.95", "--moe-backend", "marlin",
                       "--max-model-len", "32768"])
    assert code == 0 and "MM002" not in _codes(doc)


def test_nothing_left_is_no_available_memory() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "openai/gpt-oss-120b",
                       "--gpu-memory-utilization", "0.8"])
    assert code == 1
    # vllm/v1/core/kv_cache_planning.py:56-63 (0.33.0)
    assert _codes(doc)["MM001"] == (
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
        "when initializing the engine (this flag also controls CPU memory reservation on the "
        "CPU backend, despite its name). See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")


def test_weights_larger_than_the_gpu_fail_at_load() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"])
    assert code == 1 and "MM003" in _codes(doc)
    # torch's allocator (c10/cuda/CUDACachingAllocator.cpp): "CUDA out of memory. ..."
    assert _codes(doc)["MM003"].startswith("torch.OutOfMemoryError: CUDA out of memory (")


def test_weights_larger_than_an_amd_gpu_fail_in_torchs_rocm_words() -> None:
    # torch built for ROCm raises "HIP out of memory" (c10/hip/HIPCachingAllocator.cpp,
    # hipified; vLLM's EngineCore on gfx1151: lemonade-sdk/vllm-rocm#5): a platform fact
    # of schemas/platforms.yaml, not the CUDA words
    code, doc = _json(["--device", "MI210", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-70B-Instruct"])
    assert code == 1
    assert _codes(doc)["MM003"].startswith("torch.OutOfMemoryError: HIP out of memory (")


def test_kv_cache_memory_bytes_is_taken_as_given() -> None:
    _, doc = _json(["--device", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--kv-cache-memory-bytes", "8G"])
    assert doc["memory"]["available_kv_bytes"] == 8 * GIB  # type: ignore[index]
    assert doc["memory"]["log"][0] == "Available KV cache memory: 8.0 GiB"  # type: ignore[index]


def test_tensor_parallel_divides_the_weights() -> None:
    _, one = _json(["--device", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"])
    _, two = _json(["--device", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "-tp", "2"])
    w1 = one["memory"]["weights"]["bytes_per_gpu"]  # type: ignore[index]
    w2 = two["memory"]["weights"]["bytes_per_gpu"]  # type: ignore[index]
    assert w1 / GIB == pytest.approx(14.96, abs=0.01)  # vLLM PR #10511: 14.96 GiB
    assert w2 / GIB == pytest.approx(7.48, abs=0.01)   # and 7.48 GiB at -tp 2


def test_engine_0_25_1_logs_two_lines() -> None:
    """vllm 0.25.1 logs the size and the concurrency separately (kv_cache_utils.py:2146-2151)."""
    _, doc = _json(["--engine", "vllm==0.25.1", "--device", "H100", "--", "vllm", "serve",
                    "meta-llama/Llama-3.1-8B-Instruct"])
    log = doc["memory"]["log"]  # type: ignore[index]
    assert log[1].startswith("GPU KV cache size: ") and log[1].endswith(" tokens")
    assert log[2].startswith("Maximum concurrency for 131,072 tokens per request: ")


def test_text_report_shows_the_budget_and_the_refusal() -> None:
    code, out, _ = run_cli(["check", "--device", "H100", "--", "vllm", "serve",
                            "openai/gpt-oss-120b", "--gpu-memory-utilization", "0.95",
                            "--moe-backend", "marlin"])
    assert code == 1
    assert "Available KV cache memory:" in out and "estimate" in out
    assert "[MM002]" in out and "To serve at least one request" in out


def test_markdown_report_shows_the_budget() -> None:
    _, out, _ = run_cli(["check", "--format", "markdown", "--device", "H100", "--", "vllm",
                         "serve", "meta-llama/Llama-3.1-8B-Instruct"])
    assert "available for the KV cache" in out and "Available KV cache memory:" in out


# ---------------------------------------------------------------- the fit check itself


def test_format_gib_is_vllms_round() -> None:
    assert format_gib(2 * GIB) == "2.0"
    assert format_gib(int(1.7149 * GIB)) == "1.71"


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 8), block=st.sampled_from([16, 32, 64]),
       length=st.integers(1, 20000), available=st.integers(0, 1 << 30))
def test_estimated_max_len_is_the_longest_that_fits(layers: int, block: int, length: int,
                                                    available: int) -> None:
    spec = FullAttentionSpec(block_size=block, num_kv_heads=8, head_size=128, head_size_v=128,
                             kv_cache_dtype="auto", dtype_bytes=2)
    specs = [spec] * layers
    fit = kv_fit(specs, available_bytes=available, pool_block_bytes=0, max_model_len=length,
                 in_flight_tokens=8192)
    page = spec.page_size_bytes

    def needed(n: int) -> int:
        return layers * -(-n // block) * page

    if available <= 0:
        assert fit.outcome == "no_memory"
    elif needed(length) <= available:
        assert fit.outcome == "ok"
    else:
        assert fit.outcome == "too_long"
        best = fit.estimated_max_len
        assert best == 0 or needed(best) <= available
        assert best == length or needed(best + 1) > available


# ---------------------------------------------------------------- deployment files


@pytest.mark.parametrize(("body", "line"), [
    ("device: V100\ndtype: bfloat16\nlayer: {head_size: 128, num_heads: 32, num_kv_heads: 8}\n", 2),
    ("device: T4\nmodel: llama-3.1-8b\ndtype: bfloat16\nmax_model_len: 8192\n", 3),
])
def test_files_with_explicit_bfloat16_on_turing_or_volta_fail(tmp_path: object, body: str,
                                                              line: int) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "deploy.yaml"
    path.write_text(body)
    code, out, _ = run_cli(["check", str(path), "--format", "github"])
    assert code == 1 and "SU001" in out and f",line={line}," in out


def test_file_without_dtype_on_v100_is_not_refused(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "deploy.yaml"
    path.write_text("device: V100\nlayer: {head_size: 128, num_heads: 32, num_kv_heads: 8}\n")
    _, out, _ = run_cli(["check", str(path), "--format", "github"])
    assert "SU001" not in out


def test_file_max_model_len_and_memory_fields(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "deploy.yaml"
    path.write_text("device: H100\nmodel: gpt-oss-20b\nmax_model_len: 1048576\n"
                    "gpu_memory_utilization: 0.9\nmax_num_seqs: 128\n")
    code, out, _ = run_cli(["check", str(path), "--format", "json"])
    doc = json.loads(out)
    assert code == 1 and "SU002" in _codes(doc)
    assert doc["memory"]["inputs"]["max_num_seqs"] == 128
    assert doc["memory"]["inputs"]["gpu_memory_utilization"] == 0.9


def test_pipeline_parallelism_checks_each_stage() -> None:
    """Layers split across GPUs: each stage's budget holds its own layers (80 layers over
    2 stages, vLLM's get_pp_indices: tests/golden/test_pp_stages.py), 1/4 of each by TP."""
    code, doc = _json(["--device", "H100", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4", "-pp", "2"])
    assert code == 0 and doc["memory"]["pp_stage"] in (
        "pipeline stage holding layers 0-39 of 2 stages",
        "pipeline stage holding layers 40-79 of 2 stages")
    assert not any(c.startswith("MM") for c in _codes(doc))
