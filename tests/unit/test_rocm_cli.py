"""ROCm as users see it: `check` of a Llama deployment on an MI300X gives vLLM's choice with
AITER off and on, a DeepSeek-V3 layer with 128 or 64 heads per rank gives vLLM's AITER-MLA
answer, a `vllm serve` line's VLLM_ROCM_* switches are read, `list devices` and `--device
all` hold the AMD devices, and `smoke` / `bench` refuse a ROCm deployment here (exit 4)
while `smoke --dry-run` states the ROCm kernel call. The expected selections are vLLM
0.33.0's own (``tests/golden/oracle/vllm-0.33.0/rocm-cases.jsonl.gz``: the named configs of
``tools/rocm_acceptance_cases.json``, recorded by ``tools/rocm_oracle_sample.py --cases``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.test_config_fuzz import run_cli

CASES = Path(__file__).parents[1] / "golden" / "oracle" / "vllm-0.33.0" / "rocm-cases.jsonl.gz"
ENGINE = ["--engine", "vllm==0.33.0"]


def _vllm(case: str) -> dict[str, Any]:
    with gzip.open(CASES, "rt", encoding="utf-8") as handle:
        for line in handle:
            answer: dict[str, Any] = json.loads(line)
            if answer["id"] == case:
                return answer
    raise AssertionError(f"{case} not recorded")


def _check(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run_cli(["check", str(path), "--format", "json", *ENGINE, *extra])
    document: dict[str, Any] = json.loads(out)
    return code, document


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("aiter", "case"), [(False, "llama-mi300x-aiter-off"),
                                             (True, "llama-mi300x-aiter-on")])
def test_llama_on_mi300x_is_vllms_choice_with_aiter_off_and_on(
        tmp_path: Path, aiter: bool, case: str) -> None:
    path = _write(tmp_path, "llama.yaml", "device: MI300X\nmodel: meta-llama/Llama-3.1-8B-Instruct\n"
                  + (f"environment:\n  rocm_use_aiter: {str(aiter).lower()}\n"))
    code, record = _check(path)
    assert code == 0, record
    assert {layer["check"]["selected"] for layer in record["layers"]} == {_vllm(case)["selected"]}
    hints = [f for f in record["findings"] if f["code"] == "RC009"]
    # AITER's unified attention is valid either way: the hint names vLLM's measurement
    assert hints and ("56945" if not aiter else "46596") in hints[0]["hint"]


def test_the_pinned_aiter_backend_is_vllms_answer(tmp_path: Path) -> None:
    path = _write(tmp_path, "llama.yaml", "device: MI300X\nmodel: meta-llama/Llama-3.1-8B-Instruct\n"
                  "attention_backend: ROCM_AITER_UNIFIED_ATTN\nenvironment:\n  rocm_use_aiter: true\n")
    code, record = _check(path)
    assert code == 0
    assert {layer["check"]["selected"] for layer in record["layers"]} == {
        _vllm("llama-mi300x-aiter-on-unified-pinned")["selected"]}
    assert not [f for f in record["findings"] if f["code"] == "RC009"]


@pytest.mark.parametrize("heads", [128, 64])
@pytest.mark.parametrize("aiter", [True, False])
def test_deepseek_v3_heads_per_rank_give_vllms_aiter_mla_answer(
        tmp_path: Path, heads: int, aiter: bool) -> None:
    tp = 128 // heads
    path = _write(tmp_path, "dsv3.yaml", (
        "device: MI300X\ndtype: bfloat16\n"
        f"environment:\n  rocm_use_aiter: {str(aiter).lower()}\n"
        f"parallel:\n  tensor_parallel_size: {tp}\n"
        "layer:\n  num_heads: 128\n"
        "  mla: {kv_lora_rank: 512, qk_rope_head_dim: 64, qk_nope_head_dim: 128, v_head_dim: 128}\n"))
    code, record = _check(path)
    vllm = _vllm(f"dsv3-mi300x-{heads}-heads-aiter-{'on' if aiter else 'off'}")
    assert code == 0, record
    assert record["selected"] == vllm["selected"]
    assert record["priority"] == vllm["priority"]
    assert {name: [r["message"] for r in record["backends"][name]["reasons"]]
            for name in vllm["backends"]} == vllm["backends"]


def test_aiter_mla_head_rule_of_an_older_release_is_a_startup_refusal(tmp_path: Path) -> None:
    """0.25.1's AiterMLAHelper.check_num_heads_validity: a multiple or a divisor of 16."""
    path = _write(tmp_path, "dsv3.yaml", (
        "device: MI300X\ndtype: bfloat16\nenvironment:\n  rocm_use_aiter: true\n"
        "layer:\n  num_heads: 20\n"
        "  mla: {kv_lora_rank: 512, qk_rope_head_dim: 64, qk_nope_head_dim: 128, v_head_dim: 128}\n"))
    code, out, _ = run_cli(["check", str(path), "--format", "json", "--engine", "vllm==0.25.1"])
    record = json.loads(out)
    assert code == 1
    assert record["selected"] == "ROCM_AITER_MLA"
    refusal = next(f for f in record["findings"] if f["code"] == "RC004")
    assert refusal["message"].startswith(
        "Aiter MLA requires that num_heads be multiples or divisors of 16, but provided 20")


