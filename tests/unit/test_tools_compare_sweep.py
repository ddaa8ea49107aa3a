"""tools/compare_sweep.py and tools/oracle_to_sweep.py on small fixtures."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))

import compare_sweep  # noqa: E402
import oracle_to_sweep  # noqa: E402

CFG = {"device_capability": "9.0", "head_size": 128, "dtype": "bfloat16",
       "kv_cache_dtype": "auto", "block_size": None}
NO_VALID = ("No valid attention backend found for cuda with AttentionSelectorConfig("
            "head_size=33, ...). Reasons: {FLASH_ATTN: [head_size not supported]}.")


def _line(**kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "input": dict(CFG),
        "backends": {"FLASH_ATTN": [], "FLASHINFER": ["compute capability not supported"],
                     "TRITON_ATTN": []},
        "selected": "FLASH_ATTN",
        "error": None,
    }
    rec.update(kw)
    return rec


def _fixture() -> list[dict[str, Any]]:
    return [
        _line(),
        _line(input={**CFG, "head_size": 33},
              backends={"FLASH_ATTN": ["head_size not supported"],
                        "FLASHINFER": ["head_size not supported"],
                        "TRITON_ATTN": ["head_size not supported"]},
              selected=None, error=NO_VALID),
        _line(input={**CFG, "device_capability": "10.0"}),
    ]


def _write(path: Path, recs: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


def test_identical_files_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a.jsonl", _fixture())
    b = _write(tmp_path / "b.jsonl", _fixture())
    assert compare_sweep.main([a, b]) == 0
    out = capsys.readouterr().out
    assert "no differences" in out


def test_one_reason_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ours = _fixture()
    ours[0]["backends"]["FLASHINFER"] = ["dtype not supported"]
    ours[2]["backends"]["FLASHINFER"] = ["dtype not supported"]
    a = _write(tmp_path / "ours.jsonl", ours)
    b = _write(tmp_path / "theirs.jsonl", _fixture())
    assert compare_sweep.main([a, b]) == 1
    out = capsys.readouterr().out
    assert "[2x] backends FLASHINFER" in out
    assert '["dtype not supported"]' in out
    assert '["compute capability not supported"]' in out
    assert "e.g. line 1:" in out
    assert "e.g. line 3:" not in out  # --max-examples defaults to 1

    assert compare_sweep.main([a, b, "--json", "--max-examples", "5"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] is False
    assert report["fields"]["backends"] == {"agree": 1, "total": 3, "percent": 33.333}
    assert report["fields"]["backend_lists"]["agree"] == 7
    assert report["fields"]["selected"]["agree"] == 3
    assert report["per_backend"]["FLASHINFER"]["agree"] == 1
    [group] = report["differences"]
    assert group["field"] == "backends" and group["backend"] == "FLASHINFER"
    assert group["ours"] == ["dtype not supported"]
    assert group["theirs"] == ["compute capability not supported"]
    assert group["count"] == 2
    assert [e["line"] for e in group["examples"]] == [1, 3]
    assert group["examples"][1]["input"]["device_capability"] == "10.0"


def test_reason_order_matters() -> None:
    theirs = _fixture()
    ours = copy.deepcopy(theirs)
    ours[1]["backends"]["FLASH_ATTN"] = ["head_size not supported"] * 2
    report = compare_sweep.compare(ours, theirs)
    assert not report["identical"]
    assert report["differences"][0]["backend"] == "FLASH_ATTN"


def test_selected_error_and_missing_backend() -> None:
    theirs = _fixture()
    ours = copy.deepcopy(theirs)
    ours[0]["selected"] = "TRITON_ATTN"
    ours[1]["error"] = "No valid attention backend found for cuda with something else"
    del ours[2]["backends"]["TRITON_ATTN"]
    report = compare_sweep.compare(ours, theirs)
    kinds = {(g["field"], g["backend"]) for g in report["differences"]}
    assert kinds == {("selected", None), ("error", None), ("backends", "TRITON_ATTN")}
    err = next(g for g in report["differences"] if g["field"] == "error")
    assert err["ours"] == err["theirs"] == "No valid attention backend found"
    assert err["examples"][0]["theirs_text"] == NO_VALID
    assert report["fields"]["error_kind"]["agree"] == 3
    missing = next(g for g in report["differences"] if g["field"] == "backends")
    assert missing["ours"] is None
    assert compare_sweep.compare(ours, theirs, only_common_backends=True)["fields"][
        "backends"]["agree"] == 3


def test_lines_without_input_and_misaligned() -> None:
    theirs = _fixture()
    ours = [{k: v for k, v in r.items() if k != "input"} for r in theirs]
    assert compare_sweep.compare(ours, theirs)["identical"]
    report = compare_sweep.compare(theirs[:2], theirs)
    assert not report["identical"] and report["lines_compared"] == 2
    swapped = [theirs[0], theirs[2], theirs[1]]
    assert compare_sweep.compare(swapped, theirs)["fields"]["input"]["agree"] == 1


def test_error_kind() -> None:
    ek = compare_sweep.error_kind
    assert ek(None) is None
    assert ek(NO_VALID) == "No valid attention backend found"
    assert ek("Selected backend AttentionBackendEnum.B12X is not valid for this "
              "configuration. Reason: ['head_size not supported']") == (
        "Selected backend B12X is not valid")
    assert ek("bad input: unknown config field(s): ['x']") == "bad input"
    assert ek("EXCEPTION AttributeError: boom") == "EXCEPTION AttributeError: boom"


def test_unreadable_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert compare_sweep.main([str(bad), str(bad)]) == 2


def _oracle_result(**kw: Any) -> dict[str, Any]:
    res: dict[str, Any] = {
        "input": dict(CFG), "vllm_version": "0.33.0",
        "backends": {"FLASH_ATTN": [], "FLASHINFER": []},
        "priority": ["FLASH_ATTN", "FLASHINFER"], "valid_in_priority": ["FLASH_ATTN"],
        "selected": "FLASH_ATTN", "selection_error": None, "preferred_block_size": 16,
        "diagnostics": {"flash_attn_version": 3, "flash_attn_version_for_config": 3},
        "selector_config": {}, "model_config": None,
    }
    res.update(kw)
    return res


def test_oracle_to_sweep() -> None:
    conv = oracle_to_sweep.convert_one
    rec = conv(_oracle_result())
    assert rec["input"] == CFG and rec["selected"] == "FLASH_ATTN" and rec["error"] is None
    assert rec["priority"] == ["FLASH_ATTN", "FLASHINFER"]
    assert (rec["fa_version"], rec["fa_version_for_config"]) == (3, 3)
    assert "kv_cache" not in rec and "selector_config" not in rec

    rec = conv(_oracle_result(selected=None, selection_error="ValueError: " + NO_VALID))
    assert rec["error"] == NO_VALID
    exc = "EXCEPTION AttributeError: 'types.SimpleNamespace' object has no attribute 'x'"
    assert conv(_oracle_result(selected=None, selection_error=exc))["error"] == exc

    rec = conv({"input": {"head_size": 1}, "error": "bad input: missing required field"})
    assert rec["error"] == "bad input: missing required field" and rec["backends"] == {}

    forced = {**CFG, "attention_backend": "B12X"}
    raw = "<unregistered vllm.v1.attention.backends.b12x.B12XBackend>"
    rec = conv(_oracle_result(
        input=forced, backends={"FLASH_ATTN": [], "B12X": []}, selected=raw,
        internal_inconsistency=f"vLLM selected {raw} but ... imply B12X"))
    assert rec["selected"] == "B12X" and rec["selected_raw"] == raw
    assert "internal_inconsistency" not in rec

    kv = {"call": {}, "layout": "NHD", "backends": {}}
    assert "kv_cache" not in conv(_oracle_result(kv_cache=kv))
    assert conv(_oracle_result(kv_cache=kv), kv_cache=True)["kv_cache"] == kv


def test_oracle_to_sweep_cli(tmp_path: Path) -> None:
    src = tmp_path / "out.json"
    src.write_text(json.dumps([_oracle_result(), _oracle_result(selected="FLASHINFER")]))
    dst = tmp_path / "out.jsonl"
    assert oracle_to_sweep.main([str(src), "-o", str(dst)]) == 0
    lines = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [r["selected"] for r in lines] == ["FLASH_ATTN", "FLASHINFER"]
