"""Parse a Hugging Face config.json mapping into :class:`ModelFacts`.

Follows how vLLM 0.33.0 reads the config (``ModelArchConfigConvertorBase``,
the per-model layer constructors) and the Hugging Face config classes'
defaults; no network, no weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from selector.errors import InputError
from selector.models.config_reader import ConfigReader
from selector.models.facts import LayerFacts, MLADims, ModelDType, ModelFacts, SparseIndexer
from selector.models.layer_patterns import MixerType, resolve_mixers
from selector.models.ssm_config import read_gdn, read_mamba1

__all__ = ["MAX_LAYERS", "parse_config"]

MAX_LAYERS = 4096
"""More layers than this is treated as a malformed config."""

MLA_MODEL_TYPES = frozenset(
    {
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_mtp",
        "kimi_k2",
        "kimi_linear",
        "glm_moe_dsa",
        "glm4_moe_lite",
        "longcat_flash",
        "pangu_ultra_moe",
        "bailing_hybrid",
    }
)
"""``model_type`` values vLLM treats as DeepSeek-style MLA when ``kv_lora_rank`` is set."""

MM_PREFIX_LM_MODEL_TYPES = frozenset({"bagel", "gemma3", "molmo2", "moondream3", "paligemma"})
ENCODER_ONLY_MODEL_TYPES = frozenset(
    {"bert", "roberta", "xlm-roberta", "distilbert", "electra", "modernbert", "nomic_bert"}
)
SINK_MODEL_TYPES = frozenset({"gpt_oss"})
_DEFAULT_WINDOWS = {"gemma2": 4096, "gemma3": 4096, "gemma3_text": 4096, "gpt_oss": 128}
"""The config classes' ``sliding_window`` defaults, used when the key is absent."""
_KV_HEAD_ALIASES = (
    "n_head_kv",
    "num_kv_heads",
    "num_key_value_heads",
    "multi_query_group_num",
    "num_attention_groups",
)
_DTYPES: dict[str, ModelDType] = {
    "float16": "float16",
    "half": "float16",
    "fp16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float32": "float32",
    "float": "float32",
    "fp32": "float32",
}


def _dtype(top: ConfigReader, text: ConfigReader) -> ModelDType:
    for reader in (top, text):
        for key in ("torch_dtype", "dtype"):
            value = reader.str_(key)
            if value is None:
                continue
            name = value.removeprefix("torch.")
            if name not in _DTYPES:
                raise reader.error(
                    key, f"unknown dtype {value!r}", hint="use float16, bfloat16 or float32"
                )
            return _DTYPES[name]
    return "float32"


def _kv_heads(text: ConfigReader, num_q: int) -> int:
    for key in _KV_HEAD_ALIASES:
        if text.has(key):
            return text.int_(key)
    return num_q


def _head_size(text: ConfigReader, hidden: int, num_q: int) -> int:
    head_dim = text.opt_int("head_dim", minimum=0)
    if head_dim:
        return head_dim
    per_head = text.opt_int("hidden_size_per_head")
    if per_head:
        return per_head
    return hidden // num_q


def _alibi(top: ConfigReader, text: ConfigReader, model_type: str) -> bool:
    if model_type == "bloom" or text.bool_("alibi"):
        return True
    if text.str_("position_embedding_type") == "alibi":
        return True
    attn = top.section("attn_config")
    return attn is not None and attn.bool_("alibi")


def _mla_dims(text: ConfigReader) -> MLADims:
    return MLADims(
        kv_lora_rank=text.int_("kv_lora_rank"),
        qk_nope_head_dim=text.int_("qk_nope_head_dim", minimum=0),
        qk_rope_head_dim=text.int_("qk_rope_head_dim", minimum=0),
        v_head_dim=text.int_("v_head_dim"),
        q_lora_rank=text.opt_int("q_lora_rank"),
    )


def _indexer(text: ConfigReader) -> SparseIndexer | None:
    if not text.has("index_topk"):
        return None
    return SparseIndexer(
        index_topk=text.int_("index_topk"),
        index_head_dim=text.int_("index_head_dim", 128),
        index_n_heads=text.int_("index_n_heads", 64),
    )


def _cross_layers(text: ConfigReader, num_layers: int) -> frozenset[int]:
    indices = text.int_list("cross_attention_layers") or []
    for index in indices:
        if index >= num_layers:
            raise text.error(
                "cross_attention_layers", f"layer {index} is beyond num_hidden_layers {num_layers}"
            )
    return frozenset(indices)


