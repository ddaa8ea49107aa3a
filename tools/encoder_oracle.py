#!/usr/bin/env python3
"""vLLM's own answers for the multimodal encoder at start-up: the vision encoder's attention
backend and the encoder budget check.

Run with an oracle interpreter (vLLM installed, CPU only), once per release (the extra
path holds torchvision and compressed-tensors, which the multimodal model modules import,
num2words (and docopt), which transformers' SmolVLMProcessor requires, and for the venvs
without it fastapi 0.136.3 with starlette, anyio, sniffio and annotated-doc: 0.29.0's
``pixtral.py``, which LLaVA, LLaVA-NeXT and Mistral-3 import, reaches
``vllm/entrypoints/serve/__init__.py`` through ``vllm/tokenizers/mistral.py``; each
``pip install --no-deps --target <dir>``)::

    ORACLE_DIR=/work/oracle ORACLE_EXTRA_PATH=/work/oracle-extra:<dir> \\
        /work/.venvs/oracle-0.33.0/bin/python tools/encoder_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/encoder.json.gz

``vit``: vLLM is made to believe it runs on a CUDA GPU (the harness's
``oracle.start_models``, the oracle's emulated ``NvmlCudaPlatform``); for every
capability, head size and dtype the unmodified ``current_platform.get_vit_attn_backend``
(vllm/platforms/cuda.py, what ``MMEncoderAttention`` and the ViT models reach through
``vllm/model_executor/models/vision.py:get_vit_attn_backend``) answers with the selected
backend, and for every explicit ``--mm-encoder-attn-backend`` choice with the backend or
the ``AssertionError`` text it raises.

``budget``: for each multimodal config (the fixtures and presets the tool maps), vLLM's
``ModelConfig`` (``skip_tokenizer_init``; optional ``limit_mm_per_prompt`` /
``mm_processor_kwargs``), its ``is_mm_prefix_lm``, the processing info's
``allowed_mm_limits`` and ``get_mm_max_tokens_per_item`` (None: vLLM counts the processor's
dummy inputs), the tokens per item the start-up's budget takes (``budget_tokens``:
``MultiModalBudget.mm_max_toks_per_item``; a family whose processing info needs the
checkpoint's processor files gets the published ones, ``tests/fixtures/processors``, and a
tokenizer stand-in of its placeholder tokens beside the config), the default-raise
floor ``EngineArgs._get_min_mm_batched_tokens`` (vllm/engine/arg_utils.py) and the budget
check ``compute_mm_encoder_budget`` (vllm/v1/core/encoder_cache_manager.py) for several
``max_num_batched_tokens`` with chunked multimodal input disabled, and ``profile_run``:
vLLM's ``MultiModalBudget`` (vllm/multimodal/encoder_budget.py) as the profile run builds it
(the modality it encodes, the items per batch, the encoder budget). Packages vLLM imports
but no answer here reads are stood in where an oracle venv lacks them (the structured
output grammars; the processor's tokenizer). Nothing here decides an answer:
tests/golden/test_encoder_oracle.py compares the tool with these records. A
config the harness cannot build (an architecture the CPU install cannot inspect) is
written as ``harness_error`` (no answer of vLLM's), and ``budget`` is null with
``budget_harness_error`` where the environment lacks a package those modules import.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import oracle
from oracle.tokenizer import write_tokenizer_stand_in

REPO = oracle.REPO
CAPABILITIES = oracle.cuda_capabilities(catalog_only=True, without=("10.3", "12.1"))
"""The catalog devices' capabilities, as first recorded (B300's 10.3 and GB10's 12.1 not asked)."""
HEAD_SIZES = (36, 40, 64, 72, 80, 96, 128, 256, 512)
DTYPES = ("float16", "bfloat16", "float32")
CHOICES = ("FLASH_ATTN", "TRITON_ATTN", "TORCH_SDPA", "FLASHINFER", "FLEX_ATTENTION",
           "ROCM_AITER_FA", "CPU_ATTN")
