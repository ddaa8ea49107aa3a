"""`check` on the multimodal encoder's start-up, as users meet it: Gemma-4's encoder
budget (vLLM's refusal with an explicit --max-num-batched-tokens below the largest item,
vLLM's raise of the default and the memory that follows), the vision encoder's backend and
vLLM's assertion for an --mm-encoder-attn-backend the platform does not list.
The per-item tokens and texts are vLLM's own answers (tests/golden/test_encoder_oracle.py)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.memory.encoder import encoder_data, encoder_report, profile_run_items
from tests.fuzz.test_config_fuzz import run_cli

GEMMA4 = "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json"
RAW = json.loads(Path(GEMMA4).read_text(encoding="utf-8"))


def _json(argv: list[str]) -> tuple[int, dict[str, object]]:
    code, out, err = run_cli(["check", "--format", "json", *argv])
    assert out, err
    document: dict[str, object] = json.loads(out)
    return code, document


def _findings(document: dict[str, object]) -> dict[str, dict[str, object]]:
    findings = document["findings"]
    assert isinstance(findings, list)
    return {f["code"]: f for f in findings}


def _messages(document: dict[str, object], code: str) -> list[str]:
    findings = document["findings"]
    assert isinstance(findings, list)
    return [str(f["message"]) for f in findings if f["code"] == code]


def test_gemma4_with_2048_batched_tokens_is_refused_in_vllms_words() -> None:
    code, doc = _json(["--device", "A100", "--", "vllm", "serve", GEMMA4,
                       "--max-num-batched-tokens", "2048"])
    assert code == 1 and doc["valid"] is False
    refusal = _findings(doc)["SU026"]
    # vllm/v1/core/encoder_cache_manager.py:363-371 (0.33.0): the video item, 32 frames x 78
    assert refusal["message"] == (
        "Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than "
        "max_num_batched_tokens (2048). Please increase max_num_batched_tokens.")
    assert "--max-num-batched-tokens 2496" in str(refusal["hint"])


def test_gemma4_at_the_default_is_raised_and_the_budget_follows() -> None:
    code, doc = _json(["--device", "A100", "--", "vllm", "serve", GEMMA4])
    assert code == 0
    raised = _findings(doc)["MM011"]
    assert raised["level"] == "note"
    # vllm/engine/arg_utils.py:3207-3214 (0.33.0): A100's default is 2048 (arg_utils.py:2973-3006)
    assert raised["message"] == (
        "Raising max_num_batched_tokens from 2048 to 2496 to accommodate 'video' input for "
        f"prefix-LM model {GEMMA4}.")
    memory = doc["memory"]
    assert isinstance(memory, dict) and memory["inputs"]["max_num_batched_tokens"] == 2496


def test_gemma4_explicit_batched_tokens_enough_for_the_item_pass() -> None:
    code, doc = _json(["--device", "A100", "--", "vllm", "serve", GEMMA4,
                       "--max-num-batched-tokens", "2496"])
    assert code == 0 and "SU026" not in _findings(doc) and "MM011" not in _findings(doc)


def test_fewer_video_frames_lower_the_item() -> None:
    code, doc = _json(["--device", "A100", "--", "vllm", "serve", GEMMA4,
                       "--max-num-batched-tokens", "2048",
                       "--limit-mm-per-prompt", '{"video": {"count": 1, "num_frames": 8}}'])
    assert code == 0 and "SU026" not in _findings(doc)


def test_gemma4_vision_tower_is_transformers_not_selected() -> None:
    _, doc = _json(["--device", "H100", "--", "vllm", "serve", GEMMA4])
    assert any("vLLM selects no attention backend" in m for m in _messages(doc, "MM010"))


def test_unsupported_encoder_backend_is_vllms_assertion() -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", "schemas/models/llama-4-scout.json",
                       "--tensor-parallel-size", "8", "--mm-encoder-attn-backend", "FLEX_ATTENTION"])
    assert code == 1
    message = str(_findings(doc)["SU027"]["message"])
    assert message.startswith("AssertionError: Backend AttentionBackendEnum.FLEX_ATTENTION is "
                              "not supported for vit attention. Supported backends are: "
                              "[<AttentionBackendEnum.FLASH_ATTN: ")


def test_a_name_that_is_no_backend_is_bad_input() -> None:
    code, _, err = run_cli(["check", "--device", "H100", "--", "vllm", "serve", GEMMA4,
                            "--mm-encoder-attn-backend", "FLASH_ATTEN"])
    assert code == 2 and "FLASH_ATTN" in err and "Traceback" not in err


def test_llama4_vision_encoder_backend_is_reported() -> None:
    _, doc = _json(["--device", "T4", "--", "vllm", "serve", "schemas/models/llama-4-scout.json",
                    "--tensor-parallel-size", "8"])
    # head size 1408 / 16 = 88, float16 on a T4: TORCH_SDPA (FLASH_ATTN needs SM 8.0)
    assert any(m.startswith("vision encoder attention: TORCH_SDPA (head size 88, float16")
               for m in _messages(doc, "MM010"))


def test_the_deployment_file_key_is_read(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(f"model: {Path(GEMMA4).resolve()}\ndevice: A100\n"
                    "max_num_batched_tokens: 2048\n"
                    "mm_processor_kwargs: {max_soft_tokens: 1120}\n"
                    "limit_mm_per_prompt: {video: 0}\n", encoding="utf-8")
    code, doc = _json([str(path)])
    assert code == 0 and "SU026" not in _findings(doc)  # image 1120 < 2048; no video


@settings(max_examples=60, deadline=None)
@given(batched=st.integers(1, 20000), frames=st.integers(1, 64), explicit=st.booleans())
def test_refused_exactly_when_the_item_exceeds_the_batch(batched: int, frames: int,
                                                         explicit: bool) -> None:
    catalog = load_catalog()
    data = encoder_data(catalog, "vllm==0.33.0")
    assert data is not None
    report = encoder_report(
        catalog, data, RAW, cc=80, dtype="bfloat16", model_name="m", mm_encoder_attn_backend=None,
        limit_mm_per_prompt={"video": {"count": 1, "num_frames": frames}}, mm_processor_kwargs={},
        disable_chunked_mm_input=False, max_num_batched_tokens=batched if explicit else None,
        default_max_num_batched_tokens=batched)
    assert report is not None and report.tokens_per_item is not None
    largest = max(report.tokens_per_item.values())
    refused = any(issue.code == "SU026" for issue in report.issues)
    assert refused == (explicit and largest > batched)
    assert (report.max_num_batched_tokens is not None) == (not explicit and largest > batched)


@pytest.mark.parametrize("flag", ["--mm-encoder-attn-backend", "--limit-mm-per-prompt",
                                  "--mm-processor-kwargs", "--disable-chunked-mm-input"])
def test_the_encoder_flags_get_no_passed_over_note(flag: str) -> None:
    value = {"--mm-encoder-attn-backend": ["TORCH_SDPA"], "--limit-mm-per-prompt": ['{"image": 1}'],
             "--mm-processor-kwargs": ["{}"], "--disable-chunked-mm-input": []}[flag]
    _, doc = _json(["--device", "H100", "--", "vllm", "serve", GEMMA4, flag, *value])
    findings = doc["findings"]
    assert isinstance(findings, list)
    assert not [f for f in findings if f["code"] in ("AS103", "AS104") and flag in f["message"]]


def _reservation(document: dict[str, object], name: str) -> dict[str, object] | None:
    memory = document["memory"]
    assert isinstance(memory, dict)
    return next((line for line in memory["reservations"] if line["name"] == name), None)


@pytest.mark.parametrize(("argv", "items"), [([], 1), (["--max-num-batched-tokens", "8192"], 3)])
def test_the_profile_runs_encoder_outputs_are_in_the_memory_table(argv: list[str],
                                                                   items: int) -> None:
    """vLLM's MultiModalBudget on Gemma-4 (tests/golden/oracle/vllm-0.33.0/encoder.json.gz,
    ``profile_run``): at the raised 2,496 batched tokens the profile run encodes one
    32-frame video, at 8,192 three; each output row is text_config.hidden_size (2,816)
    wide, bfloat16, and they are held while the decoder's dummy run measures the peak."""
    code, doc = _json(["--device", "A100", "--", "vllm", "serve", GEMMA4, *argv])
    assert code == 0
    line = _reservation(doc, "encoder outputs (profile run)")
    assert line is not None and line["bytes"] == items * 2496 * 2816 * 2
    encoder = doc["encoder"]
    assert isinstance(encoder, dict)
    assert encoder["profile_run"]["items"] == items and encoder["profile_run"]["modality"] == "video"
    budget = max(2496, 8192 if argv else 0)  # vllm/v1/worker/gpu_model_runner.py:6104-6110
    assert any(m.endswith(f"vLLM logs: Encoder cache will be initialized with a budget of {budget} "
                          f"tokens, and profiled with {items} video items of the maximum feature "
                          "size.") for m in _messages(doc, "MM010"))
    without = _json(["--device", "A100", "--", "vllm", "serve", GEMMA4, *argv,
                     "--limit-mm-per-prompt", '{"video": 0, "image": 0}'])[1]
    assert _reservation(without, "encoder outputs (profile run)") is None
    memory, memory_without = doc["memory"], without["memory"]
    assert isinstance(memory, dict) and isinstance(memory_without, dict)
    assert memory_without["available_kv_bytes"] - memory["available_kv_bytes"] == line["bytes"]


