"""The request facts: one frozen, typed model of what vLLM's backend selector is asked,
and the one builder every producer feeds.

The producers read and validate their input and hand the values to the builder:
:mod:`selector.inputs.config` (a deployment file or a ``vllm serve`` command line's deployment),
:mod:`selector.models` via :func:`layer_request` (one layer of a whole model) and
:mod:`selector.inputs.flat` (a flat selector config, the oracle's input format).

A :class:`RequestFacts` holds the facts the request *states*; the engine profile
supplies the rest (``inputs`` / ``environment`` defaults of ``profile.yaml``, the
same in every profile: ``tests/unit/test_request_facts.py``). The solver evaluates a
plain mapping (the compiled profile reads a dict, fast): :meth:`RequestFacts.solver_facts`.
Nothing outside this module builds that mapping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selector.models import LayerFacts, ModelFacts
    from selector.schema.request import Deployment

__all__ = [
    "ENV_PREFIX",
    "FLAT_FACTS",
    "FLAT_FLAGS",
    "FlatModel",
    "RequestColumns",
    "RequestFacts",
    "as_request",
    "deployment_request",
    "flat_request",
    "flat_request_columns",
    "layer_request",
    "single_layer_request",
]

ENV_PREFIX = "env_"
"""Environment facts (``environment:`` of a deployment) carry this prefix for the solver."""

FactValue = Any
"""A fact's value as the solver reads it (``bool``, ``int``, ``str`` or ``None``)."""


@dataclass(frozen=True, eq=False, repr=False)
class RequestFacts:
    """The facts of one attention layer's request, in vLLM's selector vocabulary.

    Built by the functions of this module, which store exactly the facts a request
    states (an unstated fact reads as the profile default below; calling the class
    states every field). Environment facts (``env_*``, declared by each profile's
    ``environment:``) are in :attr:`environment`.
    """

    cc: int | None = None
    """Compute capability, major * 10 + minor (9.0 -> 90)."""
    head_size: int | None = None
    head_size_v: int | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = "auto"
    block_size: int | None = None
    use_mla: bool = False
    has_sink: bool = False
    use_sparse: bool = False
    use_mm_prefix: bool = False
    use_per_head_quant_scales: bool = False
    attn_type: str = "decoder"
    has_sliding_window: bool = False
    use_non_causal: bool = False
    use_batch_invariant: bool = False
    use_kv_connector: bool = False
    use_adaptive_verification: bool = False
    use_dcp: bool = False
    use_rswa: bool = False
    use_pcp: bool = False
    num_heads: int | None = None
    """Query heads per rank, passed to MLA backends only."""
    model_present: bool = False
    model_num_q_heads: int | None = None
    model_num_kv_heads: int | None = None
    model_mm_prefix_lm: bool = False
    model_rswa_window: int | None = None
    model_is_diffusion: bool = False
    model_attn_type: str = "decoder"
    """``model_config.attn_type`` (the model's, not the layer's ``attn_type``)."""
    model_softcap: bool = False
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    kv_lora_rank: int | None = None
    v_head_dim: int | None = None
    index_topk: int | None = None
    layer_alibi: bool = False
    layer_softcap: bool = False
    layer_alibi_sqrt: bool = False
    layer_chunk_lookback: int = -1
    tp_size: int = 1
    dcp_size: int = 1
    pcp_size: int = 1
    cp_kv_cache_interleave_size: int = 1
    flash_attn_version: int | None = None
    use_trtllm_attention: bool | None = None
    mla_prefill_backend: str | None = None
    num_speculative_tokens: int = 0
    hf_config_class: str = "PretrainedConfig"

    @property
    def stated(self) -> Mapping[str, FactValue]:
        """The facts the request states, by the solver's names (environment included);
        read-only (the instance's own attributes: copy with :meth:`solver_facts`)."""
        return vars(self)

    @property
    def environment(self) -> dict[str, FactValue]:
        """The stated environment facts, without the ``env_`` prefix."""
        return {name.removeprefix(ENV_PREFIX): value for name, value in vars(self).items()
                if name.startswith(ENV_PREFIX)}

    def solver_facts(self) -> dict[str, FactValue]:
        """The mapping the solver evaluates (a fresh copy: the solver adds derived facts)."""
        return dict(vars(self))

    def __repr__(self) -> str:
        return "RequestFacts(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RequestFacts) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(tuple(vars(self).items()))