BATCHED_TOKENS = (2048, 2496, 4096, 8192)
CHECKED_TOKENS = (256, 512, *BATCHED_TOKENS)
"""The budget check is also asked at 256 and 512 batched tokens (an item smaller than 2,048,
an audio clip's or DeepSeek-V4's image, is refused there); the profile run at
``BATCHED_TOKENS``."""

PROCESSORS = "tests/fixtures/processors"
"""The published processor files of each family (tests/fixtures/processors/SOURCES.md)."""

MODELS: tuple[tuple[str, str, dict[str, Any], str | None], ...] = (
    ("gemma-4-26B-A4B", "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json", {}, None),
    ("gemma-4-26B-A4B-video-8-frames", "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json",
     {"limit_mm_per_prompt": {"video": {"count": 1, "num_frames": 8}}}, None),
    ("gemma-4-26B-A4B-no-video", "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json",
     {"limit_mm_per_prompt": {"video": 0}}, None),
    ("gemma-4-26B-A4B-max-soft-tokens-1120",
     "tests/fixtures/hf_configs/google--gemma-4-26B-A4B.json",
     {"mm_processor_kwargs": {"max_soft_tokens": 1120}}, None),
    ("gemma-3-27b", "schemas/models/gemma-3-27b.json", {}, "google--gemma-3-27b-it"),
    ("llama-4-scout", "schemas/models/llama-4-scout.json", {},
     "meta-llama--Llama-4-Scout-17B-16E-Instruct"),
    ("gemma-4-31B-it-nvfp4", "tests/fixtures/hf_configs/nvidia--Gemma-4-31B-IT-NVFP4.json", {},
     None),
    ("qwen3-vl-8b", "tests/fixtures/hf_configs/Qwen--Qwen3-VL-8B-Instruct.json", {},
     "Qwen--Qwen3-VL"),
    ("qwen3-vl-8b-max-pixels-1003520", "tests/fixtures/hf_configs/Qwen--Qwen3-VL-8B-Instruct.json",
     {"mm_processor_kwargs": {"max_pixels": 1003520}}, "Qwen--Qwen3-VL"),
    ("qwen3-vl-8b-no-video", "tests/fixtures/hf_configs/Qwen--Qwen3-VL-8B-Instruct.json",
     {"limit_mm_per_prompt": {"video": 0}}, "Qwen--Qwen3-VL"),
    ("qwen3-vl-30b-a3b", "tests/fixtures/hf_configs/Qwen--Qwen3-VL-30B-A3B-Instruct.json", {},
     "Qwen--Qwen3-VL"),
    ("qwen3.5-27b", "tests/fixtures/hf_configs/Qwen--Qwen3.5-27B.json", {}, "Qwen--Qwen3.5"),
    ("qwen3.5-35b-a3b", "tests/fixtures/hf_configs/Qwen--Qwen3.5-35B-A3B.json", {},
     "Qwen--Qwen3.5"),
    ("qwen2-vl-7b", "tests/fixtures/hf_configs/edge/qwen2-vl-7b-shape.json", {},
     "Qwen--Qwen2-VL"),
    ("qwen2-vl-7b-max-pixels-1003520", "tests/fixtures/hf_configs/edge/qwen2-vl-7b-shape.json",
     {"mm_processor_kwargs": {"max_pixels": 1003520}}, "Qwen--Qwen2-VL"),
    ("qwen2.5-vl-7b", "tests/fixtures/hf_configs/edge/qwen2.5-vl-7b-shape.json", {},
     "Qwen--Qwen2.5-VL"),
    ("qwen2.5-vl-7b-max-pixels-1003520",
     "tests/fixtures/hf_configs/edge/qwen2.5-vl-7b-shape.json",
     {"mm_processor_kwargs": {"max_pixels": 1003520}}, "Qwen--Qwen2.5-VL"),
    ("llava-1.5-7b", "tests/fixtures/processors/llava-hf--llava-1.5-7b-hf/config.json", {},
     "llava-hf--llava-1.5-7b-hf"),
    ("llava-v1.6-mistral-7b",
     "tests/fixtures/processors/llava-hf--llava-v1.6-mistral-7b-hf/config.json", {},
     "llava-hf--llava-v1.6-mistral-7b-hf"),
    ("mistral-small-3.1-24b",
     "tests/fixtures/processors/mistralai--Mistral-Small-3.1-24B-Instruct-2503/config.json", {},
     "mistralai--Mistral-Small-3.1-24B-Instruct-2503"),
    ("llava-onevision-qwen2-7b-ov",
     "tests/fixtures/hf_configs/synthetic/LlavaOnevisionForConditionalGeneration.json", {},
     "llava-hf--llava-onevision-qwen2-7b-ov-hf"),
    ("paligemma-3b-pt-224",
     "tests/fixtures/hf_configs/synthetic/PaliGemmaForConditionalGeneration.json", {},
     "google--paligemma-3b-pt-224"),
    ("internvl3-8b-hf", "tests/fixtures/hf_configs/synthetic/InternVLForConditionalGeneration.json",
     {}, "OpenGVLab--InternVL3-8B-hf"),
    ("aria", "tests/fixtures/hf_configs/synthetic/AriaForConditionalGeneration.json", {},
     "rhymes-ai--Aria"),
    ("internvl3-1b", "tests/fixtures/processors/OpenGVLab--InternVL3-1B/config.json", {},
     "OpenGVLab--InternVL3-1B"),
    ("smolvlm2-500m-video",
     "tests/fixtures/processors/HuggingFaceTB--SmolVLM2-500M-Video-Instruct/config.json", {},
     "HuggingFaceTB--SmolVLM2-500M-Video-Instruct"),
    ("step3-vl", "tests/fixtures/hf_configs/synthetic/Step3VLForConditionalGeneration.json", {},
     None),
    ("moondream3", "tests/fixtures/hf_configs/synthetic/Moondream3ForCausalLM.json", {}, None),
    ("moondream3-hf", "tests/fixtures/hf_configs/synthetic/HfMoondream.json", {}, None),
    ("bagel", "tests/fixtures/hf_configs/synthetic/BagelForConditionalGeneration.json", {}, None),
    ("qwen2-audio-7b", "tests/fixtures/hf_configs/synthetic/Qwen2AudioForConditionalGeneration.json",
     {}, "Qwen--Qwen2-Audio-7B-Instruct"),    ("deepseek-v4-vl",
     "tests/fixtures/hf_configs/synthetic/DeepseekV4ForConditionalGeneration.json", {}, None),
)
"""(id, config, ModelConfig keywords, processor files). Kimi-K2.5 is not asked: its image
processor is the checkpoint's remote code (``KimiK25ProcessingInfo`` loads it with
``cached_get_image_processor(..., trust_remote_code)``, vllm/model_executor/models/kimi_k25.py),
which is not available offline. InternVL's original format: OpenGVLab/InternVL3-1B's
config (vLLM's own processor reads only the config). LLaVA-OneVision, PaliGemma, InternVL
(transformers format) and Aria: the config classes' defaults (no public config.json of the
checkpoints was found), which carry the reference checkpoints' vision values
(tests/fixtures/processors/SOURCES.md).
Step3-VL, Moondream3, BAGEL (the config classes' defaults: their processing infos count
from vLLM's own processor and the config) and Qwen2-Audio (the published feature extractor
file) answer through ``get_mm_max_tokens_per_item``; so does DeepSeek-V4's multimodal model
(its config's ``vision_max_n_token``, from 0.30.0 on).
GLM-4.1V / GLM-4.5V are not asked: their video placeholder is rebuilt by decoding the
processor's token ids (``Glm4vMultiModalProcessor._apply_hf_processor_main``), which the
word-level tokenizer stand-in cannot reproduce, and the venvs' transformers 5.24 refuses
the combined call that follows (vLLM 0.33.0 pins transformers < 5.21)."""