def test_refused_budget_has_no_profile_run() -> None:
    _, doc = _json(["--device", "A100", "--", "vllm", "serve", GEMMA4,
                    "--max-num-batched-tokens", "2048"])
    encoder = doc["encoder"]
    assert isinstance(encoder, dict) and encoder["profile_run"] is None


@pytest.mark.parametrize("engine", ["vllm==0.25.1", "vllm==0.29.0", "vllm==0.33.0"])
def test_every_release_refuses_the_budget_in_its_words(engine: str) -> None:
    """compute_mm_encoder_budget is the same code in every profiled release (each one's
    encoder.yaml cites its own lines); the refusal is the same text."""
    code, doc = _json(["--engine", engine, "--device", "A100", "--", "vllm", "serve", GEMMA4,
                       "--max-num-batched-tokens", "2048"])
    assert code == 1
    assert str(_findings(doc)["SU026"]["message"]).startswith(
        "Chunked MM input disabled but max_tokens_per_mm_item (2496)")


def test_kimi_k25_moonvit_encoder_backend_is_reported() -> None:
    """Kimi-K2.5's vision tower is vLLM's MoonViT (MMEncoderAttention); its config names
    the width and heads vt_hidden_size / vt_num_attention_heads: 1152 // 16 = 72."""
    _, doc = _json(["--device", "H200", "--", "vllm", "serve",
                    "tests/fixtures/hf_configs/moonshotai--Kimi-K2.5.json",
                    "--tensor-parallel-size", "8"])
    assert any(m.startswith("vision encoder attention: FLASH_ATTN (head size 72, bfloat16")
               for m in _messages(doc, "MM010"))


