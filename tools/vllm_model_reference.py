#!/usr/bin/env python3
"""vLLM's own answer for a model: build its real model class from a config.json
on CPU (no GPU, no weights) and record what vLLM's KV-cache manager reads.

Run with an oracle interpreter (vLLM installed, CPU only)::

    /work/venvs/oracle-0.33.0/bin/python tools/vllm_model_reference.py \\
        --out tests/golden/vllm_models/vllm-0.33.0.jsonl.gz \\
        schemas/models/*.json tests/fixtures/hf_configs/*.json

For every config.json it

1. imports vLLM as a CUDA platform of compute capability 9.0 with the harness's
   ``oracle.start_models`` (tools/oracle/: the oracle instrument at ``$ORACLE_DIR``,
   compiled extensions stubbed, ``current_platform`` = vLLM's NvmlCudaPlatform, and the
   CPU stand-ins that let a model class be built on the meta device);
2. builds the ``VllmConfig`` exactly as ``vllm serve`` does
   (``EngineArgs(...).create_engine_config()``: model-wide sliding window,
   hybrid block-size alignment, the models' ``verify_and_update_config``) from
   the file (a copy in a temporary directory, ``quantization_config`` removed:
   weight quantisation does not change the attention layout, and the CPU cannot
   build quantised kernels);
3. instantiates the class vLLM's registry resolves
   (``get_model_architecture``) under ``torch.device("meta")``, so no weight
   memory is allocated;
4. reads every ``AttentionLayerBase`` module in the static forward context and
   calls its ``get_kv_cache_spec(vllm_config)`` followed by the runner's
   ``customize_attention_spec`` (exactly as ``GPUModelRunner.get_kv_cache_spec``),
   recording KV sharing targets;
5. groups the specs with ``vllm.v1.core.kv_cache_planning.get_kv_cache_groups``;
6. takes the engine's next step once the model is built,
   ``current_platform.update_block_size_for_backend`` (the backends' preferred block
   size, the hybrid Mamba alignment on the emulated platform), and records the
   block sizes, the specs' pages and the groups again (``aligned``).

An answer is vLLM's build (``status: ok``) or vLLM's refusal (``status: refused``:
a ``ValueError`` / ``AssertionError`` / ``NotImplementedError`` raised by vLLM's or
transformers' own code). Anything else (a missing module, a device access on the
CPU, a stub answering wrongly) is the harness failing: it is printed, the exit
status is 1 and nothing is written, so a failure is never recorded as vLLM's answer.

The answers are written as compact JSON lines (gzip) so that CI compares the
project's model reader with vLLM without vLLM installed. Nothing here is
copied from vLLM; every value is what vLLM's code returned.

The CPU-only patches beyond the oracle instrument's are listed in tools/oracle/models.py.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import oracle
from oracle.models import MODEL_CAPABILITY as CAPABILITY
from oracle.models import STAND_IN_MODEL_TYPES as _STAND_IN_MODEL_TYPES
from oracle.models import device_tensors_on_meta as _device_tensors_on_meta
from oracle.models import gpu_model_runner
from oracle.models import on_gpu as _on_gpu  # noqa: F401  (the name recorders imported from here)
from oracle.models import start_models as _bootstrap  # noqa: F401  (the name recorders called here)
from oracle.models import without_weight_downloads as _without_weight_downloads
from oracle.tokenizer import UNKNOWN, write_tokenizer_stand_in

REPO = oracle.REPO
DEFAULT_MAX_MODEL_LEN = 8192
"""Every model is built with this ``max_model_len`` (clamped to the config's
own maximum by vLLM): the layer layout does not depend on it, and a fixed
value keeps the answers comparable."""

MODEL_DTYPE = "bfloat16"
"""``--dtype``: fixed, so that every answer is for the same activation dtype
(float32 configs would otherwise be refused by every MLA backend)."""

_LAYER_INDEX = re.compile(r"\.(?:layers|layer|h|blocks|decoder\.layers|layer_stack)\.(\d+)\.")
"""A layer's index in its module name (``encoder.layer.<i>.`` is BERT's naming,
``decoder.layer_stack.<i>.`` FireRedLID's, fireredlid.py:317-326 in 0.28.0)."""


_TOP_INDEX = re.compile(r"^(?:model\.)?(\d+)\.")
"""Falcon-H1 registers its Mamba mixers as ``model.<num_hidden_layers + i>.mixer``;
ModernBERT names its attention ``<i>.attn`` (vllm/model_executor/models/modernbert.py:114,
``prefix=f"{layer_id}.attn"``)."""


def _layer_index(name: str, hf_config: Any = None) -> int | None:
    shared = _shared_block_index(name, hf_config)
    if shared is not None:
        return shared
    match = _LAYER_INDEX.search("." + name) or _TOP_INDEX.search(name)
    return int(match.group(1)) if match else None