def _wrap(stated: dict[str, FactValue]) -> RequestFacts:
    """The stated facts as a :class:`RequestFacts`: the dict becomes the instance's
    attributes as it is (one allocation, no per-field copy: ``sweep`` builds one per
    config); unstated facts fall back to the class defaults."""
    facts = object.__new__(RequestFacts)
    object.__setattr__(facts, "__dict__", stated)
    return facts


def as_request(facts: RequestFacts | Mapping[str, FactValue]) -> RequestFacts:
    """``facts`` as request facts: given by the solver's names (tests, tools) or already built."""
    return facts if isinstance(facts, RequestFacts) else _wrap(dict(facts))


def _only(stated: dict[str, FactValue], vocabulary: Iterable[str] | None) -> RequestFacts:
    if vocabulary is None:
        return _wrap(stated)
    known = set(vocabulary)
    return _wrap({k: v for k, v in stated.items() if k in known})


def deployment_request(d: Deployment, cc: int, *, vocabulary: Iterable[str] | None = None,
                       dtype: str | None = None) -> RequestFacts:
    """The facts of a deployment that do not depend on the layer (``vocabulary``: keep
    only the facts the engine profile reads; ``dtype``: the model's when the deployment
    states none)."""
    stated: dict[str, FactValue] = {
        "cc": cc,
        "dtype": d.dtype if d.dtype is not None else dtype,
        "kv_cache_dtype": d.kv_cache_dtype,
        "block_size": d.block_size,
        "use_non_causal": d.attention_config.use_non_causal,
        "use_batch_invariant": d.batch_invariant,
        "use_kv_connector": d.kv_connector is not None,
        "use_pcp": d.parallel.prefill_context_parallel_size > 1,
        "use_dcp": d.parallel.decode_context_parallel_size > 1,
        "use_adaptive_verification": d.speculative.adaptive_verification,
        "tp_size": d.parallel.tensor_parallel_size,
        "dcp_size": d.parallel.decode_context_parallel_size,
        "pcp_size": d.parallel.prefill_context_parallel_size,
        "cp_kv_cache_interleave_size": d.parallel.cp_kv_cache_interleave_size,
        "flash_attn_version": d.attention_config.flash_attn_version,
        "use_trtllm_attention": d.attention_config.use_trtllm_attention,
        "mla_prefill_backend": d.attention_config.mla_prefill_backend,
        "num_speculative_tokens": d.speculative.num_speculative_tokens,
    }
    for name, value in d.environment.items():
        stated[ENV_PREFIX + name] = value
    return _only(stated, vocabulary)


