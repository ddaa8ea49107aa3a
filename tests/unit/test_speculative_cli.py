"""What `check` says of a speculative draft, at the command line.

The facts compared are vLLM's (0.33.0's, and every release's for the draft's report and
its refusals) (tests/golden/oracle/vllm-0.33.0/draft.jsonl.gz,
tools/draft_oracle.py; tests/golden/test_draft_oracle.py compares every recorded case):
DeepSeek-V3's MTP layer is MLA layer 61 in the target's one KV-cache group, the
EAGLE-3 draft of Llama-3.1-8B is layer 32 beside the target's 32, an explicit draft
backend its layers do not support is refused in vLLM's words.
"""

from __future__ import annotations

import json

import pytest

from tests.fuzz.test_config_fuzz import run_cli

EAGLE3 = ("--speculative-config", '{"method": "eagle3", "model": '
          '"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}')
ENGINE = ("--engine", "vllm==0.33.0")


def _json(argv: list[str]) -> tuple[int, dict[str, object]]:
    code, out, err = run_cli(["check", "--format", "json", *ENGINE, *argv])
    assert out, err
    document: dict[str, object] = json.loads(out)
    return code, document


def _finding(document: dict[str, object], code: str) -> dict[str, object]:
    findings = document["findings"]
    assert isinstance(findings, list)
    hits = [f for f in findings if f["code"] == code]
    assert hits, [f["code"] for f in findings]
    found: dict[str, object] = hits[0]
    return found