# The tokenizer stand-in's special tokens per model type: the placeholder tokens the
# family's HF processor writes into the prompt and vLLM finds in the token ids, each one
# token, with the config's id where the config names one (vLLM matches the ids it reads
# from the config), else an id past the vocabulary.
STAND_IN_TOKENS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "qwen3_vl": (("<|image_pad|>", "image_token_id"), ("<|video_pad|>", "video_token_id"),
                 ("<|vision_start|>", "vision_start_token_id"),
                 ("<|vision_end|>", "vision_end_token_id")),
    "gemma3": (("<start_of_image>", "boi_token_index"), ("<end_of_image>", "eoi_token_index"),
               ("<image_soft_token>", "image_token_index"), ("\n", None), ("\n\n", None),
               ("\n\n\n", None), ("\n\n\n\n", None)),
    "llava": (("<image>", "image_token_index"),),
    "mistral3": (("[IMG]", "image_token_index"), ("[IMG_BREAK]", None), ("[IMG_END]", None)),
    "llama4": (("<|image|>", "image_token_index"), ("<|patch|>", None),
               ("<|image_start|>", None), ("<|image_end|>", None),
               ("<|tile_x_separator|>", None), ("<|tile_y_separator|>", None)),
}
STAND_IN_TOKENS["llava_onevision"] = (("<image>", "image_token_index"),
                                      ("<video>", "video_token_index"))
