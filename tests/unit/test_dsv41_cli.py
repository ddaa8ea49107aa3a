"""`attn-select check` on DeepSeek-V4.1 (a synthetic 40-layer config), whose layers choose
their own backend: on 8 x H200 and 8 x B200 the report names the backend vLLM's V4.1 layer
selects, its KV-cache groups and block sizes; each explicit ``--attention-backend`` gets
vLLM's answer (built, refused in its words, or ignored with a warning). The expected
values are vLLM's (``tests/golden/vllm_models/model_driven/vllm-0.33.0-dsv41*.jsonl.gz``,
``tools/model_driven_reference.py``): on the H200 the CPU reference's answers, on the B200
those recorded as on a GPU whose FlashMLA build has the mega-attention ops (``--mega-ops``,
which the deployment's probe takes by default), where the default is
FLASHMLA_MEGA_ATTN_DSV41 at TP 8 as vLLM's ``is_available_for`` answers (the
``mega_available_by_tp`` records). The caches hold one KV head replicated on every rank, so
TP 8 keeps the pages vLLM recorded at TP 1."""

from __future__ import annotations

import gzip
import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.model_driven_cli import check_json, model_folder, tool_groups, vllm_groups

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "fixtures" / "hf_configs" / "model_driven" / "synthetic--DeepseekV41ForCausalLM.json"
GOLDEN = ROOT / "tests" / "golden" / "vllm_models" / "model_driven"
DEVICES = {"H200": ("9.0", "vllm-0.33.0-dsv41.jsonl.gz"),
           "B200": ("10.0", "vllm-0.33.0-dsv41-mega.jsonl.gz")}


@cache
def _vllm(name: str) -> tuple[dict[str, Any], ...]:
    with gzip.open(GOLDEN / name, "rt", encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def _answer(device: str, backend: str | None) -> dict[str, Any]:
    capability, name = DEVICES[device]
    return next(a for a in _vllm(name) if a.get("capability") == capability
                and a.get("config", "").endswith(CONFIG.name)
                and "mega_available_by_tp" not in a
                and a.get("attention_backend") == backend and a.get("kv_cache_dtype") is None)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return model_folder(tmp_path_factory.mktemp("dsv41"), "DeepSeek-V4.1", CONFIG)


def _check(model_dir: str, device: str, *flags: str) -> tuple[int, dict[str, Any], str]:
    return check_json(model_dir, device, "--tensor-parallel-size", "8", *flags)


_groups = vllm_groups


_tool_groups = tool_groups


def _built(answer: dict[str, Any]) -> set[str]:
    return {r["backend"] for r in answer["layers"]
            if r["module"].endswith("Attention") and r.get("backend")}


def test_the_b200_default_is_mega_attention_at_tp8_as_vllm_answers() -> None:
    topology = next(a for a in _vllm(DEVICES["B200"][1]) if "mega_available_by_tp" in a
                    and a["capability"] == "10.0" and a["config"].endswith(CONFIG.name))
    assert topology["mega_available_by_tp"]["8"] is True


@pytest.mark.parametrize("device", sorted(DEVICES))
def test_dsv41_on_eight_gpus_checks_as_vllm_builds_it(model_dir: str, device: str) -> None:
    answer = _answer(device, None)
    code, report, err = _check(model_dir, device)
    assert code == 0, err
    assert report["valid"] is True
    assert {layer["check"]["selected"] for layer in report["layers"]} == _built(answer)
    assert sorted(i for layer in report["layers"] for i in layer["layers"]) == list(range(40))
    assert report["plan"]["block_size"]["block_size"] == answer["aligned"]["block_size"]
    assert _tool_groups(report) == _groups(answer)
    assert len(report["plan"]["entries"]) == sum(1 for r in answer["layers"] if r.get("spec"))


def _names() -> list[str]:
    return sorted({str(a["attention_backend"]) for a in _vllm(DEVICES["B200"][1])
                   if a.get("attention_backend")})


@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize("name", _names())
def test_each_attention_backend_gets_vllms_answer(model_dir: str, device: str, name: str) -> None:
    """Built with the backend the layers then name (a name the layer code does not map is
    ignored, with a warning), or refused with vLLM's own text (exit 1)."""
    if device == "H200" and name == "FLASHMLA_MEGA_ATTN_DSV41":
        answer = next(a for a in _vllm(DEVICES["B200"][1]) if a.get("capability") == "9.0"
                      and a.get("attention_backend") == name and a.get("kv_cache_dtype") is None
                      and a["config"].endswith(CONFIG.name))
    else:
        answer = _answer(device, name)
    code, report, err = _check(model_dir, device, "--attention-backend", name)
    if answer["status"] == "refused":
        assert code == 1, err
        errors = [layer["check"]["error"]["message"] for layer in report["layers"]]
        assert errors and all(answer["error"] in message for message in errors)
        return
    assert code == 0, err
    built = _built(answer)
    assert {layer["check"]["selected"] for layer in report["layers"]} == built
    warnings = [w["code"] for layer in report["layers"] for w in layer["check"]["warnings"]]
    mapped = name in built or name.startswith(("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE"))
    assert ("MD003" in warnings) == (not mapped)
    assert _tool_groups(report) == _groups(answer)


@pytest.mark.parametrize("stem", ["no-kv-sources", "ratio4"])
def test_a_config_the_layer_refuses_is_refused_in_vllms_words(tmp_path: Path, stem: str) -> None:
    """A config vLLM's V4.1 layer refuses while built (no kv_source_layer_ids; a ratio-4
    layer) is refused with its text (exit 1, MD005), never a traceback."""
    config = CONFIG.with_name(f"{CONFIG.stem}-{stem}.json")
    answer = next(a for a in _vllm("vllm-0.33.0-dsv41-refused.jsonl.gz")
                  if a["config"].endswith(config.name) and a["capability"] == "9.0")
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(config, folder / "config.json")
    code, report, err = _check(str(folder), "H200")
    assert code == 1, err
    assert "Traceback" not in err
    errors = [layer["check"]["error"] for layer in report["layers"]]
    assert errors and all(e["code"] == "MD005" and answer["error"] in e["message"] for e in errors)