def single_layer_request(d: Deployment, cc: int, *, head_size: int, q_heads: int,
                         kv_total: int, vocabulary: Iterable[str]) -> RequestFacts:
    """The facts of a single-layer deployment (``layer:``), its heads already checked:
    ``head_size`` resolved (MLA: ``kv_lora_rank + qk_rope_head_dim``), ``q_heads`` per
    rank and ``kv_total`` KV heads in all."""
    layer = d.layer
    mla = layer.mla
    tp = d.parallel.tensor_parallel_size
    stated = dict(deployment_request(d, cc).stated)
    stated.update({
        "head_size": head_size,
        "head_size_v": layer.head_size_v,
        "use_mla": mla is not None,
        "has_sink": layer.has_sink,
        "use_sparse": mla is not None and mla.index_topk is not None,
        "use_mm_prefix": layer.mm_prefix,
        "use_per_head_quant_scales": layer.per_head_quant_scales,
        "attn_type": layer.attn_type,
        "has_sliding_window": layer.sliding_window is not None,
        "use_rswa": layer.rswa_window is not None,
        "num_heads": q_heads if mla is not None else None,
        "model_present": True,
        "model_num_q_heads": q_heads,
        "model_num_kv_heads": 1 if mla is not None else max(1, kv_total // tp),
        "model_mm_prefix_lm": layer.mm_prefix,
        "model_rswa_window": layer.rswa_window,
        "model_is_diffusion": layer.is_diffusion,
        "model_softcap": layer.logits_soft_cap is not None,
        "qk_nope_head_dim": mla.qk_nope_head_dim if mla else None,
        "qk_rope_head_dim": mla.qk_rope_head_dim if mla else None,
        "kv_lora_rank": mla.kv_lora_rank if mla else None,
        "v_head_dim": mla.v_head_dim if mla else None,
        "index_topk": mla.index_topk if mla else None,
        "layer_alibi": layer.alibi,
        "layer_softcap": layer.logits_soft_cap is not None,
    })
    return _only(stated, vocabulary)


def layer_request(base: RequestFacts, layer: LayerFacts, model: ModelFacts) -> RequestFacts:
    """``base`` (the deployment's facts) with one model layer's caller-side facts
    (vLLM's ``get_attn_backend`` arguments and the model facts its backends read)."""
    mla = layer.mla
    stated = dict(base.stated)
    stated.update({
        "head_size": layer.head_size,
        "head_size_v": (None if mla or layer.head_size_v in (0, layer.head_size)
                        else layer.head_size_v),
        "use_mla": mla is not None,
        "use_sparse": layer.indexer is not None,
        "has_sink": layer.has_sink,
        "has_sliding_window": layer.sliding_window is not None,
        "attn_type": layer.attn_type,
        "use_mm_prefix": model.is_mm_prefix_lm,
        "model_mm_prefix_lm": model.is_mm_prefix_lm,
        "num_heads": layer.num_q_heads if mla is not None else None,
        "model_present": True,
        "model_num_q_heads": layer.num_q_heads,
        "model_num_kv_heads": layer.num_kv_heads,
        "model_attn_type": model.attn_type,
        "layer_alibi": layer.alibi,
        "layer_alibi_sqrt": layer.alibi_sqrt,
        "layer_chunk_lookback": layer.chunk_lookback,
        "layer_softcap": layer.logits_soft_cap is not None,
        "model_softcap": layer.logits_soft_cap is not None,
        "tp_size": model.tp_size,
    })
    if layer.kv_cache_dtype is not None:
        stated["kv_cache_dtype"] = layer.kv_cache_dtype
    if model.rswa_window is not None:  # model_config.rswa_window (selector.py:176-179)
        stated.update({"use_rswa": True, "model_rswa_window": model.rswa_window})
    if mla is not None:
        # hf_text_config.index_topk, the model's: a dense layer of a model with sparse layers
        # (HY-V4) reads it too
        indexer = layer.indexer or next((other.indexer for other in model.layers
                                         if other.indexer), None)
        stated.update({
            "kv_lora_rank": mla.kv_lora_rank,
            "qk_nope_head_dim": mla.qk_nope_head_dim,
            "qk_rope_head_dim": mla.qk_rope_head_dim,
            "v_head_dim": mla.v_head_dim,
            "index_topk": indexer.index_topk if indexer else None,
        })
    return _wrap(stated)


FLAT_FLAGS = ("use_mla", "has_sink", "use_sparse", "use_mm_prefix",
              "use_per_head_quant_scales", "has_sliding_window", "use_non_causal")
"""The flat config's yes/no fields (false when absent)."""


@dataclass(frozen=True)
class FlatModel:
    """The model a flat config describes (``model:`` / ``num_kv_heads``), validated."""

    q_heads: int
    kv_heads: int
    hf_text_config: Mapping[str, Any]


_HF_FACTS = ("qk_nope_head_dim", "qk_rope_head_dim", "kv_lora_rank", "v_head_dim",
             "index_topk")
"""The MLA dimensions a flat config's ``model.hf_text_config`` gives, by their names."""

FLAT_FACTS = frozenset({
    "cc", "head_size", "dtype", "kv_cache_dtype", "block_size", *FLAT_FLAGS, "attn_type",
    "num_heads", "model_present", "hf_config_class", "model_num_q_heads", "model_num_kv_heads",
    "model_mm_prefix_lm", *_HF_FACTS, "model_softcap"})
"""The facts :func:`flat_request` derives from the oracle's fields; every other fact of a
flat config's request is the profile default or a vocabulary fact the config gives."""


def flat_request(defaults: Mapping[str, FactValue], given: Mapping[str, FactValue], *,
                 cc: int, head_size: int | None, dtype: str, kv_cache_dtype: str | None,
                 block_size: int | None, flags: Mapping[str, bool], attn_type: str,
                 num_heads: int | None, model: FlatModel | None) -> RequestFacts:
    """The facts of one flat config, validated by :mod:`selector.inputs.flat`: every fact of the
    profile's vocabulary (``defaults``), the vocabulary facts the config gives as they are
    (``given``), then the oracle's fields mapped to the solver's facts."""
    stated = dict(defaults)
    stated.update(given)
    stated["cc"] = cc
    stated["head_size"] = head_size
    stated["dtype"] = dtype
    stated["kv_cache_dtype"] = kv_cache_dtype
    stated["block_size"] = block_size
    stated.update(flags)
    stated["attn_type"] = attn_type
    stated["num_heads"] = num_heads
    if model is not None:
        hf = model.hf_text_config
        stated["model_present"] = True
        stated["hf_config_class"] = "types.SimpleNamespace"  # the oracle's model stand-in
        stated["model_num_q_heads"] = model.q_heads
        stated["model_num_kv_heads"] = 1 if stated["use_mla"] else max(1, model.kv_heads)
        stated["model_mm_prefix_lm"] = stated["use_mm_prefix"]
        for fact in _HF_FACTS:
            stated[fact] = hf.get(fact)
        stated["model_softcap"] = hf.get("attn_logit_softcapping") is not None
    return _wrap(stated)


class RequestColumns(Sequence[Mapping[str, FactValue]]):
    """The stated facts of many requests column-wise (``sweep``'s batches): per fact that
    varies, one value per request (:attr:`columns`); :attr:`shared`: the facts every request
    states alike.  Indexing gives one request's stated facts (a fresh dict)."""

    def __init__(self, count: int, columns: dict[str, list[FactValue]],
                 shared: dict[str, FactValue]) -> None:
        self.size = count
        self.columns = columns
        self.shared = shared

    def __len__(self) -> int:
        return self.size

    def row(self, index: int) -> dict[str, FactValue]:
        """The stated facts of request ``index``."""
        stated = dict(self.shared)
        stated.update(zip(self.columns, map(itemgetter(index), self.columns.values()), strict=True))
        return stated

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self.row(i) for i in range(self.size)[index]]
        return self.row(range(self.size)[index])