STAND_IN_TOKENS["paligemma"] = (("<image>", "image_token_index"), ("<bos>", None),
                                ("<eos>", None), ("\n", None))
STAND_IN_TOKENS["internvl"] = (("<IMG_CONTEXT>", "image_token_id"), ("<img>", None),
                               ("</img>", None), ("<video>", None))
STAND_IN_TOKENS["internvl_chat"] = (("<image>", None), ("<video>", None), ("<img>", None),
                                    ("</img>", None), ("<IMG_CONTEXT>", None),
                                    ("<|video_pad|>", None))
STAND_IN_TOKENS["smolvlm"] = (
    ("<image>", "image_token_id"), ("<fake_token_around_image>", None), ("<global-img>", None),
    ("<end_of_utterance>", None), ("\n", None),
    *((f"<row_{row}_col_{col}>", None) for row in range(1, 7) for col in range(1, 7)))
STAND_IN_TOKENS["aria"] = (("<|img|>", "image_token_index"), ("<pad>", None))
STAND_IN_TOKENS["qwen2_audio"] = (("<|AUDIO|>", "audio_token_index"), ("<|audio_bos|>", None),
                                  ("<|audio_eos|>", None))
STAND_IN_TOKENS["llava_next"] = STAND_IN_TOKENS["llava"]
for _qwen in ("qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen2_vl", "qwen2_5_vl"):
    STAND_IN_TOKENS[_qwen] = STAND_IN_TOKENS["qwen3_vl"]
STAND_IN_ATTRIBUTES: dict[str, dict[str, str]] = {
    "gemma3": {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
               "image_token": "<image_soft_token>"},
    "internvl": {"start_image_token": "<img>", "end_image_token": "</img>",
                 "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"},
    "aria": {"image_token": "<|img|>"},
    "smolvlm": {"fake_image_token": "<fake_token_around_image>", "image_token": "<image>",
                "global_image_token": "<global-img>",
                "end_of_utterance_token": "<end_of_utterance>"},
}
"""Named special tokens the family's processor reads from its tokenizer (Gemma3Processor:
``tokenizer.boi_token`` / ``image_token`` / ``eoi_token``), as the checkpoint's
tokenizer_config.json ``extra_special_tokens`` names them."""
STAND_IN_NAMED: dict[str, dict[str, str]] = {
    "paligemma": {"bos_token": "<bos>", "eos_token": "<eos>"},
}
"""The tokenizer's own named tokens the family's processor writes (PaliGemmaProcessor:
``tokenizer.bos_token`` after the image tokens), as the checkpoint's tokenizer_config.json
names them."""


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:1500]


