"""vLLM's layer-build refusals of a selected backend, against the tool's check.

vLLM builds each attention layer after selecting its backend, and its layer code may still
refuse that backend: the attention layer itself (``Attention.__init__``,
vllm/model_executor/layers/attention/attention.py: ``use_alibi_sqrt`` on a backend without
``supports_alibi_sqrt()``, a ``chunk_lookback`` layer on anything but TRITON_ATTN: the
profile's ``layer_build``, keyed on the backend's feature column) or the model class
(Flint's asserts once its layer is built: the family's ``build_checks``).

``tools/model_driven_reference.py`` built Step1, Rnj1 and Flint with vLLM on the meta device,
on an emulated H200 (9.0) and B200 (10.0), with no ``--attention-backend`` and with each
pinned backend (``tests/golden/vllm_models/layer_build/vllm-<version>.jsonl.gz``). For every
answer the tool's check of the same deployment must say what vLLM did: the refusal in vLLM's
words (its message is in vLLM's recorded error), or, where vLLM built the model, the
backend every layer names and the same layers and KV-cache groups. No vLLM is needed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.inputs.config import parse_deployment
from selector.pipeline.deployment import Solved, solve_deployment
from tools import oracle
from tools.model_agreement import GOLDEN, agreements_of, reference_deployment

FILES = sorted((GOLDEN / "layer_build").glob("vllm-*.jsonl.gz"))


def _answers() -> list[dict[str, Any]]:
    return [a for path in FILES for a in oracle.read_jsonl(path)
            if not str(a["config"]).startswith("<")]


def _id(answer: dict[str, Any]) -> str:
    return "-".join([answer["vllm_version"], str(answer["capability"]),
                     answer.get("attention_backend") or "auto",
                     answer.get("kv_cache_dtype") or "auto", Path(str(answer["config"])).stem])


def _check(answer: dict[str, Any]) -> Solved:
    text = reference_deployment(answer, 4096)
    return solve_deployment(parse_deployment("<reference deployment>", text), load_catalog())


def _refusals(solved: Solved) -> list[str]:
    """What the tool says stops vLLM: the start-up issues, else the selection's error."""
    model = solved.model
    assert model is not None
    said = [issue.message for issue in model.startup]
    said += [s.result.error.message for s in model.selections
             if s.result.error is not None]
    return said


def test_the_answers_cover_every_rule() -> None:
    """Each refusal the rules state was recorded from vLLM at least once, and each model
    built with the backend vLLM's layer needs."""
    answers = _answers()
    assert FILES and answers
    errors = " | ".join(str(a.get("error", "")) for a in answers)
    for text in ("use_alibi_sqrt is not supported by backend FLASH_ATTN.",
                 "use_alibi_sqrt is not supported by backend FLASHINFER.",
                 "Chunked attention with lookback requires the Triton backend, but got FLASH_ATTN.",
                 "AssertionError: Flint requires FlashInfer attention"):
        assert text in errors, text
    built = {(Path(str(a["config"])).stem, a.get("attention_backend")) for a in answers
             if a["status"] == "ok"}
    assert {("Step1ForCausalLM", "TRITON_ATTN"), ("Rnj1ForCausalLM", "TRITON_ATTN"),
            ("FlintForCausalLM", "FLASHINFER")} <= built


def test_the_messages_are_vllms_source() -> None:
    """The registered messages of the layer-build codes are vLLM's f-strings (filled with
    the backend's name as vLLM's recorded errors show them)."""
    catalog = load_catalog()
    answers = _answers()
    for code, backend in (("LB001", "FLEX_ATTENTION"), ("LB002", "FLASHINFER")):
        message = catalog.code(code).message.format(backend=backend)
        assert any(message in str(a.get("error", "")) for a in answers), (code, message)


@pytest.mark.parametrize("answer", _answers(), ids=_id)
def test_the_tool_says_what_vllm_did(answer: dict[str, Any]) -> None:
    solved = _check(answer)
    if answer["status"] == "refused":
        said = _refusals(solved)
        assert said, f"vLLM refused ({answer['error']}); the tool says valid"
        assert any(text in str(answer["error"]) for text in said), (said, answer["error"])
        assert not solved.valid
        return
    assert solved.valid, _refusals(solved)
    model = solved.model
    assert model is not None
    backends = {record["backend"] for record in answer["layers"] if record.get("backend")}
    selected = {s.result.selected for s in model.selections}
    assert selected == backends
    result = next(iter(agreements_of([answer])))
    assert result.tool_error is None, result.tool_error
    assert result.differences == [], result.differences
    assert result.agreeing == result.layers > 0
    assert result.group_differences == [], result.group_differences
    assert result.groups_agreeing == result.groups > 0
