"""A Hugging Face id names a checkpoint: a quantized id (or a 16-bit re-release of a
quantized original) never resolves to a preset of another precision, and asks for its
config.json (exit 2, the command that fetches it); a config's ``quantization_config`` and
``--quantization`` change the weights as vLLM's quant methods store them
(tests/golden/test_quant_weights.py compares those with vLLM's own parameters)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.memory.profile import startup_profile
from selector.memory.weights import estimate_weights
from selector.models import load_model
from selector.models.presets import id_precision, match_preset, preset_dir
from tests.fuzz.test_config_fuzz import run_cli

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hf_configs"
GIB = 1024**3


@pytest.mark.parametrize(("model_id", "wanted", "preset"), [
    ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", "fp8", "llama-3.1-70b"),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8-dynamic", "fp8", "llama-3.1-70b"),
    ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "int4", "llama-3.1-70b"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "int4", "llama-3.1-8b"),
    ("nvidia/Llama-3.1-8B-Instruct-FP4", "nvfp4", "llama-3.1-8b"),
    ("unsloth/gpt-oss-20b-BF16", "16-bit", "gpt-oss-20b"),
])
def test_a_quantized_id_asks_for_its_config(model_id: str, wanted: str, preset: str) -> None:
    assert id_precision(model_id) == wanted
    assert match_preset(model_id) is None
    code, out, err = run_cli(["check", "--device", "H100", "--", "vllm", "serve", model_id])
    assert code == 2, (out, err)
    text = " ".join((out + err).split())
    assert f"stored in {wanted}" in text and repr(preset) in text
    assert f"huggingface-cli download {model_id} config.json --local-dir" in text
    with pytest.raises(InputError) as raised:
        load_model(model_id)
    assert raised.value.hint is not None and "huggingface-cli download" in raised.value.hint


@pytest.mark.parametrize(("model_id", "preset"), [
    ("openai/gpt-oss-20b", "gpt-oss-20b"),  # MXFP4, as the preset
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("unsloth/Llama-3.1-8B-Instruct-bf16", "llama-3.1-8b"),  # 16-bit, as the preset
    ("deepseek-ai/DeepSeek-R1-FP8", "deepseek-v3"),  # FP8 block, as the preset
])
def test_an_id_of_the_presets_precision_still_resolves(model_id: str, preset: str) -> None:
    assert match_preset(model_id) == preset


def _weights(raw: dict[str, object], quantization: str | None = None) -> float:
    path = preset_dir() / "llama-3.1-70b.json"
    facts = load_model(path)
    profile = startup_profile(load_catalog(), "vllm==0.33.0")
    estimate = estimate_weights(raw, layer_kinds=tuple(layer.kind for layer in facts.layers),
                                tp=1, dtype_bytes=2, cc=90, profile=profile,
                                quantization=quantization)
    return estimate.bytes_per_gpu / GIB


def test_the_fp8_llama_70b_is_not_the_bf16_presets_131_gib() -> None:
    """The FP8 checkpoint's config (llm-compressor's compressed-tensors FP8: channel
    scales, lm_head ignored) and --quantization fp8 on the bf16 one: every linear layer
    at one byte per weight, embedding and lm_head in bfloat16."""
    raw = json.loads((preset_dir() / "llama-3.1-70b.json").read_text(encoding="utf-8"))
    fp8 = {**raw, "quantization_config": {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True,
            "dynamic": False}, "input_activations": {"num_bits": 8, "type": "float",
                                                     "strategy": "token", "dynamic": True}}}}}
    bf16 = _weights(raw)
    assert round(bf16, 2) == 131.41
    vocab_bytes = 2 * 128256 * 8192 * 2 / GIB  # embedding + lm_head, bfloat16
    linear = (bf16 - vocab_bytes) / 2
    assert _weights(fp8) == pytest.approx(linear + vocab_bytes, rel=1e-9)
    assert _weights(raw, "fp8") == pytest.approx(linear + vocab_bytes, rel=1e-9)


def test_kimi_k25_int4_keeps_attention_shared_experts_and_dense_mlp_in_bf16() -> None:
    """Its compressed-tensors ignore list: lm_head, re:.*self_attn.*, re:.*shared_experts.*,
    re:.*mlp\\.(gate|up|gate_up|down)_proj.*; the routed experts in int4 with a bf16 scale
    per 32 values (4.5 bits)."""
    raw = json.loads((FIXTURES / "moonshotai--Kimi-K2.5.json").read_text(encoding="utf-8"))
    facts = load_model(FIXTURES / "moonshotai--Kimi-K2.5.json")
    profile = startup_profile(load_catalog(), "vllm==0.33.0")
    estimate = estimate_weights(raw, layer_kinds=tuple(layer.kind for layer in facts.layers),
                                tp=1, dtype_bytes=2, cc=90, profile=profile)
    bits = {part.name: part.bits for part in estimate.parts}
    assert bits["routed experts"] == 4.5
    for name in ("attention", "shared experts", "dense MLP", "embedding", "lm_head", "router"):
        assert bits[name] == 16.0, name


def test_gpt_oss_20b_mxfp4_and_its_bf16_release() -> None:
    """MXFP4: only the experts at 4.25 bits (modules_to_not_convert keeps attention, router,
    embeddings); the same shapes without quantization_config are 16-bit throughout."""
    raw = json.loads((FIXTURES / "openai--gpt-oss-20b.json").read_text(encoding="utf-8"))
    facts = load_model(FIXTURES / "openai--gpt-oss-20b.json")
    profile = startup_profile(load_catalog(), "vllm==0.33.0")
    kinds = tuple(layer.kind for layer in facts.layers)
    mxfp4 = estimate_weights(raw, layer_kinds=kinds, tp=1, dtype_bytes=2, cc=90, profile=profile)
    bf16_raw = {k: v for k, v in raw.items() if k != "quantization_config"}
    bf16 = estimate_weights(bf16_raw, layer_kinds=kinds, tp=1, dtype_bytes=2, cc=90,
                            profile=profile)
    assert {p.name: p.bits for p in mxfp4.parts}["routed experts"] == 4.25
    assert all(p.bits == 16.0 for p in bf16.parts)
    assert bf16.bytes_per_gpu > 3 * mxfp4.bytes_per_gpu // 2


def test_quantization_flag_reaches_the_memory_budget(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(
        (preset_dir() / "llama-3.1-8b.json").read_text(encoding="utf-8"), encoding="utf-8")
    argv = ["check", "--device", "L4", "--format", "json", "--", "vllm", "serve", str(folder),
            "--max-model-len", "4096"]
    plain = json.loads(run_cli(argv)[1])
    online = json.loads(run_cli([*argv, "--quantization", "fp8"])[1])

    def weights(doc: dict[str, object]) -> dict[str, object]:
        text = json.dumps(doc)
        start = text.index('"weights": {"bytes_per_gpu"')
        return json.loads(text[start + len('"weights": '):text.index("}]", start) + 3])

    assert weights(online)["quantization"] == "fp8" and weights(plain)["quantization"] is None
    assert weights(online)["bytes_per_gpu"] < weights(plain)["bytes_per_gpu"]


def test_the_qwen3_next_fp8_recipe_line_asks_for_the_fp8_config() -> None:
    """https://docs.vllm.ai/projects/recipes/en/latest/Qwen/Qwen3-Next.html (FP8 on SM100):
    the FP8 checkpoint is not the bf16 qwen3-next-80b-a3b preset."""
    line = ("VLLM_USE_FLASHINFER_MOE_FP8=1 VLLM_FLASHINFER_MOE_BACKEND=latency "
            "VLLM_USE_DEEP_GEMM=0 VLLM_USE_TRTLLM_ATTENTION=0 VLLM_ATTENTION_BACKEND=FLASH_ATTN "
            "vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 --tensor-parallel-size 4")
    code, out, err = run_cli(["check", "--device", "B200", "--", *line.split()])
    text = " ".join((out + err).split())
    assert code == 2
    assert "'qwen3-next-80b-a3b' of its architecture is stored in 16-bit" in text
    assert ("huggingface-cli download Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 config.json "
            "--local-dir ./Qwen3-Next-80B-A3B-Instruct-FP8") in text


@pytest.mark.parametrize(("model_id", "scheme"), [
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "fp8"),  # ModelOpt, hf_quant_config.json
    ("Qwen/Qwen3-32B-FP8", "fp8"),  # 128 x 128 blocks
    ("Qwen/Qwen3-30B-A3B-FP8", "fp8"),
    ("Qwen/Qwen3-235B-A22B-FP8", "fp8"),
    ("Qwen/Qwen3-32B-FP8-Static-PerTensor", "fp8"),  # ModelOpt quant_algo in config.json
    ("nvidia/DeepSeek-V3.2-NVFP4", "nvfp4"),
    ("nvidia/Qwen3-235B-A22B-NVFP4", "nvfp4"),
])
def test_a_recorded_quantized_id_uses_its_own_config(model_id: str, scheme: str) -> None:
    """schemas/models/checkpoints holds the real config.json (and hf_quant_config.json) of
    these ids: they resolve to it, in their own precision."""
    code, out, _ = run_cli(["check", "--device", "H200", "--format", "json", "--", "vllm",
                            "serve", model_id, "-tp", "8", "--max-model-len", "4096"])
    assert code in (0, 1), out
    text = json.dumps(json.loads(out))
    assert f'"quantization": "{scheme}"' in text
    assert "checkpoints" in load_model(model_id).source


def test_the_recorded_llama_70b_fp8_is_half_the_bf16_preset() -> None:
    """ModelOpt FP8 (exclude_modules: lm_head): every linear layer at one byte per weight."""
    from selector.memory.startup import raw_config

    fp8 = load_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    raw = raw_config(fp8)
    assert raw["quantization_config"]["quantization"]["quant_algo"] == "FP8"
    bf16 = _weights(json.loads((preset_dir() / "llama-3.1-70b.json").read_text(encoding="utf-8")))
    vocab_bytes = 2 * 128256 * 8192 * 2 / GIB
    assert _weights(dict(raw)) == pytest.approx((bf16 - vocab_bytes) / 2 + vocab_bytes, rel=1e-9)


def test_a_vl_awq_checkpoint_keeps_its_vision_tower_in_16_bit() -> None:
    """AutoAWQ's VLM layout (``modules_to_not_convert: [visual]``, matched as a substring by
    vLLM's AWQ config, auto_awq.py:288-300): the language model's linear layers at 4 bits
    plus a bfloat16 scale and a 4-bit zero per 128 values, the vision tower, embedding and
    lm_head in bfloat16."""
    path = FIXTURES / "edge" / "qwen2.5-vl-7b-shape.json"
    raw = {**json.loads(path.read_text(encoding="utf-8")), "quantization_config": {
        "bits": 4, "group_size": 128, "modules_to_not_convert": ["visual"], "quant_method": "awq",
        "version": "gemm", "zero_point": True}}
    facts = load_model(path)
    profile = startup_profile(load_catalog(), "vllm==0.33.0")
    estimate = estimate_weights(raw, layer_kinds=tuple(layer.kind for layer in facts.layers),
                                tp=1, dtype_bytes=2, cc=90, profile=profile)
    bits = {part.name: part.bits for part in estimate.parts}
    assert bits["attention"] == bits["dense MLP"] == 4 + (16 + 4) / 128
    assert bits["embedding"] == bits["lm_head"] == 16.0
    assert bits.get("vision tower", 16.0) == 16.0
