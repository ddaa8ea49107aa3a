"""Parse a Hugging Face config.json mapping into :class:`ModelFacts`.

Follows how vLLM 0.33.0 reads the config (``ModelArchConfigConvertorBase``,
the per-model layer constructors) and the Hugging Face config classes'
defaults; no network, no weights.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from selector import expr as expr_lang
from selector.errors import InputError
from selector.models.config_defaults import class_defaults
from selector.models.config_reader import ConfigReader
from selector.models.facts import (
    ConvCache,
    IndexerTail,
    KVCacheDtypeDefault,
    LayerFacts,
    MLADims,
    ModelDType,
    ModelFacts,
    SparseIndexer,
)
from selector.models.families import (
    GENERIC,
    Family,
    RSWARules,
    VersionRule,
    causal_lm_architecture,
    families,
    family_for,
    implied_model_type,
    kv_heads_fields,
)
from selector.models.layer_patterns import MixerType, mixed_window_refusal, resolve_mixers
from selector.models.ssm_config import read_ssm, ssm_refusal

__all__ = ["MAX_LAYERS", "language_model_config", "omitted_defaults", "parse_config",
           "resolve_family"]

MAX_LAYERS = 4096
"""More layers than this is treated as a malformed config."""

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
    for key in kv_heads_fields():
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


def _alibi(top: ConfigReader, text: ConfigReader, family: Family) -> bool:
    if family.alibi or text.bool_("alibi"):
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
    """Builds the layers of one config by its family's rules; one instance per parse."""

    def __init__(self, top: ConfigReader, text: ConfigReader, family: Family) -> None:
        self.top = top
        self.family = family
        self.text = text.with_fields(family.reads).with_rules(family.aliases, family.defaults)
        text = self.text
        self.model_type = top.str_("model_type") or ""
        self.text_model_type = text.str_("model_type") or self.model_type
        if family.cacheless:  # no layer the KV-cache manager sees (Family.cacheless)
            self.num_layers, self.hidden, self.mixers = 0, text.opt_int("hidden_size") or 0, []
            self.cross_layers: frozenset[int] = frozenset()
            return
        self.num_layers = self._decoder_layers()
        if self.num_layers > MAX_LAYERS:
            raise text.error("num_hidden_layers", f"{self.num_layers} layers is implausible")
        self.hidden = text.int_("hidden_size")
        self.mixers = resolve_mixers(text, family.mixers, self.num_layers)
        self.num_layers = len(self.mixers)  # a repeat rule's unit makes more layers
        self.cross_layers = _cross_layers(text, self.num_layers)

    def _decoder_layers(self) -> int:
        """``num_hidden_layers``, or with ``attention.per_decoder_layer`` its
        ``layers_field``: transformers' LongcatFlashConfig derives ``num_hidden_layers`` as
        twice ``num_layers``, and a written ``num_hidden_layers`` sets ``num_layers`` to its
        half, over a written ``num_layers`` too (vLLM 0.33.0 builds one decoder layer for
        ``num_layers: 3, num_hidden_layers: 3``: the reference's -both config)."""
        text = self.text
        per = self.family.attention.per_decoder_layer
        if per is None:
            return text.int_("num_hidden_layers")
        if text.written("num_hidden_layers"):
            return text.int_("num_hidden_layers") // per.attentions
        return text.int_(per.layers_field)  # written, or the config class's default

    def attention_common(self) -> dict[str, Any]:
        text = self.text
        num_q = text.int_("num_attention_heads")
        rules = self.family.attention
        num_kv = self._kv_heads(num_q)
        if rules.head_size_fields:
            head = sum(text.int_(key, minimum=0) for key in rules.head_size_fields)
        else:
            head = _head_size(text, self.hidden, num_q)
        if head < 1:
            raise text.error("head_dim", f"derived head size {head} is not positive")
        head_v = text.int_(rules.head_size_v) if rules.head_size_v and text.has(rules.head_size_v) else head
        soft_cap = text.opt_float("attn_logit_softcapping")
        alibi = _alibi(self.top, text, self.family)
        return {
            "num_q_heads": num_q,
            "total_q_heads": num_q,
            "num_kv_heads": num_kv,
            "total_kv_heads": num_kv,
            "head_size": head,
            "head_size_v": head_v,
            "logits_soft_cap": soft_cap if soft_cap else None,
            "alibi": alibi,
            "alibi_sqrt": alibi and self.family.alibi_sqrt,
        }

    def refusals(self) -> tuple[str, ...]:
        """vLLM's refusals, each as ``Type: message`` (Qwen2Model asserts its window
        rule; a config class raises ValueError)."""
        mixed = mixed_window_refusal(self.text, self.family.mixers, self.num_layers)
        state = ssm_refusal(self.text, self.family, self.hidden)
        sparse = self._sparse_refusal()
        return ((f"AssertionError: {mixed}",) if mixed else ()) + (
            (f"ValueError: {state}",) if state else ()) + (
            (f"ValueError: {sparse}",) if sparse else ()) + config_refusal(self.text, self.family)

    def _sparse_refusal(self) -> str | None:
        """vLLM's refusal of the family's ``attention.sparse_layers`` shared field
        (``compute_skip_topk_layers``, which a sparse layer alone asks)."""
        rule = self.family.attention.sparse_layers
        if rule is None or self.family.attention.mla is None or not self.text.has(rule.requires):
            return None
        types = self.text.raw(rule.types_field)
        shared = self.text.raw(rule.shared_field)
        if not isinstance(types, list) or not isinstance(shared, list):
            return None
        if not any(t in rule.sparse_types for t in types[: self.num_layers]):
            return None
        if rule.length_refusal and len(shared) != self.num_layers:
            return rule.length_refusal.format(expected=self.num_layers, got=len(shared))
        invalid = sorted({str(v) for v in shared} - set(rule.shared_values))
        if rule.values_refusal and rule.shared_values and invalid:
            return rule.values_refusal.format(invalid=invalid)
        return None

    def _kv_heads(self, num_q: int) -> int:
        rules = self.family.attention
        text = self.text
        if rules.kv_heads_field and (text.has(rules.kv_heads_field) or not rules.kv_heads_optional):
            return text.int_(rules.kv_heads_field)
        if rules.kv_heads_field:  # optional and absent: one KV head per query head
            return num_q
        if rules.multi_query:
            if not text.bool_(rules.multi_query):
                return num_q
            heads = rules.multi_query_heads
            return text.int_(heads) if heads and text.has(heads) else 1
        return _kv_heads(text, num_q)

    def layers(self) -> tuple[LayerFacts, ...]:
        text = self.text
        rules = self.family.attention
        needs_attention = any(m not in ("mamba", "linear_attention", "none") for m in self.mixers)
        common = self.attention_common() if needs_attention else {}
        use_mla = rules.mla is not None and text.has(rules.mla)
        mla = _mla_dims(text) if use_mla else None
        indexer = self._pooled(_indexer(text)) if use_mla else None
        window_key = rules.window_field
        window = text.opt_int(window_key, minimum=0)
        windowed = {"sliding_attention", *rules.chunk_lookback}
        if window is None and windowed & set(self.mixers):
            needing = sorted(windowed & set(self.mixers))[0]
            raise text.error(window_key, f"{needing} layers need a {window_key}")
        if window is not None:
            window //= rules.window_divisor
        chunk = text.opt_int("attention_chunk_size")
        blocks = self._block_kv_heads(common)
        layers = [
            self._layer(
                i, mixer, common=common, mla=mla, indexer=indexer, window=window, chunk=chunk,
                kv_heads=blocks[i] if blocks else None,
            )
            for i, mixer in enumerate(self.mixers)
        ]
        return tuple(self._modules_per_layer(self._loops(self._share_kv(
            self._per_layer_heads_and_windows(self._sparse_layers(layers))))))

    def _pooled(self, indexer: SparseIndexer | None) -> SparseIndexer | None:
        """The family's ``attention.indexer_pool``: the index keys pooled by the config's
        pool field, on the rule's backend, beside the tail ring."""
        rule = self.family.attention.indexer_pool
        if indexer is None or rule is None:
            return indexer
        pool = self.text.int_(rule.pool_field, minimum=1)
        tail = rule.tail
        ring = IndexerTail(pool=pool, num_kv_heads=tail.num_kv_heads,
                           head_size=self.text.int_(tail.head_size_field, minimum=1),
                           dtype=tail.dtype, backend=tail.backend, name=tail.name,
                           dcp_sharded=tail.dcp_sharded)
        return indexer.model_copy(update={"tokens_per_state": pool, "backend": rule.backend,
                                          "tail": ring})

    def _sparse_layers(self, layers: list[LayerFacts]) -> list[LayerFacts]:
        """The family's ``attention.sparse_layers``: sparse MLA only on the layers its types
        field names sparse, each with an indexer cache of its own unless it shares an
        earlier layer's top-k."""
        rule = self.family.attention.sparse_layers
        if rule is None:
            return layers
        text = self.text
        types = text.raw(rule.types_field) if text.has(rule.requires) else None
        types = types if isinstance(types, list) else []
        shared = text.raw(rule.shared_field)
        out = []
        for layer in layers:
            i = layer.index
            if layer.indexer is None:
                out.append(layer)
                continue
            if not (i < len(types) and types[i] in rule.sparse_types):
                out.append(layer.model_copy(update={"indexer": None}))
                continue
            if isinstance(shared, list):
                own = not (i < len(shared) and shared[i] == rule.shared_value)
            else:
                own = i == 0 or (i - rule.full_offset) % rule.full_every == 0
            indexer = layer.indexer if own else layer.indexer.model_copy(update={"own_cache": False})
            out.append(layer.model_copy(update={"indexer": indexer}))
        return out

    def _modules_per_layer(self, layers: list[LayerFacts]) -> list[LayerFacts]:
        """The family's ``attention.per_decoder_layer``: every attention layer builds that
        many attention modules, a cache each."""
        per = self.family.attention.per_decoder_layer
        if per is None:
            return layers
        return [layer.model_copy(update={"attentions": per.attentions}) if layer.is_attention
                else layer for layer in layers]

    def _per_layer_values(self, spec: str) -> list[int | None]:
        """One value per layer: ``field`` a list (one entry per layer; an entry that is a
        list gives its first element) or ``field.key`` a mapping from layer index to
        overrides (None where a layer has no ``key``)."""
        field, _, key = spec.partition(".")
        values = self.text.raw(field)
        if key:
            if values is None:
                return [None] * self.num_layers
            if not isinstance(values, dict):
                raise self.text.error(field, "expected a mapping from layer index to overrides")
            entries: list[Any] = [None] * self.num_layers
            for index, overrides in values.items():
                if not str(index).isdigit() or int(index) >= self.num_layers:
                    raise self.text.error(f"{field}.{index}", "is not a layer index of the model")
                entries[int(index)] = overrides.get(key) if isinstance(overrides, dict) else None
        else:
            if not isinstance(values, list) or len(values) < self.num_layers:
                raise self.text.error(field, f"expected a list of {self.num_layers} entries, one per layer")
            entries = [v[0] if isinstance(v, list) and v else v for v in values[: self.num_layers]]
        for i, value in enumerate(entries):
            if value is None:  # no override, or (a list's null) a full-attention layer
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                where = f"{field}.{i}.{key}" if key else f"{field}[{i}]"
                raise self.text.error(where, f"expected a non-negative integer, got {value!r}")
        return entries

    def _per_layer_heads_and_windows(self, layers: list[LayerFacts]) -> list[LayerFacts]:
        """The family's ``attention.per_layer`` head sizes and windows."""
        rules = self.family.attention.per_layer
        if rules is None:
            return layers
        heads = self._per_layer_values(rules.head_size) if rules.head_size else None
        windows = self._per_layer_values(rules.window) if rules.window else None
        offset = self.family.attention.window_offset
        out = []
        for i, layer in enumerate(layers):
            if layer.kind != "attention":
                out.append(layer)
                continue
            update: dict[str, Any] = {}
            head = heads[i] if heads is not None else None
            if head is not None:
                update.update(head_size=head, head_size_v=head)
            window = windows[i] if windows is not None else None
            if windows is not None:
                update["sliding_window"] = window + offset if window else None
            out.append(layer.model_copy(update=update))
        return out

    def _loops(self, layers: list[LayerFacts]) -> list[LayerFacts]:
        """Every loop after the first adds a copy of each attention layer, numbered
        ``k * L + i``, sliding over the loop's window (the family's ``attention.loops``)."""
        loops = self.family.attention.loops
        if loops is None:
            return layers
        count = self.text.int_(loops.count_field, loops.count)
        window = (self.text.int_(loops.window_field, loops.window)
                  if loops.window_field is not None and loops.window is not None else None)
        out = list(layers)
        for k in range(1, count):
            for layer in layers:
                update: dict[str, Any] = {"index": k * self.num_layers + layer.index}
                if layer.kind == "attention" and window is not None:
                    update["sliding_window"] = window
                out.append(layer.model_copy(update=update))
        return out

    def _block_kv_heads(self, common: dict[str, Any]) -> list[int | None] | None:
        """DeciLM block configs: KV heads = num_attention_heads // n_heads_in_group."""
        if self.family.mixers.rule != "block_configs":
            return None
        key = self.family.mixers.field or "block_configs"
        out: list[int | None] = []
        for i, block in enumerate(self.text.raw(key)[: self.num_layers]):
            group = block["attention"].get("n_heads_in_group")
            if self.mixers[i] == "none":
                out.append(None)
                continue
            if not isinstance(group, int) or isinstance(group, bool) or group < 1:
                raise self.text.error(
                    f"{key}[{i}].attention.n_heads_in_group", "expected a positive integer"
                )
            out.append(common["num_q_heads"] // group)
        return out

    def _share_kv(self, layers: list[LayerFacts]) -> list[LayerFacts]:
        """The last ``kv_sharing`` layers reuse the cache of the last earlier
        layer of the same mixer (Gemma-3n / Gemma-4 ``num_kv_shared_layers``)."""
        key = self.family.attention.kv_sharing
        shared = self.text.opt_int(key, minimum=0) if key else None
        if not shared:
            return layers
        first = self.num_layers - shared
        out = list(layers)
        for i in range(first, self.num_layers):
            same = [j for j in range(first) if self.mixers[j] == self.mixers[i]]
            if same:
                out[i] = layers[i].model_copy(update={"kind": "none", "kv_sharing_target": same[-1]})
        return out

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
        kv_heads: int | None,
    ) -> LayerFacts:
        if mixer == "none":
            return LayerFacts(index=index, kind="none")
        if mixer in ("mamba", "linear_attention", "short_conv"):
            ssm = read_ssm(self.text, self.family, self.hidden)
            return LayerFacts(index=index, kind="gdn" if ssm.ssm_type == "gdn" else "mamba", ssm=ssm)
        fields = dict(common)
        if kv_heads is not None:
            fields.update(num_kv_heads=kv_heads, total_kv_heads=kv_heads)
        for target, source in self.family.attention.overrides.get(mixer, {}).items():
            if self.text.has(source):
                value = self.text.int_(source)
                fields[target] = value
                if target in ("num_kv_heads", "num_q_heads"):
                    fields["total_" + target.removeprefix("num_")] = value
        fields.update(self._per_layer(index))
        fields["has_sink"] = self._sink(mixer)
        rules = self.family.attention
        fields["model_backend"] = rules.backend
        sink = rules.sink_backend
        if sink is not None and self.text.bool_(sink.field, sink.default):
            fields["sink_backend"] = sink.backend
        if rules.static_sinks is not None and self.text.has(rules.static_sinks):
            fields["sink_tokens"] = self.text.int_(rules.static_sinks, minimum=0)
        if rules.rswa is not None and mla is None:
            fields["rswa_window"] = self._rswa_window(rules.rswa)
        offset = rules.window_offset
        sliding = window + offset if mixer == "sliding_attention" and window is not None else None
        lookback = rules.chunk_lookback.get(mixer)
        if lookback is not None:  # a chunked sliding layer: the model's window, its lookback
            sliding, chunk = window, None
            fields["chunk_lookback"] = lookback
        fields["sliding_window"] = sliding
        fields["attention_chunk_size"] = chunk if mixer == "chunked_attention" else None
        fields["use_rope"] = mixer not in self.family.attention.nope_mixers
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
        if self.family.ssm is not None and self.family.ssm.parallel:
            fields["ssm"] = read_ssm(self.text, self.family, self.hidden)
        fields.update(self._own_sparse(index))
        fields.update(self._conv_cache(fields))
        if self.family.encoder_only or not self._causal():
            kind = "encoder_only"
        # the hook's own architectures only: another architecture of the family never reads
        # the field (nor reports its class default as read)
        if rules.bidirectional_field is not None \
                and (self.top.str_list("architectures") or [""])[0] \
                in rules.bidirectional_architectures \
                and self.text.bool_(rules.bidirectional_field):
            kind = "encoder_only"
        if mixer == "cross_attention" or index in self.cross_layers:
            kind = "cross_attention"
        elif rules.cross_attention and kind == "attention":
            fields["cross_attention"] = True
        return LayerFacts(index=index, kind=kind, **fields)

    def _rswa_window(self, rswa: RSWARules) -> int | None:
        """The family's ``attention.rswa``: the window of an R-SWA layer, else None."""
        field = rswa.field
        reader = self.text if self.text.raw(field) is not None else self.top
        if reader.raw(field) is None:
            return None
        condition = expr_lang.parse(rswa.when)
        scope = {name: _scalar(self.text.raw(name)) for name in sorted(expr_lang.names_in(condition))}
        scope["model_type"] = self.text_model_type
        if not expr_lang.evaluate(condition, scope):
            return None
        return reader.int_(field, minimum=1)

    def _causal(self) -> bool:
        """The family's ``attention.causal_field`` (true when the family has none)."""
        rules = self.family.attention
        field = rules.causal_field
        if field is None:
            return True
        if rules.causal_value is None:
            return self.text.bool_(field, True)
        value = self.text.raw(field) if self.text.has(field) else self.top.raw(field)
        return value is None or value == rules.causal_value

    def _conv_cache(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The family's ``attention.conv_cache``: the short-convolution state the decoder
        layer registers beside its attention, of the layer's KV heads."""
        rule = self.family.attention.conv_cache
        if rule is None:
            return {}
        env = {"head_size": fields["head_size"], "total_kv_heads": fields["total_kv_heads"],
               "hidden_size": self.hidden}
        value = expr_lang.evaluate(expr_lang.parse(rule.head_size), env)
        assert isinstance(value, int) and not isinstance(value, bool) and value > 0
        head = 1 << (value - 1).bit_length() if rule.round_pow2 else value
        width = self.text.int_(rule.kernel_field, minimum=1)
        return {"conv_cache": ConvCache(width=width, num_kv_heads=fields["total_kv_heads"],
                                        total_kv_heads=fields["total_kv_heads"], head_size=head,
                                        backend=rule.backend, name=rule.name)}

    def _own_sparse(self, index: int) -> dict[str, Any]:
        """The family's ``attention.own_sparse``: a layer flagged sparse names the rule's
        backend and keeps an index-key cache of the rule's geometry beside its K/V."""
        rule = self.family.attention.own_sparse
        if rule is None:
            return {}
        flags = self.text.int_list(rule.flags_field) or []
        if index >= len(flags) or not flags[index]:
            return {}
        text = self.text
        indexer = SparseIndexer(index_topk=text.int_(rule.index_topk_field),
                                index_head_dim=text.int_(rule.index_head_dim_field),
                                index_n_heads=text.int_(rule.index_heads_field),
                                row=rule.index_row, backend=rule.index_backend)
        return {"own_backend": rule.backend, "indexer": indexer}

    def _per_layer(self, index: int) -> dict[str, Any]:
        """The layer's own heads and head size from the family's ``per_layer_field``
        (``{"5": {"head_dim": 512, "num_key_value_heads": 1}}``)."""
        key = self.family.attention.per_layer_field
        table = self.text.section(key) if key else None
        entry = table.section(str(index)) if table is not None else None
        if entry is None:
            return {}
        out: dict[str, Any] = {}
        if entry.has("head_dim"):
            out["head_size"] = out["head_size_v"] = entry.int_("head_dim")
        if entry.has("num_key_value_heads"):
            out["num_kv_heads"] = out["total_kv_heads"] = entry.int_("num_key_value_heads")
        return out

    def _sink(self, mixer: MixerType) -> bool:
        sinks = self.family.attention.sinks
        if isinstance(sinks, bool):
            return sinks
        field = sinks.get(mixer)
        return field is not None and self.text.bool_(field)


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")
"""A ``{field}`` of a refusal's message (a canonical name or a dotted path)."""


def _scalar(value: Any) -> expr_lang.Value:
    return value if isinstance(value, int | float | str | bool) else None


def config_refusal(text: ConfigReader, family: Family) -> tuple[str, ...]:
    """The first of the family's ``config_refusals`` whose condition holds over the
    config's fields, as ``Type: message`` with the fields' values filled in."""
    for refusal in family.config_refusals:
        condition = expr_lang.parse(refusal.when)
        names = expr_lang.names_in(condition) | set(_PLACEHOLDER.findall(refusal.message))
        scope = {name: _scalar(text.raw(name)) for name in sorted(names)}
        if expr_lang.evaluate(condition, scope):
            return (f"{refusal.error}: {_fill(refusal.message, scope)}",)
    return ()


def _refuse_unmodelled(text: ConfigReader, family: Family, architecture: str) -> None:
    """Raise :class:`InputError` at the first of the family's ``unmodelled_when`` fields the
    config sets (not null, not empty): vLLM builds layers there that attn-select does not
    model, so the config is not read as the family's other layers."""
    for field, part in family.unmodelled_when.items():
        if text.raw(field) not in (None, [], {}):
            raise text.error(
                field, f"{architecture}: {part}: not modelled by attn-select yet",
                hint=f"a config without {field} is read; this one vLLM builds, attn-select "
                     "cannot answer for it")


def _fill(message: str, scope: Mapping[str, expr_lang.Value]) -> str:
    return _PLACEHOLDER.sub(lambda m: str(scope[m.group(1)]), message)


def _text_reader(top: ConfigReader) -> ConfigReader:
    section = top.section("text_config")
    return section if section is not None else top


def _is_mm_prefix_lm(top: ConfigReader, family: Family) -> bool:
    if top.raw("is_mm_prefix_lm") is not None:
        return top.bool_("is_mm_prefix_lm")
    return family.mm_prefix_lm


def resolve_family(architecture: str) -> tuple[Family, bool]:
    """The family whose rules read ``architecture`` and whether it is mapped
    (False: the generic rules, for an architecture no family names)."""
    family = family_for(architecture)
    if family is None:
        return families()[GENERIC], False
    return family, True


_MAX_WRAPPERS = 4
"""Language models nested deeper than this are a malformed config."""


def _section(reader: ConfigReader, path: str) -> ConfigReader | None:
    section: ConfigReader | None = reader
    for key in path.split("."):
        section = section.section(key) if section is not None else None
    return section


def _version(reader: ConfigReader, rule: VersionRule) -> tuple[int, ...] | str:
    """The config's version as the wrapper's dispatch parses it: the field's text split at
    the dots into integers (the first ``parts``), else the first ``absent`` entry that
    holds; else vLLM's refusal (no version, or a part that is not an integer: every part
    is parsed first, as vLLM's processing info does while the model config is built)."""
    value = reader.raw(rule.field)
    if value is None:
        for entry in rule.absent:
            if all(reader.raw(key) == want for key, want in entry.when.items()):
                value = entry.version
                break
        else:
            return rule.refusal.format(supported=_supported(rule), got=None)
    pieces = str(value).split(".")
    for piece in pieces:  # every part, before any is dropped
        try:
            int(piece)
        except ValueError:
            return rule.invalid.format(got=value, part=repr(piece))
    if rule.parts is not None:
        pieces = pieces[:rule.parts]
    return tuple(int(piece) for piece in pieces)


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


def _by_version(reader: ConfigReader, rule: VersionRule) -> tuple[str | None, str | None]:
    """(the architecture vLLM's version dispatch builds, else None; vLLM's refusal, else
    None)."""
    version = _version(reader, rule)
    if isinstance(version, str):
        return None, f"ValueError: {version}"
    key = _dotted(version)
    if key in rule.broken:
        return None, rule.broken[key]
    arch = rule.values.get(key) if len(version) == 2 else None
    if arch is None:
        return None, f"ValueError: {rule.refusal.format(supported=_supported(rule), got=version)}"
    return arch, None


def _supported(rule: VersionRule) -> str:
    """The supported versions as vLLM's refusal lists them (sorted)."""
    keys = sorted(tuple(int(p) for p in key.split(".")) for key in rule.values)
    return ", ".join(_dotted(key) for key in keys)


def language_model_refusals(top: ConfigReader, family: Family) -> tuple[str, ...]:
    """vLLM's refusal of the wrapper's language model (a version its dispatch does not
    build), as ``Type: message``; empty when it builds one."""
    rule = family.language_model
    if rule is None or rule.by_version is None:
        return ()
    _, refusal = _by_version(top, rule.by_version)
    return (refusal,) if refusal else ()


def _language_model(
    top: ConfigReader, family: Family, mapped: bool
) -> tuple[ConfigReader, Family, bool, str | None]:
    """The section and family whose rules read the layers: for a family that builds its
    language model inside itself (``language_model``), the rule's family, else the
    family of that model's architecture (the one the config's version picks, else the
    rule's, else the section's ``architectures``, else transformers' causal-LM
    architecture of its ``model_type``, as ``VllmConfig.with_hf_config`` resolves it),
    read from its section (the wrapper's own rules for a version vLLM refuses); else the
    config's ``text_config`` (or the top level) and the family itself. Last: the
    section's model type (its ``model_type``, else the rule's default; the top level's
    for the top level; None for a nested section that names none), whose config class
    gives the fields it omits."""
    reader = top
    model_type = top.str_("model_type")
    for _ in range(_MAX_WRAPPERS):
        rule = family.language_model
        if rule is None:
            section = _text_reader(reader)
            if section is not reader:
                model_type = section.str_("model_type")
            return section, family, mapped, model_type
        section = next((s for path in rule.sections
                        if (s := _section(reader, path)) is not None), reader)
        inner = section.str_list("architectures")
        section_type = section.str_("model_type") or rule.model_type
        if section is not reader:
            model_type = section_type
        if rule.family is not None:  # a language model class no architecture names
            family, mapped, reader = families()[rule.family], True, section
            continue
        if rule.by_version is not None:
            arch = _by_version(reader, rule.by_version)[0]
            if arch is None:  # refused (language_model_refusals): the wrapper's own rules
                return section, family, mapped, model_type
        else:
            arch = (rule.by_model_type.get(top.str_("model_type") or "") or rule.architecture
                    or (inner[0] if inner else None))
        if arch is None and section_type is not None:
            arch = causal_lm_architecture(section_type)
        if arch is None or (section is reader and arch in (reader.str_list("architectures") or [])):
            return section, families()[GENERIC], False, model_type
        family, mapped = resolve_family(arch)
        reader = section
    raise top.error("text_config", "language models nested too deep")


def language_model_config(
    raw: Mapping[str, Any], *, file: str = "config.json"
) -> tuple[Mapping[str, Any], Family]:
    """The language model's section of ``raw`` (the top level's keys beneath it, as
    ``text_config`` is read) and the family whose rules read it: for a wrapper, the
    section and family of the language model it builds (``Family.language_model``)."""
    top = ConfigReader(raw, file)
    architectures = top.str_list("architectures") or [""]
    family, mapped = resolve_family(architectures[0])
    section, family, _, _ = _language_model(top, family, mapped)
    if section.data is raw:
        return raw, family
    return {**raw, **section.data}, family


def omitted_defaults(raw: Mapping[str, Any], *, file: str = "config.json") -> dict[str, Any]:
    """{field: value} of the language model's config class (vLLM's ``AutoConfig`` class
    of its section's model type, ``schemas/models/config_defaults.yaml``) for the fields
    that section leaves out; empty for a model type not recorded."""
    top = ConfigReader(raw, file)
    architectures = top.str_list("architectures") or [""]
    family, mapped = resolve_family(architectures[0])
    section, _, _, model_type = _language_model(top, family, mapped)
    defaults = class_defaults(model_type)
    if defaults is None:
        return {}
    return {name: value for name, value in defaults.defaults.items() if name not in section.data}


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
    if top.str_("model_type") is None and (implied := implied_model_type(raw)) is not None:
        raw = {**raw, "model_type": implied}  # transformers' model type for such a config
        top = ConfigReader(raw, file)
    if top.str_("model_type") is None:
        raise top.error("model_type", "missing required field", hint='e.g. "llama"')
    family, mapped = resolve_family(architectures[0])
    wrapper = family
    text, family, mapped, text_type = _language_model(top, family, mapped)
    parser = _ConfigParser(top, text.with_class_defaults(class_defaults(text_type)), family)
    _refuse_unmodelled(parser.text, family, architectures[0])
    try:
        return ModelFacts(
            name=name or file,
            source=file,
            architecture=architectures[0],
            architectures=tuple(architectures),
            model_type=parser.model_type,
            dtype=_dtype(top, text),
            num_layers=parser.num_layers,
            hidden_size=parser.hidden,
            max_position_embeddings=parser.text.opt_int("max_position_embeddings"),
            is_mm_prefix_lm=_is_mm_prefix_lm(top, wrapper) or _is_mm_prefix_lm(top, family),
            rswa_window=(top.int_("rswa_window") if top.raw("rswa_window") is not None
                         else None),
            family=family.name if mapped else None,
            mamba_prefix_caching=bool(family.ssm and family.ssm.mamba_prefix_caching),
            encoder_decoder_default=family.encoder_decoder or wrapper.encoder_decoder,
            prefix_caching_default=(wrapper.prefix_caching and family.prefix_caching
                                    and family.mixers.rule != "state_only"),
            mamba_chunk_size=_mamba_chunk_size(parser.text),
            kv_cache_dtype_default=_kv_cache_dtype_default(parser.text, wrapper, family,
                                                           architectures[0]),
            refusals=language_model_refusals(top, wrapper) + parser.refusals(),
            build_checks=tuple(family.build_checks),
            layers=parser.layers(),
            config_defaults=tuple(used.describe() for _, used in sorted(top.used.items())),
        ).with_config(raw)
    except ValidationError as exc:  # defensive: the reader validates first
        raise InputError(f"inconsistent config: {exc.errors()[0]['msg']}", file=file) from exc


def _kv_cache_dtype_default(text: ConfigReader, wrapper: Family, family: Family,
                            architecture: str) -> KVCacheDtypeDefault | None:
    """The wrapper's (else the language model family's) ``kv_cache_dtype_default``, when
    the language model's config has the field it requires and the rule names the served
    ``architecture`` (or names none)."""
    rule = wrapper.kv_cache_dtype_default or family.kv_cache_dtype_default
    if rule is None or (rule.requires and not text.has(rule.requires)):
        return None
    if rule.architectures and architecture not in rule.architectures:
        return None
    return KVCacheDtypeDefault(capability_families=tuple(rule.capability_families),
                               dtype=rule.dtype, message=rule.message, since=rule.since)


def _mamba_chunk_size(text: ConfigReader) -> int:
    """``ModelConfig.get_mamba_chunk_size`` (vllm/config/model.py, 0.26.0:1440-1455):
    ``mamba_chunk_size``, else ``chunk_size``, else 2048."""
    for key in ("mamba_chunk_size", "chunk_size"):
        value = text.raw(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 2048
