"""`vllm serve` command lines -> deployments: real command lines from public vLLM
issues and docs (each cited), then the flag forms, errors and notes one by one."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.inputs.serve import ServeCommand, device_ref, is_serve_command, parse_serve_command
from selector.models.presets import preset_dir
from selector.schema.request import DeviceRef

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serve"


def parse(line: str, *, device: str = "H100", model: str | None = None,
          environ: dict[str, str] | None = None) -> ServeCommand:
    return parse_serve_command(shlex.split(line), device=device, catalog=load_catalog(),
                               model=model, environ=environ)


def codes(command: ServeCommand, level: str | None = None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for note in command.notes:
        if level is None or note.level == level:
            out.setdefault(note.code, []).append(note.flag)
    return out


# ---------------------------------------------------------------- real command lines

REAL: list[dict[str, Any]] = [
    {   # https://github.com/vllm-project/vllm/pull/14221 (description, "Before")
        "id": "vllm-pr-14221-llama-fp8-kv",
        "line": "VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-8B-Instruct --port 9000 "
                "--kv-cache-dtype fp8",
        "model": "llama-3.1-8b",
        "expect": {"kv_cache_dtype": "fp8", "dtype": "bfloat16", "tp": 1},
        "notes": {"AS101": ["VLLM_USE_V1"]},
    },
    {   # https://docs.vllm.ai/projects/recipes/en/latest/Qwen/Qwen3-Next.html ("Basic Multi-GPU Setup")
        "id": "vllm-recipe-qwen3-next",
        "line": "vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --tensor-parallel-size 4 "
                "--served-model-name qwen3-next --enable-prefix-caching",
        "model": "qwen3-next-80b-a3b",
        "expect": {"tp": 4, "enable_prefix_caching": True},
    },
    {   # https://github.com/vllm-project/vllm/pull/33884 (Test Plan)
        "id": "vllm-pr-33884-dsv32-nixl",
        "line": "vllm serve --port=35496 --gpu-memory-utilization=0.85 --kv-cache-dtype=fp8 "
                "--tokenizer-mode=deepseek_v32 --no-enable-expert-parallel --enable-sleep-mode "
                "--model /root/workspaces/models/DeepSeek-V3.2-NVFP4 --kv-transfer-config "
                "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\","
                "\"kv_buffer_device\":\"cuda\"}' -tp 2 -dp 2 -dpl 2 -dpa 10.0.8.12 -dpr 0",
        # a DeepSeek-V3.2-NVFP4 folder: the recorded config.json of nvidia/DeepSeek-V3.2-NVFP4
        # (schemas/models/checkpoints), not the FP8 deepseek-v3.2 preset
        "model": str(preset_dir() / "checkpoints" / "nvidia--DeepSeek-V3.2-NVFP4"),
        "expect": {"kv_cache_dtype": "fp8", "tp": 2, "gpu_memory_utilization": 0.85,
                   "kv_connector": "NixlConnector"},
    },
    {   # https://github.com/vllm-project/vllm/issues/31480
        "id": "vllm-issue-31480-dsv32-tp8",
        "line": "vllm serve /root/autodl-tmp/models/DeepSeek-V3.2 --tensor-parallel-size 8 "
                "--gpu-memory-utilization 0.9 --max-model-len 512 --port 11434 "
                "--served-model-name DeepSeek-V3.2 --trust-remote-code --enable-expert-parallel",
        "model": "deepseek-v3.2",
        "expect": {"tp": 8, "max_model_len": 512, "gpu_memory_utilization": 0.9},
    },
    {   # https://github.com/vllm-project/vllm/issues/30919 (repro command)
        "id": "vllm-issue-30919-gpt-oss-120b-api-server",
        "line": "python3 -m vllm.entrypoints.openai.api_server --host 0.0.0.0 --port 8087 "
                "--model openai/gpt-oss-120b --tokenizer openai/gpt-oss-120b --dtype auto "
                "--kv-cache-dtype fp8 --tensor-parallel-size 8 --pipeline-parallel-size 1 "
                "--data-parallel-size 1 --swap-space 16 --max-num-seqs 1024 --trust-remote-code "
                "--max-model-len 2058 --gpu-memory-utilization 0.9 --max-num-batched-tokens 8192 "
                "--no-enable-prefix-caching --async-scheduling --stream-interval 20 "
                "--compilation_config.pass_config.fuse_allreduce_rms true "
                "--compilation_config.pass_config.eliminate_noops true "
                "--compilation_config.max_cudagraph_capture_size 2048",
        "model": "gpt-oss-120b",
        "expect": {"kv_cache_dtype": "fp8", "tp": 8, "max_model_len": 2058,
                   "enable_prefix_caching": False, "dtype": "bfloat16",
                   "cudagraph_mode": "FULL_AND_PIECEWISE"},
    },
    {   # https://github.com/vllm-project/vllm/issues/7456 (removed flags)
        "id": "vllm-issue-7456-removed-spec-flags",
        "line": "vllm serve /models/Meta-Llama-3.1-405B-Instruct -tp 8 -pp 2 "
                "--speculative-model /models/Meta-Llama-3.1-8B-Instruct --use-v2-block-manager "
                "--num-speculative-tokens 5",
        "override": str(FIXTURES / "llama-3.1-405b"),
        "model": str(FIXTURES / "llama-3.1-405b"),
        "expect": {"tp": 8, "num_speculative_tokens": 0},
        "errors": {"SU004": ["--speculative-model", "--use-v2-block-manager",
                             "--num-speculative-tokens"]},
    },
    {   # https://docs.vllm.ai/en/latest/design/optimization_levels/ ("CLI usage")
        "id": "vllm-docs-optimization-level-O1",
        "line": "vllm serve RedHatAI/Llama-3.2-1B-FP8 -O1",
        "override": str(FIXTURES / "llama-3.2-1b"),
        "model": str(FIXTURES / "llama-3.2-1b"),
        "expect": {"cudagraph_mode": "PIECEWISE"},
    },
    {   # https://github.com/vllm-project/vllm/issues/12256 (DeepSeek-R1, TP 32; the issue's
        # line breaks removed). DeepSeek-R1 has DeepSeek-V3's architecture (vLLM's recipe:
        # https://docs.vllm.ai/projects/recipes/en/latest/DeepSeek/DeepSeek-V3.html).
        "id": "vllm-issue-12256-deepseek-r1-tp32",
        "line": "RAY_IGNORE_UNHANDLED_ERRORS=1 NCCL_P2P_LEVEL=NVL NCCL_IB_CUDA_SUPPORT=1 "
                "NCCL_NET_GDR_LEVEL=2 NCCL_IB_DISABLE=0 NCCL_IB_HCA=mlx5 NCCL_DEBUG=INFO "
                "vllm serve /app/DeepSeek-R1 --served-model-name \"deepseek-reasoner-1212\" "
                "--trust-remote-code --host \"0.0.0.0\" --port 7860 --max-model-len 65536 "
                "--gpu-memory-utilization 0.9 --tensor-parallel-size 32 --enable-reasoning "
                "--reasoning-parser deepseek_r1 --max_num_batched_tokens 32768 --enforce-eager "
                "--quantization fp8 --max-num-seqs 128 --pipeline-parallel-size 1 "
                "--enable-prefix-caching --enable-chunked-prefill --num-speculative-tokens 1",
        "override": "deepseek-v3",
        "model": "deepseek-v3",
        "expect": {"tp": 32, "cudagraph_mode": "NONE", "max_model_len": 65536,
                   "enable_prefix_caching": True, "num_speculative_tokens": 0},
        "errors": {"SU004": ["--num-speculative-tokens"]},
    },
    {   # https://github.com/vllm-project/vllm/issues/18888
        "id": "vllm-issue-18888-deepseek-r1-fp8-kv",
        "line": "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 NCCL_SOCKET_IFNAME=bond0 "
                "GLOO_SOCKET_IFNAME=bond0 VLLM_USE_V1=1 VLLM_USE_MODELSCOPE=true vllm serve "
                "/data/models/huggingface.co/deepseek-ai/DeepSeek-R1/DeepSeek-R1-Hzz1 "
                "--served-model-name deepseek-r1 --gpu-memory-utilization 0.8 "
                "--tensor-parallel-size 8 --trust-remote-code --enable-chunked-prefill --port 8000 "
                "--kv-cache-dtype fp8 --enable-expert-parallel",
        "override": "deepseek-v3",
        "model": "deepseek-v3",
        "expect": {"tp": 8, "kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.8},
        "notes": {"AS101": ["VLLM_USE_V1"]},
    },
    {   # https://github.com/vllm-project/vllm/issues/13074 (comment by crazycen)
        "id": "vllm-issue-13074-deepseek-r1-eager",
        "line": "vllm serve /app/models/deepseek-ai/DeepSeek-R1-0528 --tensor-parallel-size 8 "
                "--max-model-len 16384 --port 8102 --trust-remote-code --served-model-name "
                "DeepSeek-R1-0528 --enable-chunked-prefill --max-num-batched-tokens 2048 "
                "--gpu-memory-utilization 0.95 --enforce-eager --dtype bfloat16 --quantization None",
        "override": "deepseek-v3",
        "model": "deepseek-v3",
        "expect": {"tp": 8, "cudagraph_mode": "NONE", "dtype": "bfloat16",
                   "max_model_len": 16384, "gpu_memory_utilization": 0.95},
    },
]


def _actual(command: ServeCommand) -> dict[str, Any]:
    d = command.deployment
    return {
        "kv_cache_dtype": d.kv_cache_dtype, "dtype": d.dtype,
        "tp": d.parallel.tensor_parallel_size, "dcp": d.parallel.decode_context_parallel_size,
        "attention_backend": d.attention_backend,
        "use_trtllm_attention": d.attention_config.use_trtllm_attention,
        "enable_prefix_caching": d.enable_prefix_caching,
        "max_model_len": d.max_model_len, "gpu_memory_utilization": d.gpu_memory_utilization,
        "kv_connector": d.kv_connector.name if d.kv_connector else None,
        # the command line's mode, else the engine's default (defaults.yaml)
        "cudagraph_mode": d.cudagraph_mode
        or load_catalog().engine_defaults(d.engine).cudagraph_mode.value,
        "num_speculative_tokens": d.speculative.num_speculative_tokens,
    }


@pytest.mark.parametrize("case", REAL, ids=[c["id"] for c in REAL])
def test_real_command_lines_parse_to_the_right_request(case: dict[str, Any]) -> None:
    command = parse(case["line"], model=case.get("override"))
    assert command.deployment.model == case["model"] or \
        command.deployment.model == str(Path(case["model"]) / "config.json")
    actual = _actual(command)
    for key, value in case["expect"].items():
        assert actual[key] == value, key
    for code, flags in case.get("warnings", {}).items():
        assert sorted(codes(command, "warning").get(code, [])) == sorted(flags)
    for code, flags in case.get("errors", {}).items():  # vLLM refuses these flags
        assert sorted(codes(command, "error").get(code, [])) == sorted(flags)
    for code, flags in case.get("notes", {}).items():
        assert sorted(codes(command).get(code, [])) == sorted(flags)
    hints = [n.hint for n in command.notes]
    for hint in case.get("hints", []):
        assert hint in hints
    # every real command line is a valid deployment that the checker can take
    assert command.model_facts.num_layers > 0
    assert command.deployment.device == "H100"


def test_at_least_ten_real_command_lines() -> None:
    assert len(REAL) >= 10
    assert all(case["line"].split()[0] for case in REAL)


# ---------------------------------------------------------------- flags one by one


def test_attention_backend_and_config_forms() -> None:
    base = "vllm serve llama-3.1-8b"
    assert parse(f"{base} --attention-backend flashinfer").deployment.attention_backend \
        == "FLASHINFER"
    assert parse(f"{base} --attention-backend=auto").deployment.attention_backend is None
    assert parse(f"{base} -ac.backend TRITON_ATTN").deployment.attention_backend == "TRITON_ATTN"
    command = parse(f"{base} --attention-config "
                    "'{\"backend\": \"FLASH_ATTN\", \"flash_attn_version\": 2}'")
    assert command.deployment.attention_backend == "FLASH_ATTN"
    assert command.deployment.attention_config.flash_attn_version == 2
    config = parse(f"{base} --attention-config.flash_attn_version=4 "
                   "-ac.use_trtllm_attention=false -ac.use_non_causal true"
                   ).deployment.attention_config
    assert (config.flash_attn_version, config.use_trtllm_attention, config.use_non_causal) \
        == (4, False, True)
    per_kind = parse(f"{base} -ac.backend_per_kind "
                     "'{\"sliding_window\": \"triton_attn\"}'").deployment.attention_config
    assert per_kind.backend_per_kind == {"sliding_window": "TRITON_ATTN"}


def test_backend_flags_are_mutually_exclusive_as_in_vllm() -> None:
    with pytest.raises(InputError) as info:
        parse("vllm serve llama-3.1-8b --attention-backend FLASH_ATTN -ac.backend FLASHINFER")
    assert "attention_backend and attention_config.backend are mutually exclusive" \
        in info.value.message
    assert info.value.field == "--attention-backend"


@pytest.mark.parametrize(("line", "flag", "words"), [
    ("--attention-backend FLASH_ATN", "--attention-backend", "did you mean"),
    ("--kv-cache-dtype fp9", "--kv-cache-dtype", "unknown KV-cache dtype"),
    ("--dtype bf16", "--dtype", "unknown dtype"),
    ("--block-size sixteen", "--block-size", "expected an integer"),
    ("--block-size 0", "--block-size", "out of range"),
    ("-tp 0", "--tensor-parallel-size", "out of range"),
    ("-dcp x", "--decode-context-parallel-size", "expected an integer"),
    ("-ac.flash_attn_version=5", "--attention-config.flash_attn_version", "valid: 2, 3, 4"),
    ("-ac.use_trtllm_attention=maybe", "--attention-config.use_trtllm_attention",
     "expected true or false"),
    ("--attention-config '{bad'", "--attention-config", "not valid JSON"),
    ("--speculative-config '{\"num_speculative_tokens\": -1}'",
     "--speculative-config.num_speculative_tokens", "expected an integer"),
    ("-cc.cudagraph_mode=ALWAYS", "--compilation-config.cudagraph_mode", "unknown CUDA-graph"),
    ("-O7", "--optimization-level", "out of range"),
    ("--kv-transfer-config '{\"kv_role\": \"kv_both\"}'", "--kv-transfer-config.kv_connector",
     "missing the connector"),
    ("--max-model-len lots", "--max-model-len", "expected a token count"),
    ("--gpu-memory-utilization 1.5", "--gpu-memory-utilization", "not in (0, 1]"),
    ("--hf-overrides '[1]'", "--hf-overrides", "expected a JSON object"),
    ("--block-size", "--block-size", "expected a value"),
])
def test_bad_values_are_input_errors_naming_the_flag(line: str, flag: str, words: str) -> None:
    with pytest.raises(InputError) as info:
        parse(f"vllm serve llama-3.1-8b {line}")
    assert info.value.field == flag
    assert words in info.value.render()
    assert info.value.exit_code == 2


def test_settings_that_change_selection() -> None:
    command = parse("vllm serve llama-3.1-8b --block-size 32 --kv-cache-dtype fp8_e4m3 "
                    "--dtype half -dcp 2 --prefill-context-parallel-size 2 "
                    "--speculative-config '{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}' "
                    "-cc '{\"cudagraph_mode\": \"piecewise\"}' --max-model-len 32k")
    d = command.deployment
    assert (d.block_size, d.kv_cache_dtype, d.dtype) == (32, "fp8_e4m3", "float16")
    assert (d.parallel.decode_context_parallel_size, d.parallel.prefill_context_parallel_size) \
        == (2, 2)
    assert d.speculative.num_speculative_tokens == 3
    assert d.cudagraph_mode == "PIECEWISE"
    assert d.max_model_len == 32000
    assert parse("vllm serve llama-3.1-8b --max-model-len 32K").deployment.max_model_len == 32768
    assert parse("vllm serve llama-3.1-8b -O0").deployment.cudagraph_mode == "NONE"
    zero = parse("vllm serve llama-3.1-8b -cc.mode=0")
    assert zero.deployment.cudagraph_mode == "NONE" and zero.kv_options["vllm_compile"] is False
    assert parse("vllm serve llama-3.1-8b -O 3").deployment.cudagraph_mode == "FULL_AND_PIECEWISE"


def test_hf_overrides_change_the_model_facts() -> None:
    plain = parse("vllm serve gpt-oss-20b")
    assert any(layer.sliding_window for layer in plain.model_facts.layers)
    overridden = parse("vllm serve gpt-oss-20b --hf-overrides '{\"sliding_window\": 256}'")
    assert {layer.sliding_window for layer in overridden.model_facts.layers} >= {256}
    assert "AS107" in codes(overridden)
    no_window = parse("vllm serve gpt-oss-20b --disable-sliding-window")
    assert not any(layer.sliding_window for layer in no_window.model_facts.layers)


def test_unknown_flags_are_vllms_refusal_and_flags_not_modelled_are_named() -> None:
    command = parse("vllm serve --trust-remote-code llama-3.1-8b --frobnicate 3 --new-switch "
                    "--max-num-seqs 8 --cpu-offload-gb 10 --port 8000")
    assert command.model_source == "llama-3.1-8b"
    refused = [n for n in command.notes if n.code == "SE005"]
    assert [(n.level, n.message) for n in refused] == [
        ("error", "unrecognized arguments: --frobnicate 3 --new-switch")]
    assert "AS103" not in codes(command)
    named = [n.message for n in command.notes if n.code == "AS104"]
    assert any("--trust-remote-code" in m and "--port" in m for m in named), named
    # modelled flags are not named: --max-num-seqs, --cpu-offload-gb (the memory table)
    assert not any("--max-num-seqs" in m or "--cpu-offload-gb" in m for m in named)


def test_environment_variables_from_the_process_count_too() -> None:
    command = parse("vllm serve llama-3.1-8b",
                    environ={"VLLM_ATTENTION_BACKEND": "TRITON_ATTN_VLLM_V1", "HOME": "/root",
                             "VLLM_BATCH_INVARIANT": "1"})
    warning = next(n for n in command.notes if n.flag == "VLLM_ATTENTION_BACKEND")
    assert warning.level == "warning" and "has no effect" in warning.message
    assert warning.hint == "use --attention-backend TRITON_ATTN"
    assert command.deployment.attention_backend is None
    assert command.deployment.batch_invariant is True
    assert "HOME" not in command.environment


def test_model_resolution() -> None:
    assert parse("vllm serve meta-llama/Llama-3.1-8B-Instruct").model_source == "llama-3.1-8b"
    assert parse("vllm serve google/gemma-3-27b-it").model_source == "gemma-3-27b"
    local = parse(f"vllm serve {FIXTURES / 'llama-3.2-1b'}")
    assert local.deployment.model == str(FIXTURES / "llama-3.2-1b" / "config.json")
    with pytest.raises(InputError) as info:
        parse("vllm serve someone/Unknown-Model-7B")
    assert info.value.field == "MODEL" and "presets:" in (info.value.hint or "")
    with pytest.raises(InputError):
        parse("vllm serve")


def test_command_shapes() -> None:
    assert is_serve_command(["vllm", "serve", "x"])
    assert is_serve_command(["A=1", "vllm", "serve", "x"])
    assert is_serve_command(["python3", "-m", "vllm.entrypoints.openai.api_server"])
    assert not is_serve_command(["examples/llama-3.1-8b-h100.yaml"])
    with pytest.raises(InputError) as info:
        parse("vllm bench latency --model llama-3.1-8b")
    assert "only `vllm serve`" in info.value.message


def test_devices() -> None:
    assert device_ref("9.0") == DeviceRef(capability="9.0")
    assert device_ref("sm_12.0") == DeviceRef(capability="12.0")
    assert device_ref("H100") == "H100"
    command = parse("vllm serve llama-3.1-8b")
    on_t4 = command.for_device("T4", load_catalog())
    assert on_t4.deployment.dtype == "float16" and on_t4.deployment.device == "T4"
    assert command.for_device("B200", load_catalog()).deployment.dtype == "bfloat16"