def vit_answers() -> dict[str, Any]:
    import torch
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    auto: list[dict[str, Any]] = []
    explicit: list[dict[str, Any]] = []
    supported: dict[str, list[str]] = {}
    for cap in CAPABILITIES:
        oracle.emulate(cap)
        supported[cap] = [b.name for b in current_platform.get_supported_vit_attn_backends()]
        for head_size in HEAD_SIZES:
            for dtype in DTYPES:
                try:
                    chosen: str | None = current_platform.get_vit_attn_backend(
                        head_size, getattr(torch, dtype)).name
                    error = None
                except Exception as exc:  # recorded, never raised
                    chosen, error = None, _error(exc)
                auto.append({"capability": cap, "head_size": head_size, "dtype": dtype,
                             "backend": chosen, "error": error})
        for choice in CHOICES:
            member = AttentionBackendEnum.__members__.get(choice)
            if member is None:
                explicit.append({"capability": cap, "choice": choice, "backend": None,
                                 "error": "not an AttentionBackendEnum member"})
                continue
            try:
                got: str | None = current_platform.get_vit_attn_backend(
                    72, torch.bfloat16, backend=member).name
                error = None
            except AssertionError as exc:
                got, error = None, f"AssertionError: {exc}"
            explicit.append({"capability": cap, "choice": choice, "backend": got, "error": error})
    return {"supported": supported, "auto": auto, "explicit": explicit,
            "enum_members": [member.name for member in AttentionBackendEnum]}


def _model_dir(tmp: Path, name: str, path: str) -> Path:
    raw = json.loads((REPO / path).read_text(encoding="utf-8"))
    raw = raw.get("hf_config", raw) if "architectures" not in raw else raw
    target = tmp / name
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    return target


def _processor_files(target: Path, processor: str) -> None:
    """The family's published processor files beside the config, and the tokenizer
    stand-in (``_write_tokenizer_stand_in``)."""
    import shutil

    from transformers import AutoConfig

    for source in sorted((REPO / PROCESSORS / processor).glob("*.json")):
        shutil.copy(source, target / source.name)
    hf_config = AutoConfig.from_pretrained(str(target))
    _write_tokenizer_stand_in(target, hf_config)


def _write_tokenizer_stand_in(target: Path, hf_config: Any) -> None:
    """A word-level tokenizer of the family's placeholder tokens (``STAND_IN_TOKENS``),
    where the checkpoint's tokenizer files are not available offline. It cannot change a
    count: the processor expands each placeholder to the number of tokens its image /
    video processor computes from the item's size (the processor files and the config),
    and vLLM counts the embedding positions among those ids; the tokenizer only has to
    give each placeholder the one id the config names, as the checkpoint's does, and
    every other word one unknown id (the dummy text's words are not placeholders)."""
    model_type = hf_config.model_type
    vocab: dict[str, int] = {"<unk>": 0}
    spare = int(getattr(hf_config.get_text_config(), "vocab_size", 0) or 0) + 1000
    for token, attribute in STAND_IN_TOKENS[model_type]:
        given = getattr(hf_config, attribute, None) if attribute else None
        vocab[token] = given if isinstance(given, int) else spare + len(vocab)
    config: dict[str, Any] = dict(STAND_IN_NAMED.get(model_type, {}))
    if model_type in STAND_IN_ATTRIBUTES:
        config["extra_special_tokens"] = STAND_IN_ATTRIBUTES[model_type]
    write_tokenizer_stand_in(target, vocab, [token for token, _ in STAND_IN_TOKENS[model_type]],
                             config)