@settings(max_examples=80, deadline=None)
@given(batched=st.integers(1, 40000), per_item=st.dictionaries(
    st.sampled_from(["image", "video", "audio"]), st.integers(0, 20000), min_size=1),
    seqs=st.integers(1, 1024), length=st.integers(1, 1 << 20), limit=st.integers(0, 2000))
def test_profile_run_items_fit_the_encoder_budget(batched: int, per_item: dict[str, int],
                                                  seqs: int, length: int, limit: int) -> None:
    """MultiModalBudget's invariants: the modality with the most tokens, at least one
    item, and more than one only while they fit the encoder budget."""
    data = encoder_data(load_catalog(), "vllm==0.33.0")
    assert data is not None
    got = profile_run_items(data.budget, per_item, max_num_batched_tokens=batched,
                            limit_mm_per_prompt=dict.fromkeys(per_item, limit),
                            max_model_len=length, max_num_seqs=seqs)
    assert got is not None
    modality, items, budget = got
    assert per_item[modality] == max(per_item.values())
    assert budget == max(batched, per_item[modality])
    if per_item[modality]:
        assert items >= 1 and (items == 1 or items * per_item[modality] <= budget)
        assert items <= max(1, seqs * max(1, min(limit, length // per_item[modality])))


def test_each_release_patches_only_what_its_file_states() -> None:
    """encoder.yaml of 0.26.0 onwards has ``inherit: true``: every fact it does not state is
    the previous release's (the sources are each release's own lines)."""
    catalog = load_catalog()
    names = catalog.engine_names
    for older, newer in itertools.pairwise(names):
        before, after = encoder_data(catalog, older), encoder_data(catalog, newer)
        assert before is not None and after is not None and after.engine == newer
        own = yaml.safe_load((catalog.engine_dirs[newer] / "encoder.yaml").read_text("utf-8"))
        assert own["inherit"] is True
        stated = set(own.get("vit_attention", {}))
        for key in ("orders", "unchecked", "enum_values", "refusal_code"):
            if key not in stated:
                assert getattr(after.vit_attention, key) == getattr(before.vit_attention, key)
        assert after.vit_attention.source == own.get("vit_attention", {}).get(
            "source", before.vit_attention.source)
        assert set(after.encoders) == set(before.encoders) | set(own.get("encoders", {}))
        assert after.budget.prefix_lm_model_types == before.budget.prefix_lm_model_types


# The families whose tokens per item vLLM counts with the checkpoint's processor files:
# vLLM 0.33.0's answers with the published files (tests/fixtures/processors), recorded in
# tests/golden/oracle/vllm-0.33.0/encoder.json.gz (rows qwen3-vl-8b, llama-4-scout,
# gemma-3-27b, llava-1.5-7b, llava-v1.6-mistral-7b, mistral-small-3.1-24b) and compared by
# tests/golden/test_encoder_oracle.py.
QWEN3_VL = "tests/fixtures/hf_configs/Qwen--Qwen3-VL-8B-Instruct.json"
LLAMA4 = "schemas/models/llama-4-scout.json"
GEMMA3 = "schemas/models/gemma-3-27b.json"
QWEN25_VL = "tests/fixtures/hf_configs/edge/qwen2.5-vl-7b-shape.json"
MISTRAL3 = "tests/fixtures/processors/mistralai--Mistral-Small-3.1-24B-Instruct-2503/config.json"
LLAVA = "tests/fixtures/processors/llava-hf--llava-1.5-7b-hf/config.json"
LLAVA_NEXT = "tests/fixtures/processors/llava-hf--llava-v1.6-mistral-7b-hf/config.json"


def _refusal(tokens: int, batched: int) -> str:
    """compute_mm_encoder_budget's words (vllm/v1/core/encoder_cache_manager.py:363-371)."""
    return (f"Chunked MM input disabled but max_tokens_per_mm_item ({tokens}) is larger than "
            f"max_num_batched_tokens ({batched}). Please increase max_num_batched_tokens.")


@pytest.mark.parametrize(("config", "tokens", "batched"), [
    (QWEN3_VL, 16384, 8192),  # the image: max_pixels 16,777,216 // 32**2
    (LLAMA4, 2448, 2048),  # 16 tiles and the global one, 144 tokens each
    (QWEN25_VL, 114688, 16384),  # the video: its frames at max_model_len 128,000
    (MISTRAL3, 3025, 2048),  # 1540 px / 14 / merge 2: 55 x 55 [IMG] tokens (row mistral-small-3.1-24b)
])
def test_disabled_chunked_mm_input_is_refused_in_vllms_words(config: str, tokens: int,
                                                             batched: int) -> None:
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", config,
                       "--disable-chunked-mm-input", "--max-num-batched-tokens", str(batched)])
    assert code == 1 and doc["valid"] is False
    refusal = _findings(doc)["SU026"]
    assert refusal["message"] == _refusal(tokens, batched)
    assert f"--max-num-batched-tokens {tokens}" in str(refusal["hint"])
    fixed = _json(["--device", "H100", "--", "vllm", "serve", config,
                   "--disable-chunked-mm-input", "--max-num-batched-tokens", str(tokens)])[1]
    assert "SU026" not in _findings(fixed)


def test_qwen3_vl_at_the_default_keeps_its_batch_and_the_budget_takes_the_item() -> None:
    """Qwen3-VL is no multimodal prefix-LM: chunked multimodal input stays on, vLLM neither
    raises the default (H100: 8,192) nor refuses; the encoder budget and cache take the
    16,384-token image, and the profile run encodes one (vLLM's MultiModalBudget,
    ``profile_run_chunked`` of the record) whose outputs, 4,096 wide, are in the memory
    table."""
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", QWEN3_VL])
    assert code == 0
    findings = _findings(doc)
    assert "SU026" not in findings and "MM011" not in findings
    encoder = doc["encoder"]
    assert isinstance(encoder, dict)
    assert encoder["tokens_per_item"] == {"image": 16384, "video": 12288}
    assert encoder["encoder_cache_size"] == 16384
    assert encoder["profile_run"]["items"] == 1 and encoder["profile_run"]["modality"] == "image"
    line = _reservation(doc, "encoder outputs (profile run)")
    assert line is not None and line["bytes"] == 16384 * 4096 * 2
    assert any(m.endswith("vLLM logs: Encoder cache will be initialized with a budget of 16384 "
                          "tokens, and profiled with 1 image items of the maximum feature size.")
               for m in _messages(doc, "MM010"))


def test_qwen3_vl_max_pixels_lowers_the_image() -> None:
    """--mm-processor-kwargs max_pixels, where Qwen-VL's processing info reads it
    (get_image_size_with_most_features): 1,003,520 px give 980 tokens (vLLM's answer, row
    qwen3-vl-8b-max-pixels-1003520); the video under the same kwargs is not modelled, named."""
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", QWEN3_VL,
                       "--mm-processor-kwargs", '{"max_pixels": 1003520}',
                       "--disable-chunked-mm-input", "--max-num-batched-tokens", "2048"])
    assert code == 0 and "SU026" not in _findings(doc)
    encoder = doc["encoder"]
    assert isinstance(encoder, dict) and encoder["tokens_per_item"] == {"image": 980}
    assert any(m.startswith("video tokens per item with mm_processor_kwargs")
               for m in _messages(doc, "MM010"))