_SHARED_ATTN = re.compile(r"^(?:model\.)?attn\.(\d+)$")
_NUMBERED_MIXER = re.compile(r"^(?:model\.)?(\d+)\.mixer$")


def _shared_block_index(name: str, hf_config: Any) -> int | None:
    """The decoder layer of a cache vLLM names after a shared attention block (Zamba2:
    zamba2.py:185-205 names the j-th Attention ``attn.<j>``, numbered block by block: the
    bare block ``b`` of ``num_mem_blocks`` starts at ``b * (H + num_mem_blocks - 1) //
    num_mem_blocks`` and takes the hybrid layers ``k`` with ``k % num_mem_blocks == b``;
    :745-750 names layer ``i``'s Mamba mixer ``<H + i>.mixer``; H = len(hybrid_layer_ids))."""
    hybrid = getattr(hf_config, "hybrid_layer_ids", None)
    if not isinstance(hybrid, list) or not hybrid:
        return None
    count = len(hybrid)
    match = _SHARED_ATTN.match(name)
    if match:
        blocks = max(1, int(getattr(hf_config, "num_mem_blocks", 1) or 1))
        order: dict[int, int] = {}
        for bare in range(blocks):
            j = bare * (count + blocks - 1) // blocks
            for k in range(count):
                if k % blocks == bare:
                    order[j] = k
                    j += 1
        k = order.get(int(match.group(1)))
        return hybrid[k] if k is not None else None
    match = _NUMBERED_MIXER.match(name)
    if match and int(match.group(1)) >= count:
        return int(match.group(1)) - count
    return None


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _spec_record(spec: Any) -> dict[str, Any]:
    from vllm.v1 import kv_cache_interface as kvi

    record: dict[str, Any] = {
        "spec": type(spec).__name__,
        "block_size": spec.block_size,
        "page_size_bytes": spec.page_size_bytes,
    }
    if isinstance(spec, kvi.AttentionSpec):
        record.update(
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            head_size_v=getattr(spec, "head_size_v", spec.head_size),
            dtype=_dtype_name(spec.dtype),
        )
        for key in ("sliding_window", "attention_chunk_size"):
            value = getattr(spec, key, None)
            if value is not None:
                record[key] = value
        for key in ("cache_dtype_str", "sink_len", "compress_ratio"):
            value = getattr(spec, key, None)
            if value not in (None, 0, False):
                record[key] = value if isinstance(value, int | str) else str(value)
    elif isinstance(spec, kvi.MambaSpec):
        record.update(
            shapes=[list(shape) for shape in spec.shapes],
            dtypes=[_dtype_name(d) for d in spec.dtypes],
            mamba_type=str(getattr(spec.mamba_type, "value", spec.mamba_type)),
        )
        if spec.page_size_padded is not None:
            record["page_size_padded"] = spec.page_size_padded
        for key in ("num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment"):
            value = getattr(spec, key, None)
            if value:
                record[key] = value
    return record


def _slopes_on_cpu(model_cls: Any) -> None:
    """A model module's ALiBi-slope helper (e.g. step1.py ``_get_step_alibi_slopes``, whose
    tensor the layer turns into a list) computes on the CPU: under ``torch.device("meta")``
    its tensor has no values. The slopes do not decide a cache shape."""
    import functools

    import torch

    module = sys.modules[model_cls.__module__]
    for name, func in list(vars(module).items()):
        if "alibi_slopes" in name and callable(func) and not getattr(func, "_on_cpu", False):
            def on_cpu(*args: Any, _func: Any = func, **kwargs: Any) -> Any:
                with torch.device("cpu"):
                    return _func(*args, **kwargs)

            functools.update_wrapper(on_cpu, func)
            on_cpu._on_cpu = True  # type: ignore[attr-defined]
            setattr(module, name, on_cpu)


CPU_INITS: dict[str, tuple[str, ...]] = {
    # RelPositionalEncoding.__init__ takes .item() of a tensor it builds (conformer_encoder.py:61,
    # FireRed-ASR2's audio encoder): a positional table, never a cache shape
    "vllm.model_executor.models.conformer_encoder": ("RelPositionalEncoding",),
}
"""{module: classes} whose ``__init__`` computes tensor values, built on the CPU."""


def _inits_on_cpu() -> None:
    import functools
    import importlib

    import torch

    for module_name, names in CPU_INITS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a release without the module
            continue
        for name in names:
            cls = getattr(module, name, None)
            if cls is None or getattr(cls.__init__, "_on_cpu", False):
                continue

            def on_cpu(self: Any, *args: Any, _init: Any = cls.__init__, **kwargs: Any) -> None:
                with torch.device("cpu"):
                    _init(self, *args, **kwargs)

            functools.update_wrapper(on_cpu, cls.__init__)
            on_cpu._on_cpu = True  # type: ignore[attr-defined]
            cls.__init__ = on_cpu


