"""`attn-select check` on a synthetic 4-layer Dots3Note (one full layer, three sliding),
whose layers pin their own backends: on an H200 and a B200 the report names each layer's
backend as vLLM's modules name it (DOTS3_NOTE_PADDED_MLA_SPARSE on the full layer beside
its DEEPSEEK_V32_INDEXER K cache, TRITON_MLA on the sliding ones), its KV-cache groups and
block size, and start-up memory; each ``--attention-backend`` and the fp8 KV cache get
vLLM's answer (built with the name ignored, or refused in its words). The expected values
are vLLM's (``tests/golden/vllm_models/model_driven/vllm-<version>-dots3.jsonl.gz``,
``tools/model_driven_reference.py``)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.model_driven_cli import check_json, model_folder, tool_groups, vllm_groups

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "fixtures" / "hf_configs" / "model_driven" / "synthetic--Dots3NoteForCausalLM.json"
GOLDEN = ROOT / "tests" / "golden" / "vllm_models" / "model_driven"
DEVICES = {"H200": "9.0", "B200": "10.0"}
RELEASES = ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")


@cache
def _vllm(version: str) -> tuple[dict[str, Any], ...]:
    with gzip.open(GOLDEN / f"vllm-{version}-dots3.jsonl.gz", "rt", encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def _answer(version: str, capability: str, backend: str | None,
            kv_cache_dtype: str | None = None) -> dict[str, Any]:
    return next(a for a in _vllm(version) if a.get("capability") == capability
                and a.get("attention_backend") == backend and a.get("kv_cache_dtype") == kv_cache_dtype)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return model_folder(tmp_path_factory.mktemp("dots3"), "Dots3Note", CONFIG)


def _check(model_dir: str, device: str, *flags: str, engine: str = "vllm==0.33.0"
           ) -> tuple[int, dict[str, Any], str]:
    return check_json(model_dir, device, *flags, engine=engine)


_groups = vllm_groups


_tool_groups = tool_groups


def _built(answer: dict[str, Any]) -> dict[int, str]:
    """Each layer's attention backend as vLLM's modules name it (not the indexer's)."""
    return {r["index"]: r["backend"] for r in answer["layers"] if "indexer" not in r["name"]}


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("device", sorted(DEVICES))
def test_dots3_note_checks_as_vllm_builds_it(model_dir: str, device: str, version: str) -> None:
    answer = _answer(version, DEVICES[device], None)
    code, report, err = _check(model_dir, device, engine=f"vllm=={version}")
    assert code == 0, err
    assert report["valid"] is True
    selected = {i: layer["check"]["selected"] for layer in report["layers"] for i in layer["layers"]}
    assert selected == _built(answer) == {0: "DOTS3_NOTE_PADDED_MLA_SPARSE", 1: "TRITON_MLA",
                                          2: "TRITON_MLA", 3: "TRITON_MLA"}
    assert report["plan"]["block_size"]["block_size"] == answer["aligned"]["block_size"] == 64
    assert _tool_groups(report) == _groups(answer)
    assert len(report["plan"]["groups"]) == 4
    assert len(report["plan"]["entries"]) == sum(1 for r in answer["layers"] if r.get("spec"))
    if answer.get("kv_cache_layout"):
        assert report["plan"]["layout"]["layout"] == answer["kv_cache_layout"]
    assert report["memory"] is not None and report["memory"].get("issue") is None


def _runs() -> list[tuple[str, str, str | None, str | None]]:
    return sorted({(v, device, a.get("attention_backend"), a.get("kv_cache_dtype"))
                   for v in ("0.28.0", "0.33.0") for a in _vllm(v)
                   if a.get("attention_backend") or a.get("kv_cache_dtype")
                   for device, cc in DEVICES.items() if a["capability"] == cc},
                  key=str)


@pytest.mark.parametrize(("version", "device", "name", "kv_cache_dtype"), _runs())
def test_each_attention_backend_and_kv_dtype_gets_vllms_answer(
        model_dir: str, version: str, device: str, name: str | None, kv_cache_dtype: str | None
) -> None:
    """Refused by the platform's selection for the sparse MLA layer the full layer builds
    and discards (FLASHMLA: no sparse; FLASHINFER_MLA_SPARSE on SM90), or by the padded
    sparse impl for an fp8 cache, in vLLM's words (exit 1); else built as without the name,
    which the layers ignore (MD003)."""
    answer = _answer(version, DEVICES[device], name, kv_cache_dtype)
    flags = [*(["--attention-backend", name] if name else []),
             *(["--kv-cache-dtype", kv_cache_dtype] if kv_cache_dtype else [])]
    code, report, err = _check(model_dir, device, *flags, engine=f"vllm=={version}")
    if answer["status"] == "refused":
        assert code == 1, err
        errors = [layer["check"]["error"]["message"] for layer in report["layers"]]
        said = answer["error"].split(": ", 1)[1]
        assert errors and all(said in message for message in errors)
        return
    assert code == 0, err
    warnings = [w["code"] for layer in report["layers"] for w in layer["check"]["warnings"]]
    assert "MD003" in warnings
    assert _tool_groups(report) == _groups(answer)


@pytest.mark.parametrize("block_size", [16, 64, 128])
@pytest.mark.parametrize("device", sorted(DEVICES))
def test_a_block_size_given_gets_vllms_answer(model_dir: str, device: str, block_size: int) -> None:
    """``--block-size``: 16 is refused by the platform's selection for the discarded sparse
    MLA layer (no sparse MLA backend takes it, in vLLM's words); 64 and 128 are kept."""
    answer = next(a for a in _vllm("0.33.0") if a.get("capability") == DEVICES[device]
                  and a.get("requested_block_size") == block_size)
    code, report, err = _check(model_dir, device, "--block-size", str(block_size))
    if answer["status"] == "refused":
        assert code == 1, err
        said = answer["error"].split(": ", 1)[1]
        assert all(said in layer["check"]["error"]["message"] for layer in report["layers"])
        return
    assert code == 0, err
    assert report["plan"]["block_size"]["block_size"] == answer["aligned"]["block_size"] == block_size
    assert _tool_groups(report) == _groups(answer)