def test_a_serve_line_sets_the_rocm_switches(tmp_path: Path) -> None:
    code, out, _ = run_cli(["check", "--device", "MI300X", "--format", "json", *ENGINE, "--",
                            "VLLM_ROCM_USE_AITER=1", "vllm", "serve",
                            "meta-llama/Llama-3.1-8B-Instruct"])
    record = json.loads(out)
    assert code == 0
    notes = {f["code"]: f["message"] for f in record["findings"]}
    assert notes.get("AS107", "").startswith("VLLM_ROCM_USE_AITER=1: on")
    assert any("46596" in f["hint"] for f in record["findings"] if f["code"] == "RC009")
    code, out, _ = run_cli(["check", "--device", "H100", "--format", "json", *ENGINE, "--",
                            "VLLM_ROCM_USE_AITER=1", "vllm", "serve",
                            "meta-llama/Llama-3.1-8B-Instruct"])
    assert code == 0
    assert any("has no effect on a cuda device" in f["message"]
               for f in json.loads(out)["findings"])


def test_list_devices_and_device_all_hold_the_amd_devices(tmp_path: Path) -> None:
    code, out, _ = run_cli(["list", "devices"])
    assert code == 0
    for name in ("MI300X", "MI355X", "Radeon PRO W7900", "RX 7900 XTX", "Strix Halo"):
        assert name in out
    path = _write(tmp_path, "layer.yaml", "device: H100\ndtype: bfloat16\nlayer:\n"
                  "  head_size: 128\n  num_heads: 32\n  num_kv_heads: 8\n")
    code, out, _ = run_cli(["check", str(path), "--device", "all", "--format", "json", *ENGINE])
    records = json.loads(out)
    records = records if isinstance(records, list) else records.get("records", [records])
    chosen = {r["device"]: r["selected"] for r in records}
    assert chosen["H100"] == "FLASH_ATTN" and chosen["MI300X"] == "ROCM_ATTN"
    assert chosen["Radeon AI PRO R9700"] == "ROCM_ATTN"


def test_smoke_and_bench_of_a_rocm_deployment_need_an_amd_gpu(tmp_path: Path) -> None:
    path = _write(tmp_path, "layer.yaml", "engine: vllm==0.33.0\ndevice: MI300X\n"
                  "dtype: bfloat16\nlayer:\n  head_size: 128\n  num_heads: 32\n  num_kv_heads: 8\n")
    for command in ("smoke", "bench"):
        code, out, err = run_cli([command, str(path)])
        assert code == 4, (command, out, err)
        assert "needs an AMD GPU" in out + err
    code, out, err = run_cli(["smoke", str(path), "--dry-run"])
    assert code == 0, err
    assert "chunked_prefill_paged_decode" in out
    assert "vllm/v1/attention/backends/rocm_attn.py:444" in out


def test_an_encoder_decoder_model_loses_rocm_attn_as_vllm_drops_it(tmp_path: Path) -> None:
    """vLLM 0.26.0+ removes ROCM_ATTN from the automatic list when model_config.attn_type
    is encoder_decoder (``is_encoder_decoder`` of the HF config, rocm.py get_valid_backends);
    a decoder-only model keeps it. A Llama config flagged ``is_encoder_decoder`` stands for
    such a model (vLLM's rule reads that flag alone)."""
    folder = tmp_path / "encdec"
    folder.mkdir()
    preset = Path(__file__).parents[2] / "schemas" / "models" / "llama-3.1-8b.json"
    (folder / "config.json").write_text(json.dumps({**json.loads(preset.read_text()),
                                                    "is_encoder_decoder": True}))
    path = _write(tmp_path, "encdec.yaml", "device: MI300X\nmodel: encdec/config.json\n")
    code, record = _check(path)
    assert code == 0, record
    assert {layer["check"]["selected"] for layer in record["layers"]} == {
        _vllm("encdec-mi300x-aiter-off")["selected"]}
    assert "ROCM_ATTN" not in record["layers"][0]["check"]["priority"]
    decoder = _write(tmp_path, "llama.yaml", "device: MI300X\nmodel: meta-llama/Llama-3.1-8B-Instruct\n")
    _, record = _check(decoder)
    assert {layer["check"]["selected"] for layer in record["layers"]} == {
        _vllm("decoder-model-mi300x")["selected"]}
    code, out, _ = run_cli(["check", str(path), "--format", "json", "--engine", "vllm==0.25.1"])
    assert code == 0 and "ROCM_ATTN" in json.loads(out)["layers"][0]["check"]["priority"]