def test_a_limit_of_zero_turns_the_modality_off() -> None:
    _, doc = _json(["--device", "H100", "--", "vllm", "serve", QWEN3_VL,
                    "--limit-mm-per-prompt", '{"image": 0}'])
    encoder = doc["encoder"]
    assert isinstance(encoder, dict) and encoder["tokens_per_item"] == {"video": 12288}


def test_gemma3_prefix_lm_is_refused_below_its_image_and_not_raised() -> None:
    """Gemma-3 is a multimodal prefix-LM (chunked multimodal input off on CUDA) whose
    processing info has no get_mm_max_tokens_per_item: vLLM counts the dummy image (256
    tokens) for the budget, and its raise of the default has no floor (the record's
    default_raise_floor is null)."""
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", GEMMA3,
                       "--max-num-batched-tokens", "128"])
    assert code == 1 and _findings(doc)["SU026"]["message"] == _refusal(256, 128)
    _, doc = _json(["--device", "A100", "--", "vllm", "serve", GEMMA3])
    findings = _findings(doc)
    assert "SU026" not in findings and "MM011" not in findings
    encoder = doc["encoder"]
    assert isinstance(encoder, dict) and encoder["profile_run"]["items"] == 8  # 2,048 // 256
    line = _reservation(doc, "encoder outputs (profile run)")
    assert line is not None and line["bytes"] == 8 * 256 * 5376 * 2