def budget_answer(tmp: Path, name: str, path: str, kwargs: dict[str, Any],
                  processor: str | None = None) -> dict[str, Any]:
    from vllm.config import ModelConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.v1.core.encoder_cache_manager import compute_mm_encoder_budget

    out: dict[str, Any] = {"id": name, "config": path, "kwargs": kwargs,
                           "processor": processor}
    skip = processor is None  # with the processor files vLLM loads the tokenizer stand-in
    try:
        target = _model_dir(tmp, name, path)
        if processor is not None:
            _processor_files(target, processor)
        try:
            model_config = ModelConfig(model=str(target), skip_tokenizer_init=skip, **kwargs)
        except Exception as exc:
            if type(exc).__name__ != "AmbiguousGlobalPerLayerAttributeError":
                raise
            _global_per_layer_attributes()
            model_config = ModelConfig(model=str(target), skip_tokenizer_init=skip, **kwargs)
    except Exception as exc:  # the harness could not build the config: no answer of vLLM's
        out["harness_error"] = _error(exc).replace(str(tmp), "<scratch>")  # reproducible
        return out
    out["is_multimodal_model"] = bool(model_config.is_multimodal_model)
    if not model_config.is_multimodal_model:
        return out
    out["is_mm_prefix_lm"] = bool(model_config.is_mm_prefix_lm)
    out["max_model_len"] = model_config.max_model_len
    try:
        info = MULTIMODAL_REGISTRY.get_processing_info(model_config)
        out["supported_mm_limits"] = sorted(info.supported_mm_limits)
        allowed = dict(info.allowed_mm_limits)
        out["allowed_mm_limits"] = allowed
        active = [m for m in info.supported_mm_limits if allowed.get(m, 0) > 0]
        tokens = info.get_mm_max_tokens_per_item(seq_len=model_config.max_model_len,
                                                 mm_counts=dict.fromkeys(active, 1))
        out["max_tokens_per_item"] = (None if tokens is None else
                                      {m: tokens[m] for m in active if m in tokens})
    except Exception as exc:  # the architecture could not be inspected here: no answer
        out["harness_error"] = _error(exc).replace(str(tmp), "<scratch>")  # reproducible
        return out
    min_batched = getattr(EngineArgs, "_get_min_mm_batched_tokens", None)
    out["default_raise"] = min_batched is not None  # the raise of the default exists
    floor = min_batched(model_config) if min_batched is not None else None
    out["default_raise_floor"] = list(floor) if floor is not None else None
    out["budget_tokens"] = _budget_tokens(model_config, tmp)
    if out["budget_tokens"]["error"] is not None:  # no answer of vLLM's for this row
        out["harness_error"] = "the encoder budget: " + out["budget_tokens"]["error"]
        return out
    tokens = out["budget_tokens"]["tokens"]
    checks: dict[str, Any] = {}
    if tokens:
        for batched in CHECKED_TOKENS:
            scheduler = SimpleNamespace(disable_chunked_mm_input=True,
                                        max_num_batched_tokens=batched,
                                        max_num_encoder_input_tokens=batched,
                                        encoder_cache_size=batched)
            try:
                compute, cache = compute_mm_encoder_budget(scheduler, tokens)
                checks[str(batched)] = {"error": None, "encoder_compute_budget": compute,
                                        "encoder_cache_size": cache}
            except ValueError as exc:
                checks[str(batched)] = {"error": str(exc)}
    out["budget_check"] = checks
    if tokens:
        out["profile_run"] = {str(batched): _profile_run(model_config, batched)
                              for batched in BATCHED_TOKENS}
        out["profile_run_chunked"] = {
            str(batched): _profile_run(model_config, batched, disable_chunked_mm_input=False)
            for batched in BATCHED_TOKENS}
    return out


def _global_per_layer_attributes() -> None:
    """vLLM 0.25.1-0.27.1 read ``hf_text_config.head_dim`` of a config whose layers
    differ (Gemma-4), as the transformers releases of their time answered it: the global
    value. The oracle venvs' newer transformers refuses that read unless the config allows
    it (``allow_global_per_layer_attribute_access``); the harness allows it, as those
    transformers did. No encoder or budget answer reads the head size."""
    from transformers.integrations.heterogeneity import configuration_utils

    for cls in vars(configuration_utils).values():
        if isinstance(cls, type) and isinstance(
                vars(cls).get("allow_global_per_layer_attribute_access"), property):
            cls.allow_global_per_layer_attribute_access = property(  # type: ignore[attr-defined]
                lambda self: True, lambda self, value: None)


class _TokenizerStandIn:
    """Handed to the multimodal processor where vLLM would load the checkpoint's
    tokenizer (``skip_tokenizer_init``: the records hold no tokenizer files). The
    budget reads only the processing info (``get_mm_max_tokens_per_item``) and the
    scheduler's limits; nothing here tokenizes."""