@pytest.mark.parametrize(("aiter", "flash_attn", "case"), [
    (True, True, "dsv3-mi300x-prefill-aiter-on-flash-attn"),
    (False, True, "dsv3-mi300x-prefill-aiter-off-flash-attn"),
    (False, False, "dsv3-mi300x-prefill-aiter-off-no-flash-attn"),
])
def test_deepseek_v3_mla_prefill_on_mi300x_is_rocms_choice(
        tmp_path: Path, aiter: bool, flash_attn: bool, case: str) -> None:
    """RocmPlatform.get_mla_prefill_backend_cls: ROCM_AITER_FA with AITER on, else
    FlashAttention when the flash-attn package is installed, else vLLM's error (a dense
    MLA layer then fails to start)."""
    path = _write(tmp_path, "dsv3.yaml", (
        "device: MI300X\nmodel: deepseek-v3\nparallel:\n  tensor_parallel_size: 8\n"
        f"environment:\n  rocm_use_aiter: {str(aiter).lower()}\n"
        f"  rocm_flash_attn: {str(flash_attn).lower()}\n"))
    code, record = _check(path)
    vllm = _vllm(case)["mla_prefill"]
    prefill = next(layer["check"]["mla"]["prefill"] for layer in record["layers"]
                   if layer["kind"] == "mla_attention")
    assert prefill["priority"] == ["ROCM_AITER_FA", "FLASH_ATTN"]
    assert prefill["selected"] == vllm["selected"]
    assert prefill["config"] == vllm["config"]
    for name in ("ROCM_AITER_FA", "FLASH_ATTN"):
        assert [r["message"] for r in prefill["backends"][name]["reasons"]] == vllm["backends"][name]
    if vllm["error"] is None:
        assert code == 0 and prefill["error"] is None
    else:
        assert code == 1 and prefill["fatal"]
        assert prefill["error"]["message"] == vllm["error"].removeprefix("ValueError: ")


def test_the_environment_line_names_the_rocm_image_not_cudas_wheels() -> None:
    """The text report's environment line states what the ROCm facts' defaults assume
    (schemas/platforms.yaml), never the CUDA wheel's packages."""
    example = Path(__file__).parents[2] / "examples" / "llama-3.1-8b-h100.yaml"
    code, out, _ = run_cli(["check", str(example), "--device", "mi300x", *ENGINE])
    assert code == 0, out
    line = next(text for text in out.splitlines() if text.startswith("environment:"))
    assert "vLLM's ROCm image" in line and "VLLM_ROCM_USE_AITER off" in line, line
    assert "FlashInfer" not in line and "pinned wheels" not in line, line
    code, out, _ = run_cli(["check", str(example), "--device", "mi300x", "-v", *ENGINE])
    assert "defaults assume vLLM's ROCm image" in " ".join(out.split()), out


def test_a_cuda_backend_pinned_on_an_amd_gpu_is_refused_with_its_own_reasons(
        tmp_path: Path) -> None:
    """vLLM's ROCm platform validates a pinned backend alone: FlashInfer cannot be imported
    there (recorded: tests/golden/oracle/vllm-0.33.0/rocm-pinned.jsonl.gz), and the layer
    row names that reason (IM001), not the priority list's."""
    path = _write(tmp_path, "pinned.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\n"
                  "device: MI300X\nattention_backend: FLASHINFER\n")
    code, out, _ = run_cli(["check", str(path), *ENGINE])
    assert code == 1, out
    text = " ".join(out.split())
    assert "SE002: selected-backend-invalid (IM001)" in text, out
    assert ("Selected backend AttentionBackendEnum.FLASHINFER is not valid for this "
            "configuration. Reason: ['ImportError']") in text, out
