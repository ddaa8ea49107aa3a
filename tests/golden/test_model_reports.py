"""Golden whole-model reports: every preset on H100, B200 and RTX 5090.

The text report (groups, block sizes, layout, CUDA-graph mode, capacity) is compared
byte for byte; `pytest --update-goldens` rewrites the files after a deliberate change.
Hand-checked numbers for the models the issue names are asserted separately below.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fuzz.test_config_fuzz import run_cli
from tests.recorded import pinned

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "models").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "golden" / "models"


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_model_report_matches_golden(fixture: Path, update_goldens: bool) -> None:
    os.chdir(ROOT)
    relative = str(fixture.relative_to(ROOT))
    code, out, err = run_cli(pinned(["check", relative]))
    assert code in (0, 1), err
    golden = GOLDEN / f"{fixture.stem}.txt"
    if update_goldens:
        golden.write_text(out)
    assert golden.is_file(), f"missing golden {golden.name}: run pytest --update-goldens and review it"
    assert out == golden.read_text()


def _plan(name: str) -> dict:
    os.chdir(ROOT)
    code, out, err = run_cli(["check", f"tests/fixtures/models/{name}.yaml", "--format", "json"])
    assert code in (0, 1), err
    return json.loads(out)


def test_gpt_oss_20b_sinks_and_sliding_window_on_h100() -> None:
    doc = _plan("gpt-oss-20b@h100")
    kinds = {layer["kind"]: layer["check"]["selected"] for layer in doc["layers"]}
    assert kinds == {"sliding_window": "FLASH_ATTN", "full_attention": "FLASH_ATTN"}  # FA3: sinks on SM90
    groups = doc["plan"]["groups"]
    assert len(groups) == 2 and {g["kind"] for g in groups} == {"sliding_window", "full_attention"}
    # 8 KV heads x (64 + 64) x 2 bytes x 16 tokens = 32 KiB pages
    assert {g["page_size_bytes"][0] for g in groups} == {32768}


def test_gemma_3_27b_five_to_one_and_prefix_lm_on_h100() -> None:
    doc = _plan("gemma-3-27b@h100")
    assert {layer["kind"] for layer in doc["layers"]} == {"sliding_window", "full_attention"}
    # PrefixLM multimodal: FA3 cannot (FA004), FlashInfer has no mm-prefix -> Triton
    assert {layer["check"]["selected"] for layer in doc["layers"]} == {"TRITON_ATTN"}
    full = [g for g in doc["plan"]["groups"] if g["kind"] == "full_attention"]
    windowed = [g for g in doc["plan"]["groups"] if g["kind"] == "sliding_window"]
    # 62 layers: 10 global, 52 local; groups hold as many layers as the smallest bucket
    # (10), so the local layers split round-robin into ceil(52 / 10) = 6 groups
    assert (len(full), len(windowed)) == (1, 6)
    assert len(full[0]["layer_indices"]) == 10


def test_qwen3_next_page_unification_on_b200() -> None:
    doc = _plan("qwen3-next-80b-a3b@b200")
    decision = doc["plan"]["block_size"]
    assert decision["hybrid"] is not None and decision["block_size"] % 16 == 0
    assert any("Padding mamba page size" in m for m in decision["messages"])
    sizes = {g["page_size_bytes"][0] for g in doc["plan"]["groups"]}
    assert len(sizes) == 1  # GDN and full attention share one page size


def test_deepseek_v32_sparse_mla_on_h100_and_b200() -> None:
    h100 = _plan("deepseek-v3.2@h100")
    assert {layer["check"]["selected"] for layer in h100["layers"]} == {"FLASH_ATTN_MLA_SPARSE"}
    b200 = _plan("deepseek-v3.2@b200")
    # TP 8: 16 query heads per rank -> the FA4 sparse kernel leads the SM100 list
    assert {layer["check"]["selected"] for layer in b200["layers"]} == {"FLASH_ATTN_MLA_SPARSE_FA4"}
    assert b200["plan"]["block_size"]["block_size"] % 64 == 0


def test_jamba_mamba_padding_on_h100() -> None:
    doc = _plan("jamba-v0.1@h100")
    messages = doc["plan"]["block_size"]["messages"]
    assert any(m.startswith("Setting attention block size to") for m in messages)
    assert any(m.startswith("Padding mamba page size by") for m in messages)


@pytest.mark.parametrize("fixture", [f for f in FIXTURES if f.stem.endswith("@b200")],
                         ids=lambda f: f.stem)
def test_every_preset_checks_under_the_older_engine_too(fixture: Path) -> None:
    """vLLM 0.25.1 names layouts NHD / HND; the KV planner must still get 5-D names."""
    os.chdir(ROOT)
    code, out, err = run_cli(["check", str(fixture.relative_to(ROOT)), "--engine", "vllm==0.25.1",
                              "--format", "json"])
    assert code in (0, 1), err
    assert json.loads(out)["engine"] == "vllm==0.25.1"