def test_eagle3_draft_reports_its_backend_group_and_memory() -> None:
    code, doc = _json(["--device", "H200", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", *EAGLE3])
    assert code == 0
    note = str(_finding(doc, "SP003")["message"])
    assert "layer 32, backend FLASH_ATTN" in note
    assert "KV-cache group 0, 4,096 bytes per token" in note  # 8 KV heads x 128 x 2 x bf16
    assert "weights 0.79 GiB" in note
    draft = doc["draft"]
    assert isinstance(draft, dict)
    assert draft["layers"] == [32] and draft["runner"] == "v2"
    # vLLM's parameters of the draft (fc, the layer with its 2-wide qkv, norm, a 32,000-row
    # lm_head, draft_id_to_target_id), the shared embedding left out: 424,721,664
    assert abs(draft["weight_params"] - 424_721_664) / 424_721_664 < 1e-4
    layers = doc["layers"]
    assert isinstance(layers, list)
    assert [entry.get("draft", False) for entry in layers] == [False, True]


def test_deepseek_mtp_draft_is_the_configs_mla_layer() -> None:
    code, doc = _json(["--device", "H200", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3",
                       "--tensor-parallel-size", "8", "--speculative-config",
                       '{"method": "mtp", "num_speculative_tokens": 1}'])
    assert code == 0
    note = str(_finding(doc, "SP003")["message"])
    assert "DeepSeekMTPModel" in note and "layer 61, backend FLASH_ATTN_MLA" in note
    assert "KV-cache group 0" in note
    plan = doc["plan"]
    assert isinstance(plan, dict)
    groups = plan["groups"]
    assert len(groups) == 1 and groups[0]["layer_indices"][-1] == 61  # vLLM: one group of 62


def test_a_draft_backend_vllm_refuses_exits_1_in_its_words() -> None:
    code, doc = _json(["--device", "H200", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", EAGLE3[0],
                       EAGLE3[1][:-1] + ', "attention_backend": "FLASHMLA"}'])
    assert code == 1
    refusal = _finding(doc, "SE002")
    assert str(refusal["message"]).endswith(
        "Selected backend AttentionBackendEnum.FLASHMLA is not valid for this configuration. "
        "Reason: ['head_size not supported', 'non-MLA not supported']")


def test_an_unknown_draft_backend_is_vllms_validation_error() -> None:
    code, doc = _json(["--device", "H200", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", EAGLE3[0],
                       EAGLE3[1][:-1] + ', "attention_backend": "FLASH"}'])
    assert code == 1
    message = str(_finding(doc, "SP002")["message"])
    assert message.startswith("1 validation error for SpeculativeConfig\nattention_backend\n"
                              "  Value error, Unknown attention backend: 'FLASH'. Valid options "
                              "are: FLASH_ATTN, FLASH_ATTN_DIFFKV,")


def test_a_method_the_forced_runner_lacks_is_refused() -> None:
    code, doc = _json(["--device", "H200", "--", "VLLM_USE_V2_MODEL_RUNNER=1", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", EAGLE3[0],
                       EAGLE3[1][:-1] + ', "parallel_drafting": true}'])
    assert code == 1
    assert _finding(doc, "SP001")["message"] == (
        "Model Runner V2 does not yet support: parallel drafting for EAGLE speculative decoding")


# ---------------------------------------------------------------- every release

RELEASES = ("vllm==0.25.1", "vllm==0.26.0", "vllm==0.27.0", "vllm==0.27.1", "vllm==0.28.0",
            "vllm==0.29.0", "vllm==0.30.0", "vllm==0.31.0", "vllm==0.32.0", "vllm==0.33.0")


def _json_at(release: str, argv: list[str]) -> tuple[int, dict[str, object]]:
    code, out, err = run_cli(["check", "--format", "json", "--engine", release, *argv])
    assert out, err
    document: dict[str, object] = json.loads(out)
    return code, document


@pytest.mark.parametrize("release", RELEASES)
def test_the_draft_is_reported_in_every_release(release: str) -> None:
    """EAGLE-3 on Llama-3.1-8B and MTP on DeepSeek-V3 report the draft's backend, its
    KV-cache group and its weights in every profiled release (vLLM's runner: V2 for the
    EAGLE-3 draft, V1 for DeepSeek-V3 before 0.29.0, an MoE architecture outside the
    default-V2 list; tests/golden/oracle/vllm-*/draft.jsonl.gz)."""
    code, doc = _json_at(release, ["--device", "H200", "--", "vllm", "serve",
                                   "meta-llama/Llama-3.1-8B-Instruct", *EAGLE3])
    assert code == 0
    note = str(_finding(doc, "SP003")["message"])
    assert "layer 32, backend FLASH_ATTN" in note and "KV-cache group 0" in note
    assert "weights 0.79 GiB" in note and "CUDA-graph capture sizes" in note
    code, doc = _json_at(release, ["--device", "H200", "--", "vllm", "serve",
                                   "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8",
                                   "--speculative-config",
                                   '{"method": "mtp", "num_speculative_tokens": 1}'])
    assert code == 0
    note = str(_finding(doc, "SP003")["message"])
    assert "layer 61, backend FLASH_ATTN_MLA" in note and "KV-cache group 0" in note
    runner = "V1" if release < "vllm==0.29.0" else "V2"
    assert f"Model Runner {runner}" in note
    draft = doc["draft"]
    assert isinstance(draft, dict) and draft["weight_params"] > 0


_READS_THE_DRAFT_BACKEND = ("vllm==0.25.1", "vllm==0.26.0", "vllm==0.27.0", "vllm==0.27.1",
                            "vllm==0.28.0", "vllm==0.30.0", "vllm==0.31.0", "vllm==0.32.0",
                            "vllm==0.33.0")
"""The releases whose runner of DeepSeek-V3's MTP draft reads ``attention_backend`` (V1
before 0.29.0; V2 from 0.30.0); 0.29.0's V2 builds the draft under the target's config."""


@pytest.mark.parametrize("release", _READS_THE_DRAFT_BACKEND)
def test_an_explicit_draft_backend_vllm_refuses_exits_1_in_every_release(release: str) -> None:
    code, doc = _json_at(release, ["--device", "H200", "--", "vllm", "serve",
                                   "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8",
                                   "--speculative-config",
                                   '{"method": "mtp", "num_speculative_tokens": 1, '
                                   '"attention_backend": "FLASH_ATTN"}'])
    assert code == 1
    assert str(_finding(doc, "SE002")["message"]).endswith(
        "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. "
        "Reason: ['head_size not supported', 'MLA not supported']")


@pytest.mark.parametrize("release", RELEASES)
def test_an_unknown_draft_backend_exits_1_in_every_release(release: str) -> None:
    code, doc = _json_at(release, ["--device", "H200", "--", "vllm", "serve",
                                   "meta-llama/Llama-3.1-8B-Instruct", EAGLE3[0],
                                   EAGLE3[1][:-1] + ', "attention_backend": "FLASH"}'])
    assert code == 1
    assert str(_finding(doc, "SP002")["message"]).startswith(
        "1 validation error for SpeculativeConfig\nattention_backend\n"
        "  Value error, Unknown attention backend: 'FLASH'.")


def test_a_draft_tensor_parallel_size_vllm_refuses_exits_1() -> None:
    """vLLM 0.33.0's answer (the oracle's llama-3.1-8b-eagle3-draft-tp2)."""
    code, doc = _json(["--device", "H200", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", EAGLE3[0],
                       EAGLE3[1][:-1] + ', "draft_tensor_parallel_size": 2}'])
    assert code == 1
    assert str(_finding(doc, "SP006")["message"]).startswith(
        "1 validation error for SpeculativeConfig\n  Value error, "
        "speculative_draft_tensor_parallel_size=2 cannot be other value than 1 or target "
        "model tensor_parallel_size")