def test_qwen25_vl_video_at_another_length_is_named_not_guessed() -> None:
    """vLLM derives Qwen-VL's video frames from max_model_len: recorded at the config's
    128,000, another length leaves the video out with a note (the image stays: 16,384)."""
    _, doc = _json(["--device", "H100", "--", "vllm", "serve", QWEN25_VL,
                    "--max-model-len", "32768"])
    encoder = doc["encoder"]
    assert isinstance(encoder, dict) and encoder["tokens_per_item"] == {"image": 16384}
    assert any(m.startswith("video tokens per item at max_model_len 32,768: not modelled")
               for m in _messages(doc, "MM010"))


@pytest.mark.parametrize(("config", "tokens"), [(LLAVA, 576), (LLAVA_NEXT, 2928)])
def test_llava_tokens_are_vllms_and_refused_in_its_words(config: str, tokens: int) -> None:
    """LLaVA-1.5 (CLIP 336 px / 14: 576) and LLaVA-NeXT (the 672 x 672 pinpoint's tiles and
    the base image: 2,928), vLLM's dummy-image counts (rows llava-1.5-7b,
    llava-v1.6-mistral-7b). The published llava-hf configs leave the text model's sizes to
    transformers' defaults, which `check`'s reader asks for: the encoder's report is
    compared directly."""
    catalog = load_catalog()
    data = encoder_data(catalog, catalog.engine_names[-1])
    assert data is not None
    raw = json.loads(Path(config).read_text(encoding="utf-8"))
    report = encoder_report(catalog, data, raw, cc=90, dtype="bfloat16", model_name="llava",
                            mm_encoder_attn_backend=None, limit_mm_per_prompt={},
                            mm_processor_kwargs={}, disable_chunked_mm_input=True,
                            max_num_batched_tokens=512, default_max_num_batched_tokens=8192)
    assert report is not None and report.tokens_per_item == {"image": tokens}
    assert [i.message for i in report.issues] == [_refusal(tokens, 512)]
    assert report.encoders[0].head_size == 64 and report.encoders[0].tower == "vit"


