"""`attn-select check` on Step5 (vLLM 0.33.0), whose layers pin their own backends: on an
H200 and a B200 the report names each layer's backend as vLLM builds it (STEP5_DSA on the
sparse_config's full-attention layers, the split-KV FLASH_ATTN elsewhere), the five
KV-cache groups and pages, and the memory budget; ``--attention-backend`` reaches no
layer; fp8 on the B200, a checkpoint without sparse_config and an SM120 GPU are refused in
vLLM's words. The expected values are vLLM's
(``tests/golden/vllm_models/model_driven/vllm-0.33.0-step5.jsonl.gz``,
``tools/model_driven_reference.py --gpu-runner``)."""

from __future__ import annotations

import gzip
import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.test_config_fuzz import run_cli
from tests.model_driven_cli import check_json, tool_groups, vllm_groups

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "hf_configs" / "model_driven"
GOLDEN = ROOT / "tests" / "golden" / "vllm_models" / "model_driven" / "vllm-0.33.0-step5.jsonl.gz"
DEVICES = {"H200": "9.0", "B200": "10.0"}


@cache
def _vllm() -> tuple[dict[str, Any], ...]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def _answer(config: str, capability: str, backend: str | None = None,
            kv_cache_dtype: str | None = None) -> dict[str, Any]:
    return next(a for a in _vllm() if a.get("config", "").endswith(f"/{config}")
                and a.get("capability") == capability and a.get("attention_backend") == backend
                and a.get("kv_cache_dtype") == kv_cache_dtype and not a.get("requested_block_size"))


def _model(tmp_path: Path, config: str) -> str:
    folder = tmp_path / config.removesuffix(".json")
    folder.mkdir()
    shutil.copy(FIXTURES / config, folder / "config.json")
    return str(folder)


def _check(model_dir: str, device: str, *flags: str) -> tuple[int, dict[str, Any], str]:
    return check_json(model_dir, device, *flags)


_groups = vllm_groups


_tool_groups = tool_groups


def _layer_backends(answer: dict[str, Any]) -> dict[int, str]:
    return {r["index"]: r["backend"] for r in answer["layers"] if r["module"] == "Attention"}


@pytest.mark.parametrize("config", ["synthetic--Step5ForCausalLM.json",
                                    "synthetic--Step5ForConditionalGeneration.json"])
@pytest.mark.parametrize("device", sorted(DEVICES))
def test_step5_checks_as_vllm_builds_it(tmp_path: Path, config: str, device: str) -> None:
    answer = _answer(config, DEVICES[device])
    code, report, err = _check(_model(tmp_path, config), device)
    assert code == 0, err
    assert report["valid"] is True
    have = {i: layer["check"]["selected"] for layer in report["layers"] for i in layer["layers"]}
    assert have == _layer_backends(answer)
    assert report["plan"]["block_size"]["block_size"] == answer["aligned"]["block_size"] == 16
    assert _tool_groups(report) == _groups(answer)
    assert len(report["plan"]["groups"]) == 5
    assert report["plan"]["layout"]["layout"] == answer["kv_cache_layout"] == "BLNHC"
    assert len(report["plan"]["entries"]) == len(answer["layers"]) == 12
    assert report["memory"] is not None and not report["startup_errors"]


@pytest.mark.parametrize("name", ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "STEP5_DSA"])
def test_an_attention_backend_given_reaches_no_layer(tmp_path: Path, name: str) -> None:
    answer = _answer("synthetic--Step5ForCausalLM.json", "10.0", name)
    assert answer["status"] == "ok"
    code, report, err = _check(_model(tmp_path, "synthetic--Step5ForCausalLM.json"), "B200",
                               "--attention-backend", name)
    assert code == 0, err
    have = {i: layer["check"]["selected"] for layer in report["layers"] for i in layer["layers"]}
    assert have == _layer_backends(answer)
    assert _tool_groups(report) == _groups(answer)
    warnings = {w["code"] for layer in report["layers"] for w in layer["check"]["warnings"]}
    assert ("MD003" in warnings) == (name != "STEP5_DSA")  # the layers' own choice stands


@pytest.mark.parametrize(("config", "device", "flags"), [
    ("synthetic--Step5ForCausalLM.json", "B200", ("--kv-cache-dtype", "fp8")),
    ("synthetic--Step5ForCausalLM-dense.json", "H200", ()),
])
def test_vllms_refusals_in_its_words(tmp_path: Path, config: str, device: str,
                                     flags: tuple[str, ...]) -> None:
    answer = _answer(config, DEVICES[device], None, "fp8" if flags else None)
    assert answer["status"] == "refused"
    code, report, _ = _check(_model(tmp_path, config), device, *flags)
    assert code == 1
    errors = [layer["check"]["error"]["message"] for layer in report["layers"]]
    assert errors and all(answer["error"] in message for message in errors)


def test_fp8_on_the_h200_halves_the_pages_as_vllm(tmp_path: Path) -> None:
    answer = _answer("synthetic--Step5ForCausalLM.json", "9.0", None, "fp8")
    code, report, err = _check(_model(tmp_path, "synthetic--Step5ForCausalLM.json"), "H200",
                               "--kv-cache-dtype", "fp8")
    assert code == 0, err
    assert _tool_groups(report) == _groups(answer)


def test_fp8_on_the_b200_depends_on_the_flash_attn_layers_heads(tmp_path: Path) -> None:
    """FlashAttention 4 stores fp8 on Blackwell for heads up to 128: sliding layers of
    attention_other_setting's head 128 build, where the head-192 ones were refused."""
    answer = _answer("synthetic--Step5ForCausalLM-other.json", "10.0", None, "fp8")
    assert answer["status"] == "ok"
    code, report, err = _check(_model(tmp_path, "synthetic--Step5ForCausalLM-other.json"), "B200",
                               "--kv-cache-dtype", "fp8")
    assert code == 0, err
    assert _tool_groups(report) == _groups(answer)


def test_explain_names_step5_dsa_as_the_models_choice(tmp_path: Path) -> None:
    """STEP5_DSA is an enum member only Step5's own layers build: ``explain`` says so (exit 2)."""
    deployment = tmp_path / "step5.yaml"
    deployment.write_text(f"device: H200\nmodel: {_model(tmp_path, 'synthetic--Step5ForCausalLM.json')}\n",
                          encoding="utf-8")
    code, _, err = run_cli(["explain", "STEP5_DSA", str(deployment), "--engine", "vllm==0.33.0"])
    assert code == 2
    assert "chosen by a model's own layer code (Step5ForCausalLM, Step5ForConditionalGeneration)" in err