class _ConfigParser:
    """Builds the layers of one config; one instance per parse."""

    def __init__(self, top: ConfigReader, text: ConfigReader) -> None:
        self.top = top
        self.text = text
        self.model_type = top.str_("model_type") or ""
        self.text_model_type = text.str_("model_type") or self.model_type
        self.num_layers = text.int_("num_hidden_layers")
        if self.num_layers > MAX_LAYERS:
            raise text.error("num_hidden_layers", f"{self.num_layers} layers is implausible")
        self.hidden = text.int_("hidden_size")
        self.mixers = resolve_mixers(text, self.text_model_type, self.num_layers)
        self.cross_layers = _cross_layers(text, self.num_layers)

    def attention_common(self) -> dict[str, Any]:
        text = self.text
        num_q = text.int_("num_attention_heads")
        num_kv = _kv_heads(text, num_q)
        head = _head_size(text, self.hidden, num_q)
        if head < 1:
            raise text.error("head_dim", f"derived head size {head} is not positive")
        soft_cap = text.opt_float("attn_logit_softcapping")
        return {
            "num_q_heads": num_q,
            "total_q_heads": num_q,
            "num_kv_heads": num_kv,
            "total_kv_heads": num_kv,
            "head_size": head,
            "head_size_v": head,
            "has_sink": self.text_model_type in SINK_MODEL_TYPES,
            "logits_soft_cap": soft_cap if soft_cap else None,
            "alibi": _alibi(self.top, text, self.text_model_type),
        }

    def layers(self) -> tuple[LayerFacts, ...]:
        text = self.text
        kinds = self._kinds()
        needs_attention = any(kind != "ssm" for kind in kinds)
        common = self.attention_common() if needs_attention else {}
        use_mla = self.text_model_type in MLA_MODEL_TYPES and text.has("kv_lora_rank")
        mla = _mla_dims(text) if use_mla else None
        indexer = _indexer(text) if use_mla else None
        window = text.opt_int("sliding_window", minimum=0) or _DEFAULT_WINDOWS.get(
            self.text_model_type
        )
        if window is None and "sliding_attention" in self.mixers:
            raise text.error("sliding_window", "sliding_attention layers need a sliding_window")
        chunk = text.opt_int("attention_chunk_size")
        return tuple(
            self._layer(
                i, mixer, common=common, mla=mla, indexer=indexer, window=window, chunk=chunk
            )
            for i, mixer in enumerate(self.mixers)
        )

    def _kinds(self) -> list[str]:
        return ["ssm" if m in ("mamba", "linear_attention") else "attn" for m in self.mixers]

    def _layer(
        self,
        index: int,
        mixer: MixerType,
        *,
        common: dict[str, Any],
        mla: MLADims | None,
        indexer: SparseIndexer | None,
        window: int | None,
        chunk: int | None,
    ) -> LayerFacts:
        if mixer == "mamba":
            return LayerFacts(index=index, kind="mamba", ssm=read_mamba1(self.text, self.hidden))
        if mixer == "linear_attention":
            return LayerFacts(index=index, kind="gdn", ssm=read_gdn(self.text))
        fields = dict(common)
        fields["sliding_window"] = window if mixer == "sliding_attention" else None
        fields["attention_chunk_size"] = chunk if mixer == "chunked_attention" else None
        fields["use_rope"] = not (
            self.text_model_type in ("llama4", "llama4_text") and mixer == "full_attention"
        )
        kind = "attention"
        if mla is not None:
            kind = "mla"
            fields.update(
                mla=mla,
                indexer=indexer,
                head_size=mla.head_size,
                head_size_v=0,
                num_kv_heads=1,
                total_kv_heads=1,
            )
        if self.model_type in ENCODER_ONLY_MODEL_TYPES:
            kind = "encoder_only"
        if mixer == "cross_attention" or index in self.cross_layers:
            kind = "cross_attention"
        return LayerFacts(index=index, kind=kind, **fields)


def _text_reader(top: ConfigReader) -> ConfigReader:
    section = top.section("text_config")
    return section if section is not None else top


def _is_mm_prefix_lm(top: ConfigReader, model_type: str) -> bool:
    if top.raw("is_mm_prefix_lm") is not None:
        return top.bool_("is_mm_prefix_lm")
    return model_type in MM_PREFIX_LM_MODEL_TYPES


def parse_config(raw: object, *, file: str, name: str | None = None) -> ModelFacts:
    """Derive every layer's attention facts from a config.json mapping.

    Raises :class:`InputError` (naming ``file`` and the field) on anything malformed.
    """
    if not isinstance(raw, Mapping):
        raise InputError("a config.json must hold a JSON object", file=file)
    top = ConfigReader(raw, file)
    architectures = top.str_list("architectures")
    if not architectures:
        raise top.error("architectures", "missing required field", hint='e.g. ["LlamaForCausalLM"]')
    if top.str_("model_type") is None:
        raise top.error("model_type", "missing required field", hint='e.g. "llama"')
    text = _text_reader(top)
    parser = _ConfigParser(top, text)
    try:
        return ModelFacts(
            name=name or file,
            source=file,
            architecture=architectures[0],
            model_type=parser.model_type,
            dtype=_dtype(top, text),
            num_layers=parser.num_layers,
            hidden_size=parser.hidden,
            max_position_embeddings=text.opt_int("max_position_embeddings"),
            is_mm_prefix_lm=_is_mm_prefix_lm(top, parser.model_type),
            layers=parser.layers(),
        )
    except ValidationError as exc:  # defensive: the reader validates first
        raise InputError(f"inconsistent config: {exc.errors()[0]['msg']}", file=file) from exc