def test_a_recorded_count_is_not_taken_for_another_vision_tower() -> None:
    """The recorded counts hold for the recorded checkpoint's vision config: a LLaVA config
    with another image size leaves the image out, named (no guess)."""
    catalog = load_catalog()
    data = encoder_data(catalog, catalog.engine_names[-1])
    assert data is not None
    raw = json.loads(Path(LLAVA).read_text(encoding="utf-8"))
    raw["vision_config"]["image_size"] = 224
    report = encoder_report(catalog, data, raw, cc=90, dtype="bfloat16", model_name="llava",
                            mm_encoder_attn_backend=None, limit_mm_per_prompt={},
                            mm_processor_kwargs={}, disable_chunked_mm_input=True,
                            max_num_batched_tokens=512, default_max_num_batched_tokens=8192)
    assert report is not None and not report.tokens_per_item and not report.issues
    assert any("vision_config.image_size=224" in text and "not modelled" in text
               for _, text in report.notices)


SYNTHETIC = "tests/fixtures/hf_configs/synthetic/"


@pytest.mark.parametrize(("config", "tokens", "batched", "flags"), [
    # Step3-VL: vLLM's own image processor at 3024 px (row step3-vl: refused at 2048)
    (SYNTHETIC + "Step3VLForConditionalGeneration.json", 3164, 2048,
     ["--disable-chunked-mm-input"]),
    # Qwen2-Audio: a 30 s clip of the published WhisperFeatureExtractor (row qwen2-audio-7b)
    (SYNTHETIC + "Qwen2AudioForConditionalGeneration.json", 750, 512,
     ["--disable-chunked-mm-input"]),
    # BAGEL and Moondream3, multimodal prefix-LMs: CUDA turns chunked MM input off itself
    (SYNTHETIC + "BagelForConditionalGeneration.json", 4900, 4096, []),
    (SYNTHETIC + "Moondream3ForCausalLM.json", 730, 512, []),
    # DeepSeek-V4's multimodal model: vision_max_n_token 384 and the pad (row deepseek-v4-vl);
    # a multimodal prefix-LM where vision_n_layers > 0, so chunked MM input is off by itself
    (SYNTHETIC + "DeepseekV4ForConditionalGeneration.json", 387, 256, []),
])
def test_newly_recorded_families_are_refused_in_vllms_words(config: str, tokens: int,
                                                            batched: int,
                                                            flags: list[str]) -> None:
    """The families whose tokens per item the processing info answers (recorded by
    tools/encoder_oracle.py, the budget check asked at the batched tokens given here):
    vLLM's refusal at a smaller --max-num-batched-tokens, none at the item's own count."""
    code, doc = _json(["--device", "H100", "--", "vllm", "serve", config, *flags,
                       "--max-num-batched-tokens", str(batched)])
    assert code == 1 and doc["valid"] is False
    assert _findings(doc)["SU026"]["message"] == _refusal(tokens, batched)
    fixed = _json(["--device", "H100", "--", "vllm", "serve", config, *flags,
                   "--max-num-batched-tokens", str(tokens)])[1]
    assert "SU026" not in _findings(fixed)