TOKENIZER_STAND_INS: dict[str, tuple[str, ...]] = {
    "GritLM": ("<s>", "\u2581<", "<", "|", "embed", ">", "<0x0A>", "user"),
    # the image token's id, tokenizer.vocab["<image>"] (deepseek_vl2.py:376-377,
    # deepseek_ocr.py:401, deepseek_ocr2.py:268 in 0.33.0)
    "DeepseekVLV2ForCausalLM": ("<image>",),
    "DeepseekOCRForCausalLM": ("<image>",),
    "DeepseekOCR2ForCausalLM": ("<image>",),
    "UnlimitedOCRForCausalLM": ("<image>",),  # a DeepseekOCRForCausalLM (unlimited_ocr.py:265)
    # the config's vision_token (IsaacConfig's default "<image>"), tokenizer.encode(...)[0]
    # (isaac.py:728-731, :835-838)
    "IsaacForConditionalGeneration": ("<image>",),
    # NemotronH_Nano_VL_V2 encodes the image start / end / context tokens
    # (nano_nemotron_vl.py:1046-1055; IMG_START, IMG_END, IMG_CONTEXT of
    # vllm/transformers_utils/processors/nano_nemotron_vl.py:37-39)
    "NemotronH_Nano_VL_V2": ("<img>", "</img>", "<image>"),
}
"""{architecture: tokens}: model classes that read the tokenizer while they are built, and
the tokens they look up. GritLM's ``GritLMMeanPool`` (the ``embed`` pooler of every
``GritLM`` built as a pooling model) takes ``cached_tokenizer_from_config`` and
``convert_tokens_to_ids`` of these tokens (vllm/model_executor/models/gritlm.py:41-59 in
0.25.1-0.28.0): the reference, offline, writes a tokenizer stand-in of them beside the config
(``oracle.tokenizer``) and lets vLLM load it (``skip_tokenizer_init`` false for these
architectures). The ids only feed the pooler's prompt matching, never a layer or a cache."""


TOKENIZER_NOTE = "tokenizer stand-in written beside config.json (its model class reads the tokenizer)"

_QWEN3_VL_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")

_HUNYUAN_VL_TOKENS = {"image_token": "<image>", "image_start_token": "<img_start>",
                      "image_end_token": "<img_end>", "pad_token": "<pad>"}

_EMU3_TOKENS = {"image_token": "<image>", "boi_token": "<|image start|>",
                "eoi_token": "<|image end|>", "image_wrapper_token": "<|image token|>",
                "eof_token": "<|extra_201|>"}

PROCESSOR_STAND_INS: dict[str, tuple[str, tuple[str, ...]] | tuple[str, tuple[str, ...], dict[str, Any]]] = {
    # ColQwen3ProcessingInfo.get_hf_processor builds the standard Qwen3VLProcessor whatever
    # the checkpoint's processor class (vllm/model_executor/models/colqwen3.py:55-64 in
    # 0.33.0), and get_supported_mm_limits asks it for a video processor (:66-84): the
    # Qwen3-VL processor files (tests/fixtures/processors/Qwen--Qwen3-VL)
    "ColQwen3": ("Qwen--Qwen3-VL", _QWEN3_VL_TOKENS),
    "OpsColQwen3Model": ("Qwen--Qwen3-VL", _QWEN3_VL_TOKENS),
    "Qwen3VLNemotronEmbedModel": ("Qwen--Qwen3-VL", _QWEN3_VL_TOKENS),
    # ColQwen3_5ProcessingInfo likewise (colqwen3_5.py:45-75): Qwen3.5's processor files
    "ColQwen3_5": ("Qwen--Qwen3.5", _QWEN3_VL_TOKENS),
    # the Transformers backend's TransformersMultiModalProcessingInfo asks the checkpoint's
    # AutoProcessor which modalities it has (transformers/multimodal.py:146-178);
    # transformers' HunYuanVLProcessor asks its tokenizer for the image / image-start /
    # image-end / pad tokens (processing_hunyuan_vl.py:42-70 in transformers 5.24): its
    # image processor's defaults and a stand-in naming those tokens
    "HunYuanVLForConditionalGeneration": (
        "tencent--HunyuanOCR", tuple(_HUNYUAN_VL_TOKENS.values()),
        {"extra_special_tokens": {k: v for k, v in _HUNYUAN_VL_TOKENS.items() if k != "pad_token"},
         "pad_token": "<pad>"}),
    # transformers' Emu3Processor likewise (processing_emu3.py:75-88: image, boi, eoi,
    # image-wrapper, eof and bos tokens of its tokenizer)
    # the Transformers backend's own multimodal classes (their synthetic configs are small
    # LLaVAs: tools/synthetic_model_configs.py): llava-1.5's processor files
    **dict.fromkeys(("TransformersMultiModalForCausalLM", "TransformersMultiModalEmbeddingModel",
                     "TransformersMultiModalMoEForCausalLM"),
                    ("llava-hf--llava-1.5-7b-hf", ("<image>",))),
    # (a small Gemma-3: Gemma3Processor asks its tokenizer for the image tokens)
    "TransformersMultiModalForSequenceClassification": (
        "google--gemma-3-27b-it",
        ("<start_of_image>", "<end_of_image>", "<image_soft_token>", "\n", "\n\n"),
        {"extra_special_tokens": {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                                  "image_token": "<image_soft_token>"}}),
    # vLLM's own Ovis2_5Processor (vllm/transformers_utils/processors/ovis2_5.py:35-103) loads
    # the checkpoint's AutoImageProcessor and tokenizer, and adds its image / video tokens
    **dict.fromkeys(("Ovis2_5", "Ovis2_6ForCausalLM", "Ovis2_6_MoeForCausalLM"),
                    ("AIDC-AI--Ovis2.5", ("<image>", "<video>"))),
    # transformers' VibeVoiceAsrProcessor looks its audio tokens up in the tokenizer
    # (processing_vibevoice_asr.py:68-85 in transformers 5.24): its feature extractor's defaults
    "VibeVoiceAsrForConditionalGeneration": (
        "microsoft--VibeVoice-ASR",
        ("<|box_start|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|AUDIO_DURATION|>")),
    "Emu3ForConditionalGeneration": (
        "BAAI--Emu3-Chat-hf", (*_EMU3_TOKENS.values(), "<|extra_203|>"),
        {"extra_special_tokens": _EMU3_TOKENS, "bos_token": "<|extra_203|>"}),
}
"""{architecture: (folder of tests/fixtures/processors, placeholder tokens)}: model classes
whose processing info ModelConfig asks while the engine config is made
(``supported_mm_limits``, EngineArgs.create_engine_config): the reference copies the
family's published processor files beside the config and writes a tokenizer stand-in of
the placeholders (the processor loads a tokenizer). The processor decides what a prompt's
items cost, never a layer or a cache."""