def flat_request_columns(defaults: Mapping[str, FactValue], *, count: int, cc: list[int],
                         head_size: list[int], dtype: list[str], kv_cache_dtype: list[str | None],
                         block_size: list[int | None], flags: Mapping[str, list[bool]],
                         attn_type: list[str], num_heads: list[int | None],
                         models: Mapping[int, FlatModel]) -> RequestColumns:
    """:func:`flat_request` of ``count`` flat configs at once, none giving a vocabulary fact
    of its own: its arguments column-wise (``models``: the model of each request that has
    one, by index)."""
    columns: dict[str, list[FactValue]] = {
        "cc": cc, "head_size": head_size, "dtype": dtype, "kv_cache_dtype": kv_cache_dtype,
        "block_size": block_size, **flags, "attn_type": attn_type, "num_heads": num_heads}
    shared = {name: value for name, value in defaults.items() if name not in columns}
    if models:
        model_facts = ("model_present", "hf_config_class", "model_num_q_heads",
                       "model_num_kv_heads", "model_mm_prefix_lm", *_HF_FACTS, "model_softcap")
        own = {name: [shared.pop(name)] * count for name in model_facts}
        use_mla, use_mm_prefix = flags["use_mla"], flags["use_mm_prefix"]
        for index, model in models.items():
            hf = model.hf_text_config
            own["model_present"][index] = True
            own["hf_config_class"][index] = "types.SimpleNamespace"  # the oracle's model stand-in
            own["model_num_q_heads"][index] = model.q_heads
            own["model_num_kv_heads"][index] = 1 if use_mla[index] else max(1, model.kv_heads)
            own["model_mm_prefix_lm"][index] = use_mm_prefix[index]
            for fact in _HF_FACTS:
                own[fact][index] = hf.get(fact)
            own["model_softcap"][index] = hf.get("attn_logit_softcapping") is not None
        columns.update(own)
    return RequestColumns(count, columns, shared)
