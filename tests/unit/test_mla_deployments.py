"""Golden MLA deployments (tests/fixtures/mla/*.yaml): `attn-select check FILE --format json`
must give exactly vLLM's answers.

Next to each deployment, ``<name>.oracle.json`` holds what the real vLLM 0.33.0 code
answered (tools/mla_deployments_oracle.py): the oracle harness on the equivalent flat
selector config with the model stand-in (per-backend reasons, priority list, selection,
error text) and vLLM's MLA prefill selection (tools/mla_prefill_oracle.py).  The oracle
cannot express decode context parallelism: those deployments carry
``<name>.reference.json`` instead, hand-written from the reference's statements.
Golden text reports of a few deployments live in tests/golden/mla/ (COLUMNS=120,
NO_COLOR=1; regenerate with --update-goldens and review the diff).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fuzz.test_config_fuzz import run_cli
from tests.recorded import pinned

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "mla"
GOLDEN = ROOT / "tests" / "golden" / "mla"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.yaml"))
ORACLE_NAMES = [n for n in NAMES if (FIXTURES / f"{n}.oracle.json").is_file()]
REFERENCE_NAMES = [n for n in NAMES if (FIXTURES / f"{n}.reference.json").is_file()]
TEXT_GOLDENS = ["dsv3-h100-tp8", "dsv3-h200-tp8-prefill-flashinfer", "dsv32-b200-tp8",
                "dsv32-h200-tp8-dcp2", "dsv32-rtxpro6000-tp1", "dsv3-h100-tp8-fp32"]
# Registry members the oracle cannot import (stubbed extensions); from the source only.
NOT_ASKED = {"ZEN_CPU"}


def _check(name: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli(["check", str(FIXTURES / f"{name}.yaml"), "--format", "json"])
    assert code in (0, 1), err
    return code, json.loads(out)


def _messages(backend: dict[str, Any]) -> list[str]:
    return [r["message"] for r in backend["reasons"]]


def test_the_corpus_covers_the_acceptance_matrix() -> None:
    assert len(NAMES) >= 25
    assert set(NAMES) == set(ORACLE_NAMES) | set(REFERENCE_NAMES)
    seen: set[tuple[str, str]] = set()
    for name in NAMES:
        doc = yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())
        model = "sparse" if doc["layer"]["mla"].get("index_topk") else "dense"
        seen.add((model, doc["device"]))
    for device in ("H100", "H200", "B200", "RTX PRO 6000", "GB10"):
        assert ("dense", device) in seen and ("sparse", device) in seen, device


@pytest.mark.parametrize("name", ORACLE_NAMES)
def test_deployment_matches_the_oracle(name: str) -> None:
    code, doc = _check(name)
    oracle = json.loads((FIXTURES / f"{name}.oracle.json").read_text())
    assert oracle["vllm_version"] == "0.33.0"
    attention, prefill = oracle["attention"], oracle["prefill"]
    # every backend the oracle reports: vLLM's exact reason list
    for backend, reasons in attention["backends"].items():
        assert _messages(doc["backends"][backend]) == reasons, backend
    assert doc["priority"] == attention["priority"]
    assert doc["selected"] == attention["selected"]
    mla = doc["mla"]
    ours = mla["prefill"]
    for backend, reasons in prefill["backends"].items():
        if backend not in NOT_ASKED:
            mine = [("EXCEPTION " if ours["backends"][backend]["raises"] else "") + m
                    for m in _messages(ours["backends"][backend])]
            assert mine == reasons, backend
    if ours["mode"] == "auto":
        stop = ours["priority"].index(ours["selected"]) + 1 if ours["selected"] else None
        assert ours["priority"][:stop] == prefill["asked"]
    assert ours["selected"] == prefill["selected"]
    assert (ours["error"]["message"] if ours["error"] else None) == prefill["error"]
    # the start-up error: the attention selection's, else a fatal prefill failure
    if attention["error"] is not None:
        assert doc["error"]["message"] == attention["error"]
        assert not doc["valid"] and code == 1
    elif ours["fatal"]:
        assert ours["consulted"] and prefill["error"] is not None
        assert doc["error"]["message"] == prefill["error"]
        assert not doc["valid"] and code == 1
    else:
        assert doc["error"] is None
        assert doc["valid"] and code == 0


@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_dcp_deployment_matches_the_reference(name: str) -> None:
    code, doc = _check(name)
    expected = json.loads((FIXTURES / f"{name}.reference.json").read_text())
    for backend, reasons in expected["backends"].items():
        assert _messages(doc["backends"][backend]) == reasons, backend
    assert doc["selected"] == expected["selected"]
    assert doc["error"] == expected["error"]
    if "priority_tail" in expected:
        tail = expected["priority_tail"]
        assert doc["priority"][-len(tail):] == tail
    assert doc["mla"]["prefill"]["selected"] == expected["prefill_selected"]
    assert doc["mla"]["dcp_size"] == 2
    assert code == 0


@pytest.mark.parametrize("name", NAMES)
def test_report_shows_the_mla_dimensions_used(name: str) -> None:
    _, doc = _check(name)
    spec = yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())
    dims = spec["layer"]["mla"]
    tp = spec.get("parallel", {}).get("tensor_parallel_size", 1)
    mla = doc["mla"]
    assert mla["dimensions"] == {k: dims.get(k) for k in ("kv_lora_rank", "qk_nope_head_dim",
                                                          "qk_rope_head_dim", "v_head_dim", "index_topk")}
    assert mla["head_size"] == dims["kv_lora_rank"] + dims["qk_rope_head_dim"]
    assert mla["q_heads_per_rank"] == spec["layer"]["num_heads"] // tp
    assert mla["tensor_parallel_size"] == tp
    assert mla["sparse"] is ("index_topk" in dims)
    env = mla["environment"]
    for fact in ("env_flashmla_built", "env_tokenspeed_mla", "env_flashinfer_sm90_mla",
                 "env_flashinfer_sm120_sparse_mla"):
        assert env[fact] == {"value": True, "default": True}


def test_sparse_sm120_layer_never_asks_the_prefill_selector() -> None:
    """FLASHINFER_MLA_SPARSE_SM120's impl has no dense-MHA prefill path
    (flashinfer_mla_sparse_sm120.py:37), so MLAAttention skips the prefill selector."""
    _, doc = _check("dsv32-rtxpro6000-tp1")
    assert doc["selected"] == "FLASHINFER_MLA_SPARSE_SM120"
    assert doc["mla"]["prefill"]["consulted"] is False


@pytest.mark.parametrize("name", TEXT_GOLDENS)
def test_text_report_golden(name: str, update_goldens: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("NO_COLOR", "1")
    code, out, err = run_cli(pinned(["check", f"tests/fixtures/mla/{name}.yaml"]))
    assert code in (0, 1), err
    path = GOLDEN / f"{name}.txt"
    if update_goldens:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(out, encoding="utf-8")
    assert path.is_file(), f"missing golden {path.name}: run pytest --update-goldens"
    assert out == path.read_text(encoding="utf-8")
    assert "MLA dimensions" in out and "MLA prefill" in out and "MLA packages" in out
