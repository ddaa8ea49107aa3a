"""The hybrid alignment as each release's platform code does it: the GDN prefill
kernel vLLM 0.33.0 resolves per device (``_resolve_gdn_prefill_backend``) and the
checkpoint alignment it declares in align mode, and the steps of
``_align_hybrid_block_size`` per release (the profiles' ``hybrid_alignment``).

vLLM's answer on SM90 is recorded by tools/vllm_model_reference.py
(tests/golden/test_vllm_model_agreement.py: 576 / 832 / 1088 / 2112); the
capability rules are read from vLLM 0.33.0's source (cited in GDN_ATTN.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.kv import align_hybrid_block_size, prefill_checkpoint_alignment
from selector.models import load_model
from tests.fuzz.test_config_fuzz import run_cli
from tests.unit.kv_stubs import FLASH_ATTN

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "fixtures" / "hf_configs"


@pytest.mark.parametrize(
    ("cc", "alignment"),
    [
        (80, None),  # Ampere: Triton/FLA, no checkpoints
        (89, None),
        (90, 64),  # Hopper: FlashInfer, no further constraint
        (100, 64),  # Blackwell SM10.x: head_k_dim 128 and CUDA 13 (the wheel's)
        (103, 64),
        (110, None),  # SM11.x: no FlashInfer GDN prefill
        (120, 64),  # SM12.x: head_k_dim 128 and CUDA 13
        (121, 64),
    ],
)
def test_gdn_prefill_checkpoints_per_capability(cc: int, alignment: int | None) -> None:
    engine = load_catalog().engine("vllm==0.33.0")
    model = load_model("qwen3-next-80b-a3b")
    assert prefill_checkpoint_alignment(model, engine, cc=cc) == alignment


def test_blackwell_needs_head_k_dim_128() -> None:
    engine = load_catalog().engine("vllm==0.33.0")
    model = load_model("qwen3-next-80b-a3b")
    narrow = model.model_copy(update={"layers": tuple(
        layer.model_copy(update={"ssm": layer.ssm.model_copy(update={"head_k_dim": 64})})
        if layer.ssm is not None else layer for layer in model.layers)})
    assert prefill_checkpoint_alignment(narrow, engine, cc=100) is None
    assert prefill_checkpoint_alignment(narrow, engine, cc=90) == 64


def test_only_the_qwen_gdn_mixer_declares_checkpoints() -> None:
    engine = load_catalog().engine("vllm==0.33.0")
    # Mamba-2 layers declare none: get_mamba_prefill_checkpoint_alignment is None
    nemotron = load_model(CONFIGS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json")
    assert prefill_checkpoint_alignment(nemotron, engine, cc=90) is None
    assert prefill_checkpoint_alignment(load_model("llama-3.1-8b"), engine, cc=90) is None


@pytest.mark.parametrize("release", ["0.25.1", "0.28.0", "0.31.0", "0.32.0"])
def test_releases_before_0_33_have_no_prefill_checkpoints(release: str) -> None:
    engine = load_catalog().engine(f"vllm=={release}")
    assert not engine.profile.hybrid_alignment.prefill_checkpoint
    assert prefill_checkpoint_alignment(load_model("qwen3-next-80b-a3b"), engine, cc=90) is None


def test_the_alignment_steps_per_release() -> None:
    """0.27.0 adds the MLA-hybrid 128 floor, 0.32.0 the LCM over the non-SSM backends,
    0.33.0 the prefill checkpoints (vllm/platforms/interface.py of each release)."""
    catalog = load_catalog()
    steps = {v: catalog.engine(f"vllm=={v}").profile.hybrid_alignment for v in (
        "0.25.1", "0.26.0", "0.27.0", "0.31.0", "0.32.0", "0.33.0")}
    assert [s.mla_min_block_size for s in steps.values()] == [None, None, 128, 128, 128, 128]
    assert [s.lcm_non_ssm_backends for s in steps.values()] == [False] * 4 + [True] * 2
    assert [s.prefill_checkpoint for s in steps.values()] == [False] * 5 + [True]
    common = {"first_backend": FLASH_ATTN, "backends": [FLASH_ATTN],
              "attention_bytes_per_token": 2048, "mamba_page_bytes": 1097728}
    # an MLA hybrid: 16 * ceil(1_097_728 / 32_768) = 544 before 0.27.0, 128 * 5 = 640 after
    assert align_hybrid_block_size(block_size=16, use_mla=True, mamba_cache_mode="none",
                                   mla_min_block_size=None, **common).block_size == 544  # type: ignore[arg-type]
    assert align_hybrid_block_size(block_size=16, use_mla=True, mamba_cache_mode="none",
                                   **common).block_size == 640  # type: ignore[arg-type]


@pytest.mark.parametrize(("engine", "block"), [("vllm==0.33.0", "576"), ("vllm==0.32.0", "544")])
def test_check_reports_the_aligned_block(tmp_path: Path, engine: str, block: str) -> None:
    deployment = tmp_path / "qwen3-next.yaml"
    deployment.write_text(f"engine: {engine}\nmodel: qwen3-next-80b-a3b\ndevice: H200\n"
                          "dtype: bfloat16\nmax_model_len: 8192\n")
    code, out, err = run_cli(["check", str(deployment), "-f", "json"])
    assert code in (0, 1), err
    assert f'"block_size": {block}' in out
    assert f"Setting attention block size to {block} tokens" in out
