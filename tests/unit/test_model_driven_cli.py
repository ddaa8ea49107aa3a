"""`attn-select check` on DeepSeek-V4-Flash, whose layers choose their own backend: on
8 x H200 and 8 x B200 the report names the backend vLLM's V4 layer selects, its KV-cache
groups and block sizes; each explicit ``--attention-backend`` gets vLLM's answer (built,
refused in its words, or ignored). The expected values are vLLM's
(``tests/golden/vllm_models/model_driven/``, ``tools/model_driven_reference.py``); the
model's caches hold one KV head replicated on every rank (``num_kv_heads=1,
max_tp_shards=1`` in vLLM's V4 specs), so TP 8 keeps the pages vLLM recorded at TP 1."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.test_config_fuzz import run_cli
from tests.model_driven_cli import check_json, model_folder, tool_groups, vllm_groups

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "fixtures" / "hf_configs" / "deepseek-ai--DeepSeek-V4-Flash.json"
GOLDEN = ROOT / "tests" / "golden" / "vllm_models" / "model_driven"
DEVICES = {"H200": "9.0", "B200": "10.0"}


@cache
def _vllm(version: str) -> tuple[dict[str, Any], ...]:
    with gzip.open(GOLDEN / f"vllm-{version}.jsonl.gz", "rt", encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def _answer(version: str, capability: str, backend: str | None,
            kv_cache_dtype: str | None = None, block_size: int | None = None) -> dict[str, Any]:
    return next(a for a in _vllm(version) if a.get("capability") == capability
                and a.get("attention_backend") == backend and a.get("kv_cache_dtype") == kv_cache_dtype
                and a.get("requested_block_size") == block_size)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return model_folder(tmp_path_factory.mktemp("dsv4"), "DeepSeek-V4-Flash", CONFIG)


def _check(model_dir: str, device: str, *flags: str, engine: str = "vllm==0.33.0"
           ) -> tuple[int, dict[str, Any], str]:
    return check_json(model_dir, device, "--tensor-parallel-size", "8", *flags, engine=engine)


_groups = vllm_groups


_tool_groups = tool_groups


@pytest.mark.parametrize("device", sorted(DEVICES))
def test_dsv4_flash_on_eight_gpus_checks_as_vllm_builds_it(model_dir: str, device: str) -> None:
    answer = _answer("0.33.0", DEVICES[device], None)
    code, report, err = _check(model_dir, device)
    assert code == 0, err
    assert report["valid"] is True
    selected = {layer["check"]["selected"] for layer in report["layers"]}
    built = {r["backend"] for r in answer["layers"] if r["module"].endswith("Attention") and r.get("backend")}
    assert selected == built == {"FLASHMLA_SPARSE_DSV4"}
    assert sorted(i for layer in report["layers"] for i in layer["layers"]) == list(range(43))
    assert report["plan"]["block_size"]["block_size"] == answer["aligned"]["block_size"] == 256
    assert _tool_groups(report) == _groups(answer)
    assert {g["block_size"] for g in answer["aligned"]["groups"]} == {4, 8, 64, 256}
    assert report["plan"]["layout"]["layout"] == answer["kv_cache_layout"]
    assert len(report["plan"]["entries"]) == sum(1 for r in answer["layers"] if r.get("spec"))


def _names() -> list[str]:
    return sorted({str(a["attention_backend"]) for a in _vllm("0.33.0") if a.get("attention_backend")})


@pytest.mark.parametrize("name", _names())
def test_each_attention_backend_gets_vllms_answer(model_dir: str, name: str) -> None:
    """Built with the backend the layers then name (a name the layer code does not map is
    ignored, with a warning), or refused with vLLM's own text (exit 1)."""
    answer = _answer("0.33.0", "10.0", name)
    code, report, err = _check(model_dir, "B200", "--attention-backend", name)
    if answer["status"] == "refused":
        assert code == 1, err
        errors = [layer["check"]["error"]["message"] for layer in report["layers"]]
        assert errors and all(answer["error"] in message for message in errors)
        return
    assert code == 0, err
    built = {r["backend"] for r in answer["layers"] if r["module"].endswith("Attention") and r.get("backend")}
    assert {layer["check"]["selected"] for layer in report["layers"]} == built
    warnings = [w["code"] for layer in report["layers"] for w in layer["check"]["warnings"]]
    if name in built:
        assert "MD003" not in warnings
    elif name.endswith(("_DSV41", "_MSA", "MINIMAX_M3_SPARSE")) or name.startswith("ROCM_"):
        assert "MD003" in warnings  # another model's (or platform's) backend: ignored
    assert _tool_groups(report) == _groups(answer)


@pytest.mark.parametrize("block_size", [64, 256])
def test_a_block_size_given_is_kept_as_vllm_keeps_it(model_dir: str, block_size: int) -> None:
    """``--block-size``: vLLM keeps the user's block for the compressed caches (phase 1 of
    ``update_block_size_for_backend`` is skipped); the other caches keep their own."""
    answer = _answer("0.33.0", "10.0", None, block_size=block_size)
    code, report, err = _check(model_dir, "B200", "--block-size", str(block_size))
    assert code == 0, err
    assert report["plan"]["block_size"]["block_size"] == answer["aligned"]["block_size"]
    assert _tool_groups(report) == _groups(answer)


def test_the_kv_cache_dtype_refusal_of_an_older_release_is_vllms(model_dir: str) -> None:
    """0.25.1's packed layout asserts an fp8 KV cache: the default refused in vLLM's words,
    ``--kv-cache-dtype fp8`` built (its own grouping, pages padded to the MLA pages)."""
    refused = _answer("0.25.1", "9.0", None)
    code, report, _ = _check(model_dir, "H200", engine="vllm==0.25.1")
    assert code == 1 and refused["status"] == "refused"
    assert all(refused["error"] in layer["check"]["error"]["message"] for layer in report["layers"])
    built = _answer("0.25.1", "9.0", None, "fp8")
    code, report, err = _check(model_dir, "H200", "--kv-cache-dtype", "fp8", engine="vllm==0.25.1")
    assert code == 0, err
    assert _tool_groups(report) == _groups(built)


def test_explain_names_a_model_driven_backend_as_the_models_choice(model_dir: str,
                                                                    tmp_path: Path) -> None:
    """``explain`` traces the platform's selector, which never sees these layers: naming a
    model-driven backend is bad input that says which model chooses it (exit 2)."""
    deployment = tmp_path / "dsv4.yaml"
    deployment.write_text(f"device: H200\nmodel: {model_dir}\n", encoding="utf-8")
    code, _, err = run_cli(["explain", "FLASHMLA_SPARSE_DSV4", str(deployment),
                            "--engine", "vllm==0.33.0"])
    assert code == 2
    assert ("chosen by a model's own layer code (DeepseekV4ForCausalLM, "
            "DeepseekV4ForConditionalGeneration)") in err