def _budget_tokens(model_config: Any, tmp: Path) -> dict[str, Any]:
    """The tokens per item the start-up's budget takes (``MultiModalBudget``'s
    ``mm_max_toks_per_item``: ``get_mm_max_toks_per_item``, the processing info's answer
    or, where it has none, the count of the processor's dummy inputs at the largest
    size), for every modality ``--limit-mm-per-prompt`` leaves on; built with chunked
    multimodal input on, so no budget refusal stops it. ``error``: the harness could not
    run it (the processor files are not here, or the venv's transformers refuses what
    the release's processor cache asks of it: 0.26.0 applies Gemma3Processor /
    Llama4Processor to the placeholder text alone, which transformers 5.24 refuses), no
    answer of vLLM's."""
    from vllm.config import SchedulerConfig, VllmConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.encoder_budget import MultiModalBudget

    with _tokenizer_stand_in(model_config):
        try:
            scheduler = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=256,
                                        max_model_len=model_config.max_model_len,
                                        is_encoder_decoder=False,
                                        disable_chunked_mm_input=False)
            vllm_config = VllmConfig(model_config=model_config, scheduler_config=scheduler)
            try:
                budget = MultiModalBudget(vllm_config, MULTIMODAL_REGISTRY, enable_cache=False)
            except TypeError:  # releases without the keyword
                budget = MultiModalBudget(vllm_config, MULTIMODAL_REGISTRY)
        except Exception as exc:  # no processor here: no answer of vLLM's
            return {"tokens": None, "error": _error(exc).replace(str(tmp), "<scratch>")}
    return {"tokens": dict(budget.mm_max_toks_per_item), "error": None}


class _tokenizer_stand_in:
    """Without processor files (``skip_tokenizer_init``) vLLM is handed
    ``_TokenizerStandIn`` where it would load the checkpoint's tokenizer; with them it
    loads the word-level stand-in written beside the config."""

    def __init__(self, model_config: Any) -> None:
        self.active = bool(model_config.skip_tokenizer_init)
        self.saved: Any = None

    def __enter__(self) -> None:
        from vllm.multimodal import registry as mm_registry_module

        self.saved = mm_registry_module.cached_tokenizer_from_config
        if self.active:
            mm_registry_module.cached_tokenizer_from_config = (
                lambda *args, **kwargs: _TokenizerStandIn())

    def __exit__(self, *exc: object) -> None:
        from vllm.multimodal import registry as mm_registry_module

        mm_registry_module.cached_tokenizer_from_config = self.saved


def _profile_run(model_config: Any, batched: int, *,
                 disable_chunked_mm_input: bool = True) -> dict[str, Any]:
    """vLLM's ``MultiModalBudget`` (vllm/multimodal/encoder_budget.py), as the GPU model
    runner builds it for the profile run: the encoder budget and how many items of
    which modality the profile run encodes (``gpu_model_runner.profile_run``), with
    ``max_num_seqs`` 256, chunked multimodal input disabled (``profile_run``) or on, as
    for a model that is no multimodal prefix-LM (``profile_run_chunked``)."""
    from vllm.config import SchedulerConfig, VllmConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.encoder_budget import MultiModalBudget

    given = {"max_num_batched_tokens": batched, "max_num_seqs": 256,
             "max_model_len": model_config.max_model_len, "is_encoder_decoder": False,
             "disable_chunked_mm_input": disable_chunked_mm_input}
    try:
        with _tokenizer_stand_in(model_config):
            scheduler = SchedulerConfig(**given)
            vllm_config = VllmConfig(model_config=model_config, scheduler_config=scheduler)
            try:
                budget = MultiModalBudget(vllm_config, MULTIMODAL_REGISTRY, enable_cache=False)
            except TypeError:  # releases without the keyword
                budget = MultiModalBudget(vllm_config, MULTIMODAL_REGISTRY)
    except ValueError as exc:  # compute_mm_encoder_budget's refusal
        return {"error": str(exc)}
    return {"error": None, "max_num_seqs": vllm_config.scheduler_config.max_num_seqs,
            "max_model_len": model_config.max_model_len,
            "encoder_compute_budget": budget.encoder_compute_budget,
            "encoder_cache_size": budget.encoder_cache_size,
            "encoder_budget": budget.get_encoder_budget(),
            "modality": budget.get_modality_with_max_tokens(),
            "max_items_per_batch": dict(budget.mm_max_items_per_batch),
            "max_items_per_prompt": dict(budget.mm_max_items_per_prompt)}