def test_a_config_without_vision_config_is_reported_only_through_its_row() -> None:
    """Qwen2-Audio (an audio tower) and BAGEL (``vit_config``) have no ``vision_config``:
    their rows of tokens per item report them; a model type without a row stays silent
    (no encoder report), as a text-only model does, and so does DeepSeek-V4's text model,
    whose model type the multimodal model's row shares for another architecture."""
    catalog = load_catalog()
    data = encoder_data(catalog, catalog.engine_names[-1])
    assert data is not None
    kwargs: dict[str, Any] = {
        "cc": 90, "dtype": "bfloat16", "model_name": "m", "mm_encoder_attn_backend": None,
        "limit_mm_per_prompt": {}, "mm_processor_kwargs": {}, "disable_chunked_mm_input": True,
        "max_num_batched_tokens": 512, "default_max_num_batched_tokens": 8192}
    audio = json.loads(Path(SYNTHETIC + "Qwen2AudioForConditionalGeneration.json")
                       .read_text(encoding="utf-8"))
    report = encoder_report(catalog, data, audio, **kwargs)
    assert report is not None and report.tokens_per_item == {"audio": 750}
    assert not report.encoders and [i.message for i in report.issues] == [_refusal(750, 512)]
    assert encoder_report(catalog, data, {**audio, "model_type": "no_such_family"},
                          **kwargs) is None
    text = json.loads(Path("tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V4-Flash.json")
                      .read_text(encoding="utf-8"))
    assert text["model_type"] == "deepseek_v4" and "vision_config" not in text
    assert encoder_report(catalog, data, text, **kwargs) is None  # the text model: no row reads it


@pytest.mark.parametrize("architecture", [
    "InternS1ProForConditionalGeneration",  # model type qwen3_vl_moe
    "InternS2PreviewForConditionalGeneration",  # qwen3_5_moe
    "OpenCUAForConditionalGeneration",  # qwen2_5_vl
    "BeeForConditionalGeneration", "RForConditionalGeneration",  # llava_onevision
])
def test_a_model_class_sharing_a_recorded_model_type_is_not_given_its_count(
        architecture: str) -> None:
    """These classes read a recorded family's model type with processing infos of their
    own (vllm/model_executor/models/registry.py: interns1_pro, opencua, bee, rvl), whose
    answers are not recorded: each modality is named, none is given the family's count."""
    catalog = load_catalog()
    data = encoder_data(catalog, catalog.engine_names[-1])
    assert data is not None
    raw = json.loads(Path(SYNTHETIC + architecture + ".json").read_text(encoding="utf-8"))
    report = encoder_report(catalog, data, raw, cc=90, dtype="bfloat16", model_name="m",
                            mm_encoder_attn_backend=None, limit_mm_per_prompt={},
                            mm_processor_kwargs={}, disable_chunked_mm_input=True,
                            max_num_batched_tokens=512, default_max_num_batched_tokens=8192)
    assert report is not None and not report.tokens_per_item and not report.issues
    gaps = [text for _, text in report.notices if "not modelled (recorded with" in text]
    assert len(gaps) == 2 and all(architecture in text for text in gaps)
