"""Every report format shows vLLM's reasons verbatim, brackets included.

vLLM writes its reasons with brackets (``Reasons: {FLASH_ATTN: [block_size not
supported]}``, ``Reason: ['dtype not supported']``); a terminal renderer that reads
data as markup drops them. The expected strings are the real vLLM 0.33.0 answers of
the oracle-verified case corpus (tests/cases/vllm-0.33.0), not the tool's output.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from selector.cli.check import CheckFormat
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "cases" / "vllm-0.33.0"

# Deployment files that state exactly the case's input (capability, head size, dtypes,
# block size, pinned backend); the expected text is vLLM's answer to that input.
DEPLOYMENTS = {
    "FLASH_ATTN-BS001": """\
device: {capability: "8.7"}
dtype: float16
block_size: 2
layer: {head_size: 32, num_heads: 8, num_kv_heads: 8}
""",
    "B12X-BS001": """\
device: {capability: "9.0"}
dtype: float32
kv_cache_dtype: fp8
block_size: 10
attention_backend: B12X
layer: {head_size: 192, num_heads: 48, num_kv_heads: 2}
""",
}


def _strings(document: Any) -> list[str]:
    if isinstance(document, str):
        return [document]
    if isinstance(document, dict):
        return [s for value in document.values() for s in _strings(value)]
    if isinstance(document, list):
        return [s for value in document for s in _strings(value)]
    return []


def _readable(output_format: CheckFormat, out: str) -> str:
    """The output as text a reader sees: decoded escapes, one line per string."""
    if output_format in (CheckFormat.json, CheckFormat.sarif):
        return "\n".join(_strings(json.loads(out)))
    if output_format is CheckFormat.junit:
        root = ET.fromstring(out)
        parts = [text for element in root.iter()
                 for text in (element.text, element.tail, *element.attrib.values()) if text]
        return "\n".join(parts)
    if output_format is CheckFormat.github:
        return urllib.parse.unquote(out)  # workflow commands escape %, \r, \n, : and ,
    return out


def _reasons(case: dict[str, Any]) -> list[str]:
    expected = case["expected"]
    return [expected["error"]] + [r for rs in expected["backends"].values() for r in rs
                                  if r in expected["error"]]


@pytest.mark.parametrize("output_format", list(CheckFormat), ids=lambda f: f.value)
@pytest.mark.parametrize("case_name", sorted(DEPLOYMENTS))
def test_every_format_shows_vllms_reasons_verbatim(
        case_name: str, output_format: CheckFormat, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "4000")  # no wrapping: the reason must be on one line
    case = json.loads((CASES / f"{case_name}.json").read_text(encoding="utf-8"))
    path = tmp_path / f"{case_name}.yaml"
    path.write_text(DEPLOYMENTS[case_name], encoding="utf-8")
    code, out, err = run_cli(["check", str(path), "--format", output_format.value])
    assert code == 1, err
    shown = _readable(output_format, out)
    assert "[" in case["expected"]["error"]
    for reason in _reasons(case):
        assert reason in shown, (output_format.value, reason)


def test_text_table_keeps_bracketed_reason_codes(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "4000")
    path = tmp_path / "bs.yaml"
    path.write_text(DEPLOYMENTS["FLASH_ATTN-BS001"], encoding="utf-8")
    _, out, _ = run_cli(["check", str(path)])
    assert "reasons (vLLM's text) [code]" in out
    assert re.search(r"FLASH_ATTN\s+│ invalid │ block_size not supported \[BS001\]", out)


def test_a_model_view_keeps_vllms_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "4000")
    code, out, _ = run_cli(["check", "--device", "H100", "--", "vllm", "serve",
                            "meta-llama/Llama-3.1-8B-Instruct", "--block-size", "8"])
    assert code == 1
    assert "Reasons: {FLASH_ATTN: [block_size not supported], FLASHINFER: " \
           "[block_size not supported]" in out


def test_explain_and_list_keep_brackets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "4000")
    path = tmp_path / "bs.yaml"
    path.write_text(DEPLOYMENTS["FLASH_ATTN-BS001"], encoding="utf-8")
    _, out, _ = run_cli(["explain", "FLASHINFER", str(path)])
    # the KV-cache dtype rule's list, as the data writes it (rich read "[null, ...]" as markup)
    assert "kv_cache_dtype in [null, 'auto'" in out
    _, out, _ = run_cli(["list", "backends"])
    assert "vllm[b12x]" in out
    _, out, _ = run_cli(["list", "codes"])
    assert "[" in out and "]" in out


MODEL_DEPLOYMENT = """\
device: H100
model: llama-3.1-8b
block_size: 8
"""


@pytest.mark.parametrize("output_format", list(CheckFormat), ids=lambda f: f.value)
def test_every_format_of_a_model_shows_vllms_reasons_verbatim(
        output_format: CheckFormat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # vLLM 0.33.0 on Hopper, head size 128, block size 8: every backend of the priority
    # list says "block_size not supported" (as in the corpus case FLASH_ATTN-BS001).
    monkeypatch.setenv("COLUMNS", "4000")
    path = tmp_path / "model.yaml"
    path.write_text(MODEL_DEPLOYMENT, encoding="utf-8")
    code, out, err = run_cli(["check", str(path), "--format", output_format.value])
    assert code == 1, err
    shown = _readable(output_format, out)
    for backend in ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"):
        assert f"{backend}: [block_size not supported]" in shown, (output_format.value, backend)
    assert "TURBOQUANT: [kv_cache_dtype not supported, block_size not supported]" in shown