PROCESSOR_NOTE = "processor files and a tokenizer stand-in written beside config.json"


def _tokenizer_stand_in(raw: dict[str, Any], target: Path) -> bool:
    """The tokenizer stand-in beside config.json for an architecture of
    ``TOKENIZER_STAND_INS``; whether one was written."""
    architectures = raw.get("architectures") or []
    tokens = next((TOKENIZER_STAND_INS[a] for a in architectures if a in TOKENIZER_STAND_INS), None)
    if tokens is None:
        return False
    vocab = {UNKNOWN: 0} | {token: i for i, token in enumerate(tokens, start=1)}
    write_tokenizer_stand_in(target, vocab, tokens)
    return True


def _prepare_dir(config_path: Path, workdir: Path) -> tuple[Path, list[str]]:
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    notes: list[str] = []
    for key in ("quantization_config", "compression_config"):
        if key in raw:
            del raw[key]
            notes.append(f"{key} removed")
    for section in ("text_config", "llm_config"):
        sub = raw.get(section)
        if isinstance(sub, dict) and "quantization_config" in sub:
            del sub["quantization_config"]
            notes.append(f"{section}.quantization_config removed")
    notes += _without_weight_downloads(raw)
    if raw.get("model_type") in _STAND_IN_MODEL_TYPES:
        for section in (None, "llm_config", "vision_config"):
            holder = raw if section is None else raw.get(section)
            if isinstance(holder, dict) and "auto_map" in holder:
                del holder["auto_map"]
                notes.append(f"{section + '.' if section else ''}auto_map removed "
                             "(stand-in config class for the remote code)")
    target = workdir / config_path.stem
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    # files the model class reads from the checkpoint beside config.json (Dots3Note's
    # added_tokens.json, vllm/models/dots3_note/nvidia/multimodal.py:98-105): the config's
    # ``_checkpoint_files`` {name: JSON content}, written there and left out of config.json
    files = raw.pop("_checkpoint_files", None) or {}
    (target / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    for name, content in files.items():
        # a relative path below the checkpoint (Kimi-Audio's whisper-large-v3/config.json,
        # vllm/model_executor/models/kimi_audio.py:97-106), never above it
        relative = Path(*[part for part in Path(name).parts if part not in ("..", "/")])
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text(json.dumps(content), encoding="utf-8")
        notes.append(f"{relative.as_posix()} written beside config.json")
    if _tokenizer_stand_in(raw, target):
        notes.append(TOKENIZER_NOTE)
    processor = next((PROCESSOR_STAND_INS[a] for a in raw.get("architectures") or []
                      if a in PROCESSOR_STAND_INS), None)
    if processor is not None:
        folder, tokens, tokenizer_config = (*processor, {})[:3]
        for source in sorted((REPO / "tests" / "fixtures" / "processors" / folder).glob("*.json")):
            if source.name != "config.json":  # a folder's checkpoint config is not this one
                shutil.copy(source, target / source.name)
        vocab = {UNKNOWN: 0} | {token: i for i, token in enumerate(tokens, start=1)}
        write_tokenizer_stand_in(target, vocab, tokens, tokenizer_config)
        notes.append(f"{PROCESSOR_NOTE} (tests/fixtures/processors/{folder})")
    return target, notes


def _groups(vllm_config: Any, specs: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        from vllm.v1.core import kv_cache_planning as planning
    except ImportError:  # before 0.29.0 the planning lived in kv_cache_utils
        from vllm.v1.core import kv_cache_utils as planning

    out = []
    for group in planning.get_kv_cache_groups(vllm_config, dict(specs)):
        spec = group.kv_cache_spec
        out.append(
            {
                "spec": type(spec).__name__,
                "block_size": spec.block_size,
                "page_size_bytes": spec.page_size_bytes,
                "layers": [_layer_index(n, vllm_config.model_config.hf_config)
                           for n in group.layer_names],
            }
        )
    return out


def _no_kv_cache_config(vllm_config: Any) -> dict[str, Any]:
    """What the engine sizes for a model none of whose layers has a KV-cache spec:
    ``EngineCore._initialize_kv_caches`` profiles no memory for it (``has_kv_cache`` is
    false: "Attention free models don't need memory for kv cache", available memory 0 per
    worker) and asks ``get_kv_cache_configs`` for its config, as recorded here."""
    import inspect

    from vllm.config import set_current_vllm_config
    try:
        from vllm.v1.core import kv_cache_planning as planning
    except ImportError:  # before 0.29.0 the planning lived in kv_cache_utils
        from vllm.v1.core import kv_cache_utils as planning

    specs: list[dict[str, Any]] = [{}]
    args: list[Any] = [vllm_config, specs, [0]]
    if "global_kv_cache_groups" in inspect.signature(planning.get_kv_cache_configs).parameters:
        args.append(planning.get_global_kv_cache_groups(vllm_config, specs))
    with set_current_vllm_config(vllm_config):
        (config,) = planning.get_kv_cache_configs(*args)
    return {"num_blocks": config.num_blocks, "kv_cache_tensors": len(config.kv_cache_tensors),
            "kv_cache_groups": len(config.kv_cache_groups)}


def _layer_specs(vllm_config: Any, layers: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every module's spec as ``GPUModelRunner.get_kv_cache_spec`` builds it (the
    module's ``get_kv_cache_spec``, then ``customize_attention_spec``), and a record
    per module (KV-sharing target, no cache, or the spec and the backend)."""
    from vllm.v1.kv_cache_interface import AttentionSpec

    try:
        from vllm.v1.worker.utils import customize_attention_spec
    except ImportError:  # releases whose runner takes the module's spec as it is
        def customize_attention_spec(backend: Any, spec: Any) -> Any:
            return spec

    specs: dict[str, Any] = {}
    records = []
    for name, module in layers.items():
        record: dict[str, Any] = {
            "name": name,
            "index": _layer_index(name, vllm_config.model_config.hf_config),
            "module": type(module).__name__,
        }
        target = getattr(module, "kv_sharing_target_layer_name", None)
        if target:
            record["kv_sharing_target"] = _layer_index(target, vllm_config.model_config.hf_config)
            records.append(record)
            continue
        spec = module.get_kv_cache_spec(vllm_config)
        if spec is None:
            record["spec"] = None
            # the runner adds every Attention of attn_type ENCODER_ONLY (not only the
            # EncoderOnlyAttention class) as one zero-memory group later
            # (GPUModelRunner.may_add_encoder_only_layers_to_kv_cache_config)
            attn_type = getattr(module, "attn_type", None)
            if attn_type is not None:
                record["attn_type"] = str(getattr(attn_type, "value", attn_type))
            records.append(record)
            continue
        if isinstance(spec, AttentionSpec):
            spec = customize_attention_spec(module.get_attn_backend(), spec)
        specs[name] = spec
        record["backend"] = module.get_attn_backend().get_name()
        record.update(_spec_record(spec))
        records.append(record)
    return specs, records


def _aligned(vllm_config: Any, layers: dict[str, Any]) -> dict[str, Any]:
    """The engine's next step once the model is built (``UniProcExecutor`` /
    ``WorkerProc`` after ``load_model``; ``EngineCore`` then validates):
    ``current_platform.update_block_size_for_backend`` (the backends' preferred
    block size, the hybrid Mamba alignment), then the specs and groups again."""
    from vllm.config import set_current_vllm_config
    from vllm.platforms import current_platform

    with set_current_vllm_config(vllm_config):
        current_platform.update_block_size_for_backend(vllm_config)
        if hasattr(vllm_config, "validate_block_size"):  # 0.33.0 (EngineCore)
            vllm_config.validate_block_size()
    cache = vllm_config.cache_config
    out: dict[str, Any] = {
        "block_size": cache.block_size,
        "mamba_cache_mode": str(cache.mamba_cache_mode),
    }
    for key in ("mamba_block_size", "mamba_page_size_padded"):
        value = getattr(cache, key, None)
        if value is not None:
            out[key] = value
    with set_current_vllm_config(vllm_config):
        specs, records = _layer_specs(vllm_config, layers)
    out["layers"] = [
        {key: r[key] for key in ("index", "spec", "block_size", "page_size_bytes") if key in r}
        | ({"prefill_checkpoint_alignment": a} if (a := r.get("prefill_checkpoint_alignment")) else {})
        for r in records if r.get("spec")
    ]
    out["groups"] = _groups(vllm_config, specs)
    return out


BUILT_ON_CPU = frozenset({"ApertusForCausalLM", "BloomForCausalLM",
                          "InternS1ProForConditionalGeneration",
                          "CohereAsrForConditionalGeneration", "FireRedLIDForConditionalGeneration"})
"""Architectures whose constructors read tensor values (XIELU's ``beta.item()``,
activation.py:713; the ALiBi slopes' ``tolist()``, bloom.py:124; FoPE's ``nonzero``,
interns1_pro.py; Cohere-ASR's subsampling length ``int(out_length)``, cohere_asr.py:656;
FireRedLID's Conformer encoder's ``torch.log(...).item()``, conformer_encoder.py:63 in
0.28.0), which a meta tensor does not have: they are built on the CPU device (the same
shapes; their configs are small synthetic ones, so the weights take little memory)."""

REFUSAL_TYPES = (ValueError, AssertionError, NotImplementedError)
"""What vLLM (or transformers, reading the config for it) raises when it refuses a
config: ``ValueError`` (pydantic's ``ValidationError`` of a config class among them),
``AssertionError``, ``NotImplementedError``."""

_ANSWERING_PACKAGES = ("vllm", "transformers", "pydantic", "pydantic_core")
"""Whose ``ValueError`` is an answer: vLLM, transformers (its config classes) and pydantic
validating vLLM's config classes."""


_NOT_SET = "Current vLLM config is not set"
"""vLLM's ``get_current_vllm_config`` outside a ``set_current_vllm_config`` context: the
harness calling vLLM where the engine would have set its config, never vLLM refusing."""


class HarnessError(Exception):
    """The harness, not vLLM, failed on a config: a bug to fix, never an answer."""


def _refusal(exc: BaseException) -> bool:
    """vLLM's refusal: a refusal type raised by vLLM's or transformers' own code (the
    innermost frame is theirs), itself or as the cause of what reached the harness
    (transformers' strict config validation wraps its ValueError in huggingface_hub's
    ``StrictDataclassClassValidationError``). Anything else (a missing module, a
    device access on the CPU, a stub answering the wrong thing) is the harness failing."""
    if _NOT_SET in str(exc):  # a vLLM call outside the harness's config context
        return False
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, REFUSAL_TYPES):
            frames = traceback.extract_tb(link.__traceback__)
            if frames:
                parts = Path(frames[-1].filename).parts
                if ("site-packages" in parts
                        and parts[parts.index("site-packages") + 1] in _ANSWERING_PACKAGES):
                    return True
        link = link.__cause__ or link.__context__
    return False


def reference(config_path: Path, workdir: Path, *,
              enable_prefix_caching: bool | None = None,
              attention_backend: str | None = None,
              kv_cache_dtype: str | None = None,
              block_size: int | None = None) -> dict[str, Any]:
    """vLLM's answer for one config.json (or vLLM's refusal); raises
    :class:`HarnessError` when the harness fails. ``attention_backend``: the
    ``--attention-backend`` given (a name of the release's ``AttentionBackendEnum``)."""
    import torch
    import vllm
    from vllm.config import set_current_vllm_config
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.utils.torch_utils import set_default_torch_dtype
    model_dir, notes = _prepare_dir(config_path, workdir)
    out: dict[str, Any] = {
        "config": _relative(config_path),
        "vllm_version": vllm.__version__,
        "capability": ".".join(map(str, _capability())),
    }
    if notes:
        out["notes"] = notes
    if enable_prefix_caching is not None:
        out["enable_prefix_caching"] = enable_prefix_caching
    if attention_backend is not None:
        out["attention_backend"] = attention_backend
    if kv_cache_dtype is not None:
        out["kv_cache_dtype"] = kv_cache_dtype
    if block_size is not None:
        out["requested_block_size"] = block_size
    stage = "EngineArgs"
    try:
        stage = "EngineArgs.create_engine_config"
        vllm_config = EngineArgs(
            model=str(model_dir),
            skip_tokenizer_init=not any(n == TOKENIZER_NOTE or n.startswith(PROCESSOR_NOTE)
                                        for n in notes),
            dtype=MODEL_DTYPE,
            max_model_len=_max_len(model_dir),
            **({} if enable_prefix_caching is None
               else {"enable_prefix_caching": enable_prefix_caching}),
            **({} if attention_backend is None else {"attention_backend": attention_backend}),
            **({} if kv_cache_dtype is None else {"kv_cache_dtype": kv_cache_dtype}),
            **({} if block_size is None else {"block_size": block_size}),
        ).create_engine_config()
        model_config = vllm_config.model_config
        stage = "model class"
        model_cls, arch = get_model_architecture(model_config)
        out["architecture"] = arch
        out["model_class"] = f"{model_cls.__module__}.{model_cls.__qualname__}"
        out["dtype"] = _dtype_name(model_config.dtype)
        out["block_size"] = vllm_config.cache_config.block_size
        padded = getattr(vllm_config.cache_config, "mamba_page_size_padded", None)
        if padded:
            out["mamba_page_size_padded"] = padded
        stage = "model construction"
        _slopes_on_cpu(model_cls)
        _inits_on_cpu()
        _workspace_on_meta()
        with (
            set_current_vllm_config(vllm_config),
            set_default_torch_dtype(model_config.dtype),
            torch.device("cpu" if arch in BUILT_ON_CPU else "meta"),
            _device_tensors_on_meta(),
        ):
            model_cls(vllm_config=vllm_config, prefix="")
        stage = "get_kv_cache_spec"
        layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
        # the runner reads the specs under the worker's config (a backend's builder may ask
        # for it: FlashInfer's get_cudagraph_support reads get_current_vllm_config())
        specs: dict[str, Any] | None = None
        try:
            with set_current_vllm_config(vllm_config):
                specs, out["layers"] = _layer_specs(vllm_config, layers)
        except REFUSAL_TYPES as exc:
            if not _refusal(exc):
                raise
            # the engine reads the specs only once the block is aligned (the executor
            # runs update_block_size_for_backend right after load_model, the worker's
            # get_kv_cache_spec later): a spec that needs the aligned block (vLLM 0.30.0's
            # Glm5NextIndexerCache asserts a multiple of index_kpool * 32) is recorded
            # here, not a refusal; the layers are then read at the aligned block
            out["layers_error"] = f"{type(exc).__name__}: {exc}"[:500]
        if specs is not None:
            _layout_and_groups(out, vllm_config, layers, specs)
        stage = "update_block_size_for_backend"
        out["aligned"] = _aligned(vllm_config, layers)
        if specs is None:
            stage = "get_kv_cache_spec (aligned)"
            with set_current_vllm_config(vllm_config):
                specs, out["layers"] = _layer_specs(vllm_config, layers)
            _layout_and_groups(out, vllm_config, layers, specs)
            out["groups"] = None
            out["groups_error"] = "the specs are read at the aligned block only"
        if not specs:
            stage = "get_kv_cache_configs"
            out["kv_cache_config"] = _no_kv_cache_config(vllm_config)
        out["status"] = "ok"
    except Exception as exc:
        tail = traceback.format_exc().splitlines()[-12:]
        if not _refusal(exc):
            raise HarnessError(
                f"{out['config']}: the harness failed at {stage}: {type(exc).__name__}: {exc}"
                + "\n" + "\n".join(tail)
            ) from exc
        out["status"] = "refused"  # vLLM's refusal is an answer too
        out["stage"] = stage
        out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        out["traceback_tail"] = tail
    return out


def _layout_and_groups(out: dict[str, Any], vllm_config: Any, layers: dict[str, Any],
                       specs: dict[str, Any]) -> None:
    """The resolved KV-cache layout and the groups of ``specs`` (before the alignment)."""
    try:
        from vllm.v1.attention.backends.utils import (
            get_supported_kv_cache_layouts,
            resolve_kv_cache_layout,
        )
    except ImportError:  # before the per-layer layouts (0.25.1-0.28.0): not recorded
        get_supported_kv_cache_layouts = resolve_kv_cache_layout = None
    if resolve_kv_cache_layout is not None:
        backends = {m.get_attn_backend() for n, m in layers.items() if n in specs}
        layouts = [layout.name for layout in get_supported_kv_cache_layouts(backends)]
        out["kv_cache_layout"] = resolve_kv_cache_layout(
            vllm_config, [layouts], list(specs.values())
        ).name
    try:
        out["groups"] = _groups(vllm_config, specs)
    except REFUSAL_TYPES as exc:
        # the engine groups only after the alignment; before it a hybrid's pages
        # may not unify (vLLM 0.26.0-0.28.0 raise): recorded, not a refusal
        out["groups"] = None
        out["groups_error"] = f"{type(exc).__name__}: {exc}"[:500]


def _capability() -> tuple[int, int]:
    """The compute capability vLLM is made to see (``oracle.set_capability`` switches it)."""
    import oracle

    capability = oracle.STATE.capability
    return (capability.major, capability.minor) if capability is not None else CAPABILITY


def _workspace_on_meta() -> None:
    """The worker sets up vLLM's scratch workspace before it builds the model runner and
    the model (``init_workspace_manager``, vllm/v1/worker/gpu_worker.py:554-564 in 0.33.0);
    an attention impl may reserve its scratch while it is built (FlashMLASparseImpl,
    vllm/v1/attention/backends/mla/flashmla_sparse.py:832): a workspace on the meta device
    holds no memory, and growing it empties no allocator cache (the manager calls
    ``torch.accelerator.empty_cache()`` before it grows, which on a machine without an
    accelerator raises; for a meta workspace it is a no-op)."""
    import torch

    try:
        from vllm.v1.worker import workspace
    except ImportError:  # a release without the workspace manager
        return
    workspace.init_workspace_manager(torch.device("meta"))
    manager = workspace.current_workspace_manager()
    grow = manager._ensure_workspace_size

    def grow_on_meta(*args: Any, **kwargs: Any) -> Any:
        empty_cache = torch.accelerator.empty_cache
        torch.accelerator.empty_cache = lambda: None
        try:
            return grow(*args, **kwargs)
        finally:
            torch.accelerator.empty_cache = empty_cache

    manager._ensure_workspace_size = grow_on_meta  # type: ignore[method-assign]


def _max_len(model_dir: Path) -> int:
    """``DEFAULT_MAX_MODEL_LEN``, or the config's own maximum when smaller
    (vLLM refuses a longer ``max_model_len``)."""
    raw = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    # the text config vLLM derives the length from: transformers' get_text_config, the
    # first of its decoder-side names present (Nemotron-Parse's ``decoder``; DeepSeek-VL2's
    # ``language_config``, which DeepseekVLV2Config reads as its text_config)
    text = next((raw[key] for key in ("decoder", "generator", "text_config", "language_config")
                 if isinstance(raw.get(key), dict)), raw)
    # max_target_positions: an encoder-decoder's decoder length (WhisperConfig), which
    # vLLM's derived max_model_len reads when the others are absent
    for key in ("max_position_embeddings", "seq_length", "n_positions", "max_target_positions",
                "max_seq_len"):
        value = text.get(key) or raw.get(key)
        if isinstance(value, int | float) and value > 0:
            return min(DEFAULT_MAX_MODEL_LEN, int(value))
    return DEFAULT_MAX_MODEL_LEN


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    parser.add_argument("--merge", action="store_true",
                        help="keep the answers already in --out for configs not given")
    parser.add_argument("--enable-prefix-caching", action="store_true",
                        help="--enable-prefix-caching (else vLLM's default for the model)")
    parser.add_argument("--gpu-runner", action="store_true",
                        help="choose the model runner as on the emulated GPU, which has Triton "
                             "(VllmConfig.use_v2_model_runner reads HAS_TRITON, vllm/config/"
                             "vllm.py:752 in 0.33.0; the CPU build has none and falls back to "
                             "Model Runner V1): an architecture that only builds on Model Runner "
                             "V2 (LongcatFlashNgramForCausalLM) is then vLLM's build")
    parser.add_argument("--engram-tokenizer", action="store_true",
                        help="a tokenizer stand-in for DeepSeek-V4.1's Engram layers, which "
                             "load the tokenizer while built (oracle.models.engram_tokenizer)")
    args = parser.parse_args(argv)
    oracle.start_models()
    if args.gpu_runner:
        gpu_model_runner()
    if args.engram_tokenizer:
        from oracle.models import engram_tokenizer

        engram_tokenizer()
    results = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(set(args.configs)):
            if path.stem in {"broken_layer_types"}:
                continue
            try:
                result = reference(path, Path(tmp), enable_prefix_caching=(
                    True if args.enable_prefix_caching else None))
            except HarnessError as exc:
                failures.append(str(exc))
                print(f"HARNESS FAILURE {exc}", file=sys.stderr)
                continue
            results.append(result)
            summary = result.get("error") or f"{len(result['layers'])} layers"
            print(f"{result['status']:7} {path}: {summary}"[:300], file=sys.stderr)
    if failures:
        print(f"{len(failures)} harness failure(s): nothing written (fix the harness; a "
              "failure is never recorded as vLLM's answer)", file=sys.stderr)
        return 1
    if args.merge and args.out.is_file():
        fresh = {r["config"] for r in results}
        kept = list(oracle.read_jsonl(args.out))
        results = sorted([r for r in kept if r["config"] not in fresh] + results,
                         key=lambda r: str(r["config"]))
    oracle.write_jsonl_gz(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
