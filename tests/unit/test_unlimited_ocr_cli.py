"""`attn-select check` on Unlimited-OCR (a synthetic config with UnlimitedOCRConfig's
``rswa_window`` 128), whose DeepSeek-V2 layers vLLM builds as ``RSWAAttention`` with an
``RSWASpec`` (vllm/model_executor/models/deepseek_v2.py:208-218 in 0.33.0). On the H200 the
expected values are vLLM's recorded build (tests/golden/vllm_models/vllm-0.33.0-nbproc.jsonl.gz:
FLASH_ATTN on every layer, one group of block 16 and page 262144). On the B200 no build is
recorded; vLLM's selector is asked with ``use_rswa`` for every layer (selector.py:176-179)
and refuses FLASHINFER, the B200's first choice, with "R-SWA not supported" (backend.py:334-335;
the recorded selector answer of tests/unit/test_solver_rules.py), so FLASH_ATTN builds them;
the groups are the H200's (the page does not depend on the GPU)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.test_config_fuzz import run_cli
from tests.model_driven_cli import model_folder

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "fixtures" / "hf_configs" / "synthetic" / "UnlimitedOCRForCausalLM.json"
GOLDEN = ROOT / "tests" / "golden" / "vllm_models" / "vllm-0.33.0-nbproc.jsonl.gz"


def _answer() -> dict[str, Any]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as handle:
        answers = [json.loads(line) for line in handle if line.strip()]
    return next(a for a in answers if a["config"].endswith(CONFIG.name))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return model_folder(tmp_path_factory.mktemp("uocr"), "Unlimited-OCR", CONFIG)


@pytest.mark.parametrize("device", ["H200", "B200"])
def test_unlimited_ocr_checks_with_rswa_layers(model_dir: str, device: str) -> None:
    answer = _answer()
    assert answer["capability"] == "9.0"
    code, out, err = run_cli(["check", "--device", device, "--engine", "vllm==0.33.0",
                              "--format", "json", "--", "vllm", "serve", model_dir,
                              "--dtype", "bfloat16", "--max-model-len", "4096"])
    assert code == 0, err
    report = json.loads(out)
    assert report["valid"] is True
    assert {layer["check"]["selected"] for layer in report["layers"]} == \
        {r["backend"] for r in answer["layers"]} == {"FLASH_ATTN"}
    groups = sorted((g["manager_block_size"], *set(g["page_size_bytes"]), tuple(sorted(g["layer_indices"])))
                    for g in report["plan"]["groups"])
    assert {g["kind"] for g in report["plan"]["groups"]} == {"rswa"}
    assert {g["spec"] for g in answer["aligned"]["groups"]} == {"RSWASpec"}
    assert groups == sorted((g["block_size"], g["page_size_bytes"], tuple(g["layers"]))
                            for g in answer["aligned"]["groups"])