def _stub_structured_output_grammar() -> None:
    """``vllm.v1.core.encoder_cache_manager`` imports ``vllm.v1.request``, whose structured
    output package annotates a class with ``llguidance.LLMatcher``
    (``vllm/v1/structured_output/backend_guidance.py``) and xgrammar's classes
    (``backend_xgrammar.py``) at import; the oracle venvs of 0.25.1-0.29.0 lack llguidance
    and xgrammar. No encoder or budget answer reads a grammar: an inert stand-in is
    importable in their place (only where a package is missing)."""
    import importlib.util
    import types

    class _Annotations(types.ModuleType):
        def __getattr__(self, item: str) -> type:
            if item.startswith("__"):
                raise AttributeError(item)
            return type(item, (), {})  # a class: ``X | None`` annotations evaluate

    for package, modules in (("llguidance", ("", ".hf", ".torch")), ("xgrammar", ("",))):
        if importlib.util.find_spec(package) is None:
            for name in modules:
                sys.modules[package + name] = _Annotations(package + name)


def _stand_in_blake3() -> None:
    """The processor's cache keys items by a blake3 hash (``vllm/multimodal/hasher.py``);
    the oracle venvs lack the compiled ``blake3``. The dummy inputs are hashed once, never
    looked up again here, and no count reads a hash: a sha256-backed stand-in is
    importable in its place (only where the package is missing)."""
    import hashlib
    import importlib.util
    import types

    if importlib.util.find_spec("blake3") is not None:
        return

    class _Blake3:
        def __init__(self, data: bytes = b"", **_: object) -> None:
            self._hash = hashlib.sha256(data)

        def update(self, data: bytes) -> _Blake3:
            self._hash.update(data)
            return self

        def digest(self, length: int = 32) -> bytes:
            return self._hash.digest()[:length]

        def hexdigest(self, length: int = 32) -> str:
            return self._hash.hexdigest()[:2 * length]

    module = types.ModuleType("blake3")
    module.blake3 = _Blake3  # type: ignore[attr-defined]
    sys.modules["blake3"] = module


def _stand_in_pixtral_vision_helpers() -> None:
    """vLLM 0.25.1-0.30.0's ``vllm/model_executor/models/pixtral.py`` imports
    ``PixtralRotaryEmbedding`` and ``position_ids_in_meshgrid`` from transformers' Pixtral
    model, which the oracle venvs' transformers 5.24 no longer has (it names the class
    ``PixtralVisionRotaryEmbedding``); LLaVA, LLaVA-NeXT and Mistral-3 import that module.
    Only the vision tower uses them (``PixtralHFVisionModel``'s constructor and forward),
    which no encoder or budget answer builds or runs: an inert name that refuses to be
    called is importable in their place (only where a name is missing)."""
    from transformers.models.pixtral import modeling_pixtral

    def _not_run(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the harness's stand-in: the vision tower is not built here")

    for name in ("PixtralRotaryEmbedding", "position_ids_in_meshgrid"):
        if not hasattr(modeling_pixtral, name):
            setattr(modeling_pixtral, name, _not_run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .json.gz file")
    parser.add_argument("--only", default="",
                        help="comma-separated MODELS ids (a trial run; no golden is written "
                             "from it)")
    args = parser.parse_args(argv)
    rows = [row for row in MODELS if not args.only or row[0] in args.only.split(",")]
    oracle.start_models()
    _stub_structured_output_grammar()
    _stand_in_blake3()
    _stand_in_pixtral_vision_helpers()
    import vllm

    answer: dict[str, Any] = {"vllm_version": vllm.__version__,
                              "vit": {} if args.only else vit_answers()}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            answer["budget"] = [budget_answer(Path(tmp), *row) for row in rows]
    except ImportError as exc:  # the oracle environment lacks a package vLLM imports here
        answer["budget"] = None
        answer["budget_harness_error"] = _error(exc)
    for row in answer["budget"] or []:
        print(f"{row['id']}: {row.get('harness_error') or row.get('max_tokens_per_item')} "
              f"{row.get('budget_tokens')}"[:300],
              file=sys.stderr)
    oracle.write_gz(args.out, oracle.compact(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
