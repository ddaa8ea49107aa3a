"""Backends a model's own layers choose (vLLM's "model-driven" members of
``AttentionBackendEnum``: DeepSeek-V4's ``FLASHMLA_SPARSE_DSV4`` /
``FLASHINFER_MLA_SPARSE_DSV4`` and their kin), as data.

The platform's priority list never sees these layers: the model's layer code maps the
``--attention-backend`` given (or the GPU) to its own attention class, refuses some
names with its own text and ignores the rest, resolves the KV-cache dtype its layout
needs, and registers several caches per decoder layer (a sliding-window MLA cache,
the compressed MLA cache, the indexer's K cache, the compressors' state caches), each
with its own block size. vLLM groups them with the block-outermost packed grouping
(``_get_packed_kv_cache_groups``), after ``update_block_size_for_backend`` set the
compressed caches' block to the backend's kernel block. Step5's layers (0.33.0) pin
their own backends instead (STEP5_DSA where the sparse_config applies, the split-KV
FLASH_ATTN elsewhere), whatever ``--attention-backend`` says; a DSA layer adds a sparse
summary cache and a CSA tail ring (a ``CircularBufferSpec``), which the packed grouping
keeps as a state bucket. DeepSeek-V4.1's layers (0.30.0-0.33.0) register the compressed
caches only on ``kv_source_layer_ids``, its compressor state a ``CircularBufferSpec``; its
kernel block and layer class may depend on the GPU, its default on a probed kernel build.
Dots3Note's layers pin a padded sparse MLA or a sliding TRITON_MLA by ``layer_types``.

Data: ``model-driven.yaml`` of the engine profile (inherited whole; a release that
changes a fact gives a complete file). Each fact cites vLLM's source; vLLM's own
answers (``tools/model_driven_reference.py``) are compared by
``tests/golden/test_model_driven.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from selector import expr as expr_lang
from selector.catalog import Catalog, CatalogError
from selector.errors import InputError
from selector.kv.backend_facts import (
    CG_LEVEL,
    BackendKVFacts,
    BlockSizeRule,
    CGSupport,
    KVLayout,
    MultipleOf,
)
from selector.kv.block_size import distinct_backends, preferred_block_size
from selector.kv.cudagraph import CudaGraphResolution, resolve_cudagraph_mode
from selector.kv.errors import EngineStartupError
from selector.kv.layer_specs import CacheEntry
from selector.kv.layout import LayoutResolution
from selector.kv.options import KVOptions
from selector.kv.packed import packed_layer_groups
from selector.kv.plan_types import (
    AttentionGroupPlan,
    BlockSizeDecision,
    GroupPlan,
    ModelPlan,
    PlanError,
    format_ranges,
)
from selector.kv.specs import (
    AnySpec,
    CircularBufferSpec,
    FullAttentionSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
from selector.models.facts import ModelFacts

__all__ = [
    "DrivenBackend",
    "DrivenCache",
    "DrivenModel",
    "DrivenSelection",
    "MissingConfigFieldError",
    "ModelDrivenData",
    "aligned_block",
    "compress_ratios",
    "driven_backend",
    "driven_caches",
    "driven_rule",
    "kernel_block",
    "layer_backends",
    "layer_kinds",
    "layer_refusal",
    "layer_types",
    "load_model_driven",
    "model_driven_names",
    "own_backend_facts",
    "packed_groups",
    "plan_driven",
    "resolve_cache_dtype",
    "select_driven",
]

DATA_FILE = "model-driven.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BackendOnGPU(_Strict):
    """What a backend's layers are on GPUs of one major capability where the model builds
    another layer class for it (DeepSeek-V4.1's FlashInfer name on SM12x)."""

    layer_class: str | None = None
    packed_layout: bool | None = None
    source: str = ""


class DrivenBackend(_Strict):
    """One model-driven member of the release's ``AttentionBackendEnum``."""

    class_path: str
    """The enum member's value (``vllm/v1/attention/backends/registry.py``)."""
    platform: Literal["cuda", "rocm"]
    """The platform whose model code builds it (a ROCm twin is data for the ROCm platform)."""
    models: tuple[str, ...]
    """The architectures whose layers select it."""
    kernel_block_sizes: tuple[int, ...] = ()
    """``get_supported_kernel_block_sizes()`` (empty: not importable on the reference host)."""
    kernel_block_size: str = ""
    """An expression over ``cc_major`` where the class answers per GPU (DeepSeek-V4.1's
    FlashMLA: 64 on SM90, 128 elsewhere); empty: the first of ``kernel_block_sizes``."""
    cudagraph_support: CGSupport | None = None
    """The metadata builder's ``_cudagraph_support``."""
    reorder_batch_threshold: int | None = None
    kv_cache_dtypes: tuple[str, ...] = ()
    layer_class: str = ""
    """The attention layer class the model builds with it (its modules' class name)."""
    packed_layout: bool = False
    """The layer class stores the ``fp8_ds_mla`` packed layout (``use_fp8_ds_mla_layout``)."""
    packed_cache_dtype: str = "fp8_ds_mla"
    """The packed record ``auto`` / ``fp8`` resolves to (the layer's
    ``packed_kv_cache_dtype``: DeepSeek-V4.1's mega attention takes ``nvfp4_ds_mla``)."""
    on_cc_major: dict[int, BackendOnGPU] = Field(default_factory=dict)
    """The layer class built on GPUs of that major capability, where it is another."""
    source: str = ""

    def on_gpu(self, cc_major: int) -> DrivenBackend:
        """The backend as the layers are built on a GPU of ``cc_major``."""
        override = self.on_cc_major.get(cc_major)
        if override is None:
            return self
        changes = {k: v for k, v in (("layer_class", override.layer_class),
                                     ("packed_layout", override.packed_layout)) if v is not None}
        return self.model_copy(update=changes)


class SelectionRule(_Strict):
    """One step of the model's own backend choice; the first whose ``when`` holds decides.
    ``when`` reads ``requested`` (the ``--attention-backend`` name, ``none`` when not
    given), ``cc_major``, ``cc``, ``cc_minor``, ``tp_size``, ``pcp_size``, the rule's
    ``probes`` and the config's fields (its scalars, its lists of integers and the rule's
    ``fields``). As a layer refusal (``layer_refusals``, ``spec_refusals``), ``when`` reads
    the layer's environment (``layer_refusal``)."""

    when: str | bool = True
    backend: str | None = None
    """The backend the layers then name; null with ``refuse``."""
    refuse: str | None = None
    """vLLM's error, word for word (``{requested}`` is the name given; any name of the
    environment may be filled in, e.g. ``{cc_major}``)."""
    exc_type: str = "ValueError"
    code: Literal["MD001", "MD002", "MD004", "MD005"] = "MD001"
    """The refusal's code: MD001 (of the ``--attention-backend`` given), MD002 (of the
    KV-cache dtype), MD004 (of the checkpoint or the GPU, whatever is given) or MD005 (of
    a config field the layer code cannot build)."""
    note: str = ""


class CacheDtypeRule(_Strict):
    """The KV-cache dtype the layer resolves (``_resolve_dsv4_kv_cache_dtype``); reads
    ``packed`` (the backend's layout), ``kv_cache_dtype`` (``--kv-cache-dtype``) and
    ``kv_fp8`` (vLLM's ``kv_cache_dtype.startswith("fp8")``) and ``cc_major``."""

    when: str | bool = True
    cache_dtype: str | None = None
    """An expression: the ``cache_dtype_str`` the specs carry."""
    element_bytes: int | None = None
    """Bytes per element of a plain KV row (null: the packed ``uint8`` layout)."""
    refuse: str | None = None
    """vLLM's error (``{kv_cache_dtype}``: the dtype given)."""
    exc_type: str = "ValueError"


class DrivenCache(_Strict):
    """One KV-cache module a decoder layer registers, when ``when`` holds. Expressions
    read the config's fields (its scalars and the rule's ``fields``), ``layer_index``,
    ``layer_type`` (this layer's entry of the rule's ``layer_types_fields``),
    ``compress_ratio`` (this layer's), ``packed``, ``kv_bytes`` (the plain row's element
    bytes), ``cache_block`` (``cache_config.block_size``) and ``tp_size``."""

    name: str
    """The module's name under ``<layer_prefix>.<i>.`` (vLLM's static forward context;
    ``model.layers`` unless the rule's ``layer_prefix`` names the architecture's own)."""
    module: str
    backend: str
    """What the module's ``get_attn_backend().get_name()`` says (``selected``: the
    model-driven backend chosen)."""
    when: str | bool = True
    spec: Literal["mla", "sliding_window_mla", "full_attention", "sliding_window",
                  "circular_buffer", "none"]
    """The spec class: ``MLAAttentionSpec``, ``SlidingWindowMLASpec``, ``FullAttentionSpec``,
    ``SlidingWindowSpec``, ``CircularBufferSpec`` (vllm/v1/kv_cache_interface.py), or none."""
    block_size: str | int = "cache_block"
    num_kv_heads: str | int = 1
    head_size: str | int = 0
    head_size_v: str | int = 0
    """``head_size_v`` (0: a key-only cache, as every MLA cache)."""
    tokens_per_state: str | int = 1
    sliding_window: str | int | None = None
    dtype: str = "uint8"
    """The spec's element dtype: ``uint8``, ``float32`` or ``kv`` (the resolved row dtype)."""
    state_bytes: str | int | None = None
    """Bytes per state when packed (``state_content_bytes``); null: head_size x dtype."""
    alignment: str | int | None = None
    """``_apply_alignment_padding``: the page rounded up to this many bytes."""
    source: str = ""


class HelperBackend(_Strict):
    """A backend a cache module names that is not in the enum (its builder and kernel
    sizes, as the release's classes state them)."""

    class_name: str = ""
    cudagraph_support: CGSupport
    """What the builder's ``get_cudagraph_support(vllm_config, spec)`` answers for these
    caches (recorded per layer: it may differ from the class attribute)."""
    by_selected: dict[str, CGSupport] = Field(default_factory=dict)
    """The support when the layers chose another model-driven backend (its own helper
    class, e.g. the FlashInfer path's sliding-window backend)."""
    kernel_block_sizes: tuple[int | str, ...] = ()
    kernel_block_states: tuple[int, ...] = ()
    """Exact kernel block sizes in states of the cache's ``tokens_per_state`` tokens
    (``Glm5NextIndexerBackend``: ``index_kpool`` times DeepGEMM's paged-MQA page sizes)."""
    supported_layouts: tuple[KVLayout, ...] | None = None
    """``supported_kv_cache_layouts()`` (None: AttentionBackend's, any)."""
    enum_member: bool = False
    """The release's ``AttentionBackendEnum`` has the name (a valid ``--attention-backend``
    though no model-driven suffix names it, e.g. ``STEP5_DSA``)."""
    source: str = ""

    def support_with(self, selected: str) -> CGSupport:
        return self.by_selected.get(selected, self.cudagraph_support)


class DrivenModel(_Strict):
    """The rule of one model family whose layers choose their backend."""

    architectures: tuple[str, ...]
    source: str
    compress_ratios_field: str = ""
    """The config's per-layer list of compression ratios (empty: none, every ratio 0)."""
    fields: dict[str, str] = Field(default_factory=dict)
    """Config values the expressions read by name: a dotted path into the (text) config,
    null when absent (a section: true when present)."""
    config_defaults: dict[str, Any] = Field(default_factory=dict)
    """What the layer code takes for a value the config omits, by the name the expressions
    read: a config field's ``getattr`` default, also for a field given null or empty
    (vLLM's ``getattr(config, name, None) or ()``: DeepSeek-V4.1's ``kv_source_layer_ids``),
    or a ``fields`` entry's where its path is absent but its section is there (the config
    class's default: Step5's ``Step5SparseConfig``)."""
    layer_types_fields: tuple[str, ...] = ()
    """The config's per-layer type lists, the first present wins (``layer_type`` in the
    expressions: Dots3Note's ``layer_types``, Step5's ``layer_types_with_mtp``)."""
    layer_type_default: str = "'full_attention'"
    """``layer_type`` when no list is present (an expression over ``layer_index``)."""
    layer_refusals: tuple[SelectionRule, ...] = ()
    """A layer's build refused (``layer_refusal``): the first layer, then the first rule,
    whose ``when`` holds; checked after the backend choice (``selection``) and before the
    KV-cache dtype (``cache_dtype``)."""
    spec_refusals: tuple[SelectionRule, ...] = ()
    """A layer's KV-cache spec refused (``get_kv_cache_spec``, once every layer is built)."""
    layer_values: dict[str, str] = Field(default_factory=dict)
    """Per-layer values the caches' expressions read by name, each an expression over the
    layer's environment and the values before it."""
    main_cache: str = ""
    """The cache module whose backend names a layer's backend (``layer_backends``; empty:
    ``selected`` where one of the layer's cache modules names it, else its last one's)."""
    selection: tuple[SelectionRule, ...]
    platform_first: Literal["", "sparse_mla"] = ""
    """vLLM's platform selects a backend first for a layer the model then discards
    (``sparse_mla``: the config's first sparse MLA layer, Dots3Note's
    ``DeepseekV2MLAAttention`` before it swaps in its own): that selection's refusal of the
    ``--attention-backend`` given (or of every backend) is the model's."""
    cache_dtype: tuple[CacheDtypeRule, ...]
    caches: tuple[DrivenCache, ...]
    layer_backends: dict[str, HelperBackend] = Field(default_factory=dict)
    aligned_block_size: Literal["kernel_block", "common"] = "kernel_block"
    """``update_block_size_for_backend``: the block the caches take without ``--block-size``
    (``kernel_block``: the chosen backend's one kernel block size; ``common``:
    ``_preferred_block_size_for_backends``, the smallest block every cache's backend
    accepts: the cache config's 16 when every backend's ``MultipleOf`` sizes accept it)."""
    kv_cache_layout: str = "BLHNC"
    layer_prefix: dict[str, str] = Field(default_factory=dict)
    """The decoder layers' module prefix by architecture (a wrapper builds the text model
    under its own prefix, e.g. ``language_model.model.layers``); ``model.layers`` else."""
    kind_prefix: str = "model-driven"
    """How the report names these layers' kind (with each layer's compression ratio)."""
    probes: dict[str, bool] = Field(default_factory=dict)
    """Facts vLLM's layer code probes on the GPU (a kernel build's ops), by the name the
    ``selection`` reads, with the value taken when the deployment does not state it (the
    CPU reference answers without the GPU build: its value is in the test)."""
    grouping: Literal["packed", "uniform_groups", "uniform_groups_padded"] = "packed"
    """How the release groups these caches: ``uniform_groups_padded`` (0.25.1-0.26.0:
    ``group_and_unify_kv_cache_specs`` + ``_get_kv_cache_groups_uniform_groups``, each
    sliding-window page padded to the nearest larger MLA page), ``uniform_groups``
    (0.27.0-0.28.0: the same without the padding) or ``packed`` (0.29.0+:
    ``_get_packed_kv_cache_groups``)."""


class ModelDrivenData(_Strict):
    engine: str
    source: str = ""
    backends: dict[str, DrivenBackend]
    models: dict[str, DrivenModel]
    layer_backends: dict[str, HelperBackend] = Field(default_factory=dict)
    """Backends a model's own layers wire that are not enum members, for layers the
    ordinary planner keeps (a family's ``attention.own_sparse``: MiniMax-M3's index-key
    cache)."""

    def models_choosing(self, name: str) -> tuple[str, ...]:
        """The architectures whose own layer code chooses backend ``name`` (an enum member
        of ``backends``, or one a rule's ``layer_backends`` marks ``enum_member``)."""
        if name in self.backends:
            return self.backends[name].models
        return tuple(a for rule in self.models.values() for a in rule.architectures
                     if name in rule.layer_backends and rule.layer_backends[name].enum_member)

    def rule_for(self, architecture: str) -> DrivenModel | None:
        for rule in self.models.values():
            if architecture in rule.architectures:
                return rule
        return None


@cache
def _load(path: Path) -> ModelDrivenData:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return ModelDrivenData.model_validate(raw)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(f"{path}: {exc}") from None


def load_model_driven(engine: str, catalog: Catalog) -> ModelDrivenData | None:
    """The engine's ``model-driven.yaml`` (inherited whole), or None when it has none."""
    path = catalog.engine_file(engine, DATA_FILE)
    return None if path is None else _load(path)


def model_driven_names(engine: str, catalog: Catalog) -> frozenset[str]:
    """The model-driven backend names of the release (valid ``--attention-backend`` values)."""
    data = load_model_driven(engine, catalog)
    if data is None:
        return frozenset()
    own = {name for rule in data.models.values() for name, helper in rule.layer_backends.items()
           if helper.enum_member}
    return frozenset(data.backends) | own


def driven_rule(model: ModelFacts, engine: str, catalog: Catalog
                ) -> tuple[ModelDrivenData, DrivenModel] | None:
    data = load_model_driven(engine, catalog)
    if data is None:
        return None
    rule = data.rule_for(model.architecture)
    return None if rule is None else (data, rule)


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    nested = config.get("text_config")
    return nested if isinstance(nested, Mapping) else config


def compress_ratios(rule: DrivenModel, model: ModelFacts) -> list[int]:
    """Each decoder layer's compression ratio (the config's ``compress_ratios_field``)."""
    text = _text_config(model.config or {})
    field = rule.compress_ratios_field
    return [int(r) for r in (text.get(field) if field else None) or [0] * model.num_layers]


def _lookup(config: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """(whether the path's section is there, the value at the dotted path or None)."""
    node: Any = config
    parts = path.split(".")
    for depth, part in enumerate(parts):
        if not isinstance(node, Mapping) or part not in node:
            return depth == len(parts) - 1 and isinstance(node, Mapping), None
        node = node[part]
    return True, node


def _numbers(text: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
             ) -> dict[str, Any]:
    """The config's scalar fields and its lists of integers (as tuples, for ``in``), over
    ``defaults`` for the fields it omits (or gives null or empty)."""
    text = {**(defaults or {}), **{k: v for k, v in text.items() if v not in (None, [])}}
    out: dict[str, Any] = {k: v for k, v in text.items() if isinstance(v, int | float | str)}
    out.update({k: tuple(v) for k, v in text.items()
                if isinstance(v, list | tuple) and all(isinstance(i, int) for i in v)})
    return out


def _config_env(rule: DrivenModel, config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's scalar fields and lists of integers (over the rule's
    ``config_defaults``) and the rule's ``fields`` (their defaults where the section is
    there but the key is not), as the expressions read them."""
    text = _text_config(config)
    env = _numbers(text, {k: v for k, v in rule.config_defaults.items() if k not in rule.fields})
    for name, path in rule.fields.items():
        section, value = _lookup(text, path)
        if value is None and section:
            value = rule.config_defaults.get(name)
        if isinstance(value, Mapping):  # a section: its presence (its keys have paths of their own)
            value = True
        env[name] = tuple(value) if isinstance(value, list | tuple) else value
    return env


def _listed_types(rule: DrivenModel, config: Mapping[str, Any]) -> list[Any]:
    text = _text_config(config)
    return next((list(text[f]) for f in rule.layer_types_fields if text.get(f)), [])


def layer_types(rule: DrivenModel, config: Mapping[str, Any], num_layers: int) -> list[str]:
    """Each decoder layer's type: its entry of the first of ``layer_types_fields`` the
    config has, else ``layer_type_default`` (an entry past a list's end: the default)."""
    listed = _listed_types(rule, config)
    return [str(listed[i]) if i < len(listed)
            else str(_eval(rule.layer_type_default, {"layer_index": i}))
            for i in range(num_layers)]


def _layer_envs(rule: DrivenModel, config: Mapping[str, Any], extra: Mapping[str, Any]
                ) -> list[dict[str, Any]]:
    """Each decoder layer's environment: the config's fields, ``layer_index``,
    ``layer_type`` (``layer_listed``: the type is a list's entry), ``compress_ratio``,
    ``extra``, then the rule's ``layer_values`` in order."""
    text = _text_config(config)
    num_layers = int(text.get("num_hidden_layers") or 0)
    field = rule.compress_ratios_field
    ratios = list((text.get(field) if field else None) or [])  # absent: every layer ratio 0
    types = layer_types(rule, config, num_layers)
    listed = len(_listed_types(rule, config))
    base = _config_env(rule, config)
    out: list[dict[str, Any]] = []
    for index in range(num_layers):
        env: dict[str, Any] = {**base, "layer_index": index, "layer_type": types[index],
                               "layer_listed": index < listed,
                               "compress_ratio": int(ratios[index]) if index < len(ratios) else 0,
                               **extra}
        for value_name, value in rule.layer_values.items():
            env[value_name] = _eval(value, env)
        out.append(env)
    return out


def layer_refusal(rule: DrivenModel, config: Mapping[str, Any], *, kv_cache_dtype: str = "auto",
                  cc: int = 0, tp_size: int = 1, element_bytes: int | None = None,
                  cache_block: int = 16, specs: bool = True) -> DrivenSelection | None:
    """vLLM's refusal of a layer (None: every layer builds): the first layer whose build
    fails (the rule's ``layer_refusals``, in layer order), then (``specs``: the KV-cache
    dtype resolved) the first whose KV-cache spec fails once every layer is built
    (``spec_refusals``). Conditions read the layer's environment (as the caches'
    expressions do), ``kv_cache_dtype``, ``kv_fp8``, ``cc``, ``cc_major`` and ``cc_minor``;
    the message may name any of it (``{layer_index}``, ``{compress_ratio}``)."""
    extra = {"tp_size": tp_size, "kv_cache_dtype": kv_cache_dtype,
             "kv_fp8": kv_cache_dtype.startswith("fp8"), "cc": cc, "cc_major": cc // 10,
             "cc_minor": cc % 10, "packed": element_bytes is None, "kv_bytes": element_bytes or 1,
             "cache_block": cache_block}
    checked = (rule.layer_refusals, rule.spec_refusals if specs else ())
    envs = _layer_envs(rule, config, extra) if any(checked) else []
    for rules in checked:
        for env in envs:
            for step in rules:
                if _eval(step.when, env) and step.refuse is not None:
                    return DrivenSelection(requested=None, backend=None,
                                           error=step.refuse.format(**env),
                                           exc_type=step.exc_type, code=step.code)
    return None


def layer_kinds(rule: DrivenModel, model: ModelFacts, backends: Sequence[str | None]
                ) -> list[str]:
    """How the report names each decoder layer's kind: the rule's ``kind_prefix`` with the
    layer's compression ratio (``compress_ratios_field``), else its type and its backend
    (``layer_backends``)."""
    if rule.compress_ratios_field:
        return [f"{rule.kind_prefix} (compress {r})" for r in compress_ratios(rule, model)]
    types = layer_types(rule, model.config or {}, model.num_layers)
    return [f"{rule.kind_prefix} ({t}, {b})" if b else f"{rule.kind_prefix} ({t})"
            for t, b in zip(types, backends, strict=True)]


class MissingConfigFieldError(InputError):
    """The config lacks a field the model-driven rule's expressions read (vLLM's layer
    code would fail the same way building the layer); the caller names the config file."""


def _eval(text: str | int | bool | None, env: Mapping[str, Any]) -> Any:
    if text is None or isinstance(text, bool | int):
        return text
    try:
        return expr_lang.evaluate(expr_lang.parse(text), env)
    except KeyError as missing:
        name = str(missing.args[0]) if missing.args else "?"
        raise MissingConfigFieldError(
            f"missing (or not a number or text): the layers this architecture builds read "
            f"it ({text})", field=name,
            hint="the checkpoint's own config.json has it; check the architectures "
                 "entry") from None


class DrivenSelection(_Strict):
    """What the model's layer code does with the request: the backend, or its error."""

    requested: str | None
    backend: str | None
    error: str | None = None
    exc_type: str | None = None
    code: str = "MD001"
    """The refusal's reason code (``SelectionRule.code``)."""
    ignored: bool = False
    """A name was given and the layer code took its default anyway."""


def driven_backend(data: ModelDrivenData, rule: DrivenModel, name: str, cc_major: int = 0
                   ) -> DrivenBackend:
    """The backend a selection names, as its layers are built on a GPU of ``cc_major``
    (``DrivenBackend.on_gpu``): the enum's model-driven member, or one the rule's layers
    pin without the enum (its ``layer_backends``: Dots3Note's
    ``DOTS3_NOTE_PADDED_MLA_SPARSE``, Step5's ``STEP5_DSA``), as a backend of the rule's
    architectures."""
    if name in data.backends:
        return data.backends[name].on_gpu(cc_major)
    helper = rule.layer_backends[name]
    return DrivenBackend(class_path=helper.class_name or name, platform="cuda",
                         models=rule.architectures, kernel_block_sizes=_sizes(helper.kernel_block_sizes),
                         cudagraph_support=helper.cudagraph_support, source=helper.source)


def select_driven(rule: DrivenModel, requested: str | None, cc_major: int, *,
                  config: Mapping[str, Any] | None = None, cc: int | None = None,
                  tp_size: int = 1, pcp_size: int = 1, probes: Mapping[str, bool] | None = None
                  ) -> DrivenSelection:
    """The layer code's choice for ``requested`` on a GPU of ``cc_major`` (``cc``: the
    capability as 90, 103; default ``cc_major`` x 10) at ``tp_size`` and ``pcp_size``
    (prefill context parallelism); ``probes`` overrides the rule's probed facts."""
    cc = cc_major * 10 if cc is None else cc
    env: dict[str, Any] = {**_config_env(rule, config or {}), **rule.probes, **(probes or {}),
                           "requested": requested or "none", "cc_major": cc_major, "cc": cc,
                           "cc_minor": cc % 10, "tp_size": tp_size, "pcp_size": pcp_size}
    for step in rule.selection:
        if _eval(step.when, env):
            if step.refuse is not None:
                return DrivenSelection(requested=requested, backend=None,
                                       error=step.refuse.format(**env),
                                       exc_type=step.exc_type, code=step.code)
            return DrivenSelection(requested=requested, backend=step.backend,
                                   ignored=requested is not None and requested != step.backend
                                   and "requested" not in _names(step.when))
    raise CatalogError(f"{rule.source}: no selection rule matched {requested!r}")


def _names(when: str | bool) -> set[str]:
    return set() if isinstance(when, bool) else expr_lang.names_in(expr_lang.parse(when))


def resolve_cache_dtype(rule: DrivenModel, backend: DrivenBackend, kv_cache_dtype: str,
                        cc_major: int = 0) -> tuple[str, int | None] | tuple[None, str]:
    """(cache dtype string, plain row element bytes or None when packed), or (None,
    vLLM's error). The rules read ``packed``, ``packed_cache_dtype`` (the record the
    layer resolves ``auto`` / ``fp8`` to), ``kv_cache_dtype``, ``kv_fp8`` and
    ``cc_major``."""
    env = {"packed": backend.packed_layout, "kv_cache_dtype": kv_cache_dtype,
           "kv_fp8": kv_cache_dtype.startswith("fp8"),
           "packed_cache_dtype": backend.packed_cache_dtype, "cc_major": cc_major}
    for step in rule.cache_dtype:
        if _eval(step.when, env):
            if step.refuse is not None:
                return None, f"{step.exc_type}: " + step.refuse.format(kv_cache_dtype=kv_cache_dtype)
            return str(_eval(step.cache_dtype, env)), step.element_bytes
    raise CatalogError(f"{rule.source}: no cache dtype rule matched {kv_cache_dtype!r}")


class DrivenEntry(_Strict):
    """One registered cache module and its spec."""

    name: str
    layer_index: int
    module: str
    backend: str
    spec: AnySpec | None


_DTYPE_BYTES = {"uint8": 1, "float32": 4, "bfloat16": 2, "float8_e4m3fn": 1}


def driven_caches(rule: DrivenModel, config: Mapping[str, Any], *, selected: str,
                  element_bytes: int | None, cache_dtype: str, cache_block: int,
                  layer_class: str = "", architecture: str = "", tp_size: int = 1,
                  cc_major: int = 0) -> list[DrivenEntry]:
    """Every cache module in registration order, with its spec at ``cache_block``
    (named under the architecture's ``layer_prefix``). Expressions also read ``cc_major``
    and ``cache_dtype``."""
    prefix = rule.layer_prefix.get(architecture, "model.layers")
    extra = {"packed": element_bytes is None, "kv_bytes": element_bytes or 1,
             "cache_block": cache_block, "tp_size": tp_size, "cc_major": cc_major,
             "cache_dtype": cache_dtype}
    out: list[DrivenEntry] = []
    for env in _layer_envs(rule, config, extra):
        index = int(env["layer_index"])
        for cache_module in rule.caches:
            if not _eval(cache_module.when, env):
                continue
            backend = selected if cache_module.backend == "selected" else cache_module.backend
            module = layer_class if cache_module.module == "selected" else cache_module.module
            name = f"{prefix}.{index}.{cache_module.name}".rstrip(".")
            spec = None if cache_module.spec == "none" else _spec(cache_module, env, cache_dtype)
            out.append(DrivenEntry(name=name, layer_index=index, module=module,
                                   backend=backend, spec=spec))
    return out


def layer_backends(rule: DrivenModel, config: Mapping[str, Any], selected: str,
                   tp_size: int = 1) -> list[str]:
    """Each decoder layer's backend: the one its ``main_cache`` module names (Step5's
    ``self_attn.attn``: STEP5_DSA or FLASH_ATTN; Dots3Note's: its padded sparse MLA or
    TRITON_MLA); without a ``main_cache``, ``selected`` where one of its cache modules names
    it, else the backend its last cache module names."""
    out = []
    extra = {"packed": False, "kv_bytes": 2, "cache_block": 16, "tp_size": tp_size}
    for env in _layer_envs(rule, config, extra):
        held = [c for c in rule.caches if _eval(c.when, env)]
        names = [selected if c.backend == "selected" else c.backend for c in held]
        main = [n for c, n in zip(held, names, strict=True) if c.name == rule.main_cache]
        if rule.main_cache:
            out.append(main[0] if main else selected)
        else:
            out.append(selected if selected in names or not names else names[-1])
    return out


def _spec(cache_module: DrivenCache, env: Mapping[str, Any], cache_dtype: str) -> AnySpec:
    block = int(_eval(cache_module.block_size, env))
    heads = int(_eval(cache_module.num_kv_heads, env))
    head = int(_eval(cache_module.head_size, env))
    head_v = int(_eval(cache_module.head_size_v, env))
    per_state = int(_eval(cache_module.tokens_per_state, env))
    dtype = cache_module.dtype
    if dtype not in _DTYPE_BYTES and dtype != "kv":
        dtype = str(_eval(dtype, env))
    dtype_bytes = int(env["kv_bytes"]) if dtype == "kv" else _DTYPE_BYTES[dtype]
    state = _eval(cache_module.state_bytes, env)
    content = int(state) if state is not None else (head + head_v) * dtype_bytes
    # AttentionSpec.get_num_kernel_states: one state per block when tokens_per_state is 0
    states = block // per_state if per_state > 0 else 1
    per_state = per_state if per_state > 0 else block
    page = heads * states * content
    alignment = _eval(cache_module.alignment, env)
    if alignment:
        page = -(-page // int(alignment)) * int(alignment)
    fields: dict[str, Any] = {
        "block_size": block, "num_kv_heads": heads, "head_size": head, "head_size_v": head_v,
        "kv_cache_dtype": cache_dtype if dtype == "kv" or cache_module.spec == "mla" else dtype,
        "dtype_bytes": dtype_bytes, "state_content_bytes": content, "tokens_per_state": per_state,
        "page_size_padded": page}
    if cache_module.spec in ("sliding_window_mla", "sliding_window"):
        return SlidingWindowSpec(sliding_window=int(_eval(cache_module.sliding_window, env)), **fields)
    if cache_module.spec == "full_attention":
        return FullAttentionSpec(**fields)
    if cache_module.spec == "circular_buffer":
        return CircularBufferSpec(**fields)
    return MLAAttentionSpec(**fields)


def _uniform_key(spec: AnySpec) -> tuple[Any, ...]:
    """``UniformTypeKVCacheSpecs.is_uniform_type``: one block size, one base spec type (a
    sliding window also of one width; ``is_uniform_with_collection``,
    vllm/v1/kv_cache_interface.py:315-326, :957-996 in 0.33.0)."""
    if isinstance(spec, SlidingWindowSpec):
        return ("sliding", spec.block_size, spec.sliding_window)
    if isinstance(spec, CircularBufferSpec | MambaSpec):
        return (spec.kind, spec.block_size)
    return ("full", spec.block_size)


def _approximate_gcd(values: Sequence[int], lower_bound: int) -> int:
    """``_approximate_gcd``: the chunk in [lower_bound, max] with the least upward
    padding, ties to the larger."""
    low = max(1, lower_bound)
    high = max(values)
    if low > high:
        return low
    best, best_pad = low, None
    for d in range(low, high + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


def packed_groups(specs: Mapping[str, AnySpec], algorithm: str = "packed"
                  ) -> tuple[list[list[str]], dict[str, int]]:
    """The KV-cache groups (layer names per group) and the pages the grouping pads
    (layer name -> page bytes), by the release's algorithm (``DrivenModel.grouping``)."""
    if algorithm in ("uniform_groups", "uniform_groups_padded"):
        return _uniform_groups(specs, pad=algorithm == "uniform_groups_padded")
    return _packed(specs), {}


def _packed(specs: Mapping[str, AnySpec]) -> list[list[str]]:
    """``_get_packed_kv_cache_groups`` (``selector.kv.packed``); one page size: one group
    per uniform type."""
    groups = packed_layer_groups(specs)
    if groups is not None:
        return groups
    buckets: dict[tuple[Any, ...], list[str]] = {}
    for name, spec in specs.items():
        buckets.setdefault(_uniform_key(spec), []).append(name)
    return list(buckets.values())


def _uniform_groups(specs: Mapping[str, AnySpec], *, pad: bool
                    ) -> tuple[list[list[str]], dict[str, int]]:
    """The DeepSeek-V4 grouping of 0.25.1-0.28.0 (``group_and_unify_kv_cache_specs`` and
    ``_get_kv_cache_groups_uniform_groups``, vllm/v1/core/kv_cache_utils.py:1499-1666 in
    0.25.1): every MLA cache in one group; the sliding-window caches by (block, window),
    each split into groups of the chosen number of layer tuples; ``pad`` (0.25.1-0.26.0):
    every sliding-window page padded to the nearest larger page of the MLA group."""
    mla = {n: s for n, s in specs.items() if not isinstance(s, SlidingWindowSpec)}
    windows: dict[tuple[int, int], dict[str, AnySpec]] = {}
    for name, spec in specs.items():
        if isinstance(spec, SlidingWindowSpec):
            windows.setdefault((spec.block_size, spec.sliding_window), {})[name] = spec

    def tuples(bucket: Mapping[str, AnySpec]) -> int:
        return Counter(s.page_size_bytes for s in bucket.values()).most_common(1)[0][1]

    counts = [tuples(mla), *(tuples(b) for b in windows.values())]
    chunk = _approximate_gcd(counts, counts[0])
    mla_pages = {s.page_size_bytes for s in mla.values()}
    groups: list[list[str]] = [list(mla)]
    padded: dict[str, int] = {}
    for bucket in windows.values():
        by_page: dict[int, list[str]] = {}
        for name, spec in bucket.items():
            candidate = (min(x for x in mla_pages if x >= spec.page_size_bytes) if pad
                         else spec.page_size_bytes)
            if candidate != spec.page_size_bytes:
                padded[name] = candidate
            by_page.setdefault(candidate, []).append(name)
        per_size = len(next(iter(by_page.values())))
        count = -(-per_size // chunk)
        pattern = list(zip(*by_page.values(), strict=False))
        for i in range(count):
            groups.append([name for repeat in pattern[i::count] for name in repeat])
    return groups, padded


def _page(spec: AnySpec) -> int:
    return spec.page_size_bytes


def _aligned_block(rule: DrivenModel, data: ModelDrivenData, selected: str,
                   config: Mapping[str, Any], block_size: int | None, *,
                   element_bytes: int | None, cache_dtype: str, architecture: str = "",
                   tp_size: int = 1, cc_major: int = 0) -> tuple[int, PlanError | None]:
    preferred = block_size or 16  # CacheConfig.DEFAULT_BLOCK_SIZE
    if block_size:
        return block_size, None
    backend = driven_backend(data, rule, selected, cc_major)
    if rule.aligned_block_size == "kernel_block":
        return kernel_block(backend, cc_major) or preferred, None
    at_default = driven_caches(rule, config, selected=selected, element_bytes=element_bytes,
                               cache_dtype=cache_dtype, cache_block=preferred,
                               layer_class=backend.layer_class, architecture=architecture,
                               tp_size=tp_size, cc_major=cc_major)
    try:
        return _common_block(at_default, rule, data, selected, preferred), None
    except EngineStartupError as exc:
        return preferred, PlanError(stage="block_size", exc_type=exc.exc_type, message=exc.message)


def aligned_block(rule: DrivenModel, data: ModelDrivenData, selected: str,
                  config: Mapping[str, Any], block_size: int | None, *,
                  element_bytes: int | None, cache_dtype: str, architecture: str = "",
                  tp_size: int = 1, cc_major: int = 0) -> int:
    """The block the caches take (``update_block_size_for_backend``) on a GPU of
    ``cc_major``: ``--block-size`` when given, else the chosen backend's kernel block
    (``kernel_block``) or the smallest block every registered cache's
    backend accepts (``common``; the default 16 where no block fits, which ``plan_driven``
    reports)."""
    return _aligned_block(rule, data, selected, config, block_size, element_bytes=element_bytes,
                          cache_dtype=cache_dtype, architecture=architecture, tp_size=tp_size,
                          cc_major=cc_major)[0]


def kernel_block(backend: DrivenBackend, cc_major: int) -> int | None:
    """The backend's kernel block size on a GPU of ``cc_major`` (None: none stated)."""
    if backend.kernel_block_size:
        return int(_eval(backend.kernel_block_size, {"cc_major": cc_major}))
    return backend.kernel_block_sizes[0] if backend.kernel_block_sizes else None


def plan_driven(model: ModelFacts, rule: DrivenModel, data: ModelDrivenData, backend_name: str,
                *, cache_dtype: str, element_bytes: int | None, options: KVOptions,
                cc_major: int = 0) -> ModelPlan:
    """The KV plan vLLM builds for the model-driven layers on a GPU of ``cc_major``: the
    caches at the aligned block (``update_block_size_for_backend``), the packed groups,
    the CUDA-graph mode."""
    backend = driven_backend(data, rule, backend_name, cc_major)
    config = model.config or {}
    block, block_error = _aligned_block(rule, data, backend_name, config, options.block_size,
                                        element_bytes=element_bytes, cache_dtype=cache_dtype,
                                        architecture=model.architecture, tp_size=model.tp_size,
                                        cc_major=cc_major)
    entries = driven_caches(rule, config, selected=backend_name, element_bytes=element_bytes,
                            cache_dtype=cache_dtype, cache_block=block,
                            layer_class=backend.layer_class, architecture=model.architecture,
                            tp_size=model.tp_size, cc_major=cc_major)
    specs: dict[str, AnySpec] = {e.name: e.spec for e in entries if e.spec is not None}
    names, padded = packed_groups(specs, rule.grouping)
    for name, page in padded.items():
        specs[name] = specs[name].model_copy(update={"page_size_padded": page})
    by_name = {e.name: e for e in entries}
    groups: list[GroupPlan] = []
    supports: list[tuple[CGSupport, str]] = []
    cache_entries: list[CacheEntry] = []
    for entry in entries:
        if entry.spec is None:
            continue
        facts = _backend_facts(entry.backend, rule, data, backend_name)
        cache_entries.append(CacheEntry(name=entry.name, layer_index=entry.layer_index,
                                        role="indexer" if "indexer" in entry.name else "attention",
                                        backend=facts, spec=specs[entry.name],
                                        num_q_heads=model.layers[entry.layer_index].num_q_heads))
    for index, layer_names in enumerate(names):
        layer_specs = tuple(specs[n] for n in layer_names)
        by_backend: dict[str, list[str]] = {}
        for name in layer_names:
            by_backend.setdefault(by_name[name].backend, []).append(name)
        attention = []
        for name, members in by_backend.items():
            facts = _backend_facts(name, rule, data, backend_name)
            supports.append((facts.cudagraph_support, name))
            member_indices = [by_name[n].layer_index for n in members]
            attention.append(AttentionGroupPlan(
                backend=facts, layer_names=tuple(members), layers=format_ranges(member_indices),
                num_q_heads=model.layers[member_indices[0]].num_q_heads,
                spec=specs[members[0]], kernel_block_size=None,
                virtual_blocks_per_manager_block=None,
                cudagraph_support=facts.cudagraph_support,
                reorder_batch_threshold=facts.reorder_batch_threshold))
        support = min((a.cudagraph_support for a in attention), key=lambda lv: CG_LEVEL[lv])
        indices = tuple(by_name[n].layer_index for n in layer_names)
        block_size = layer_specs[0].block_size
        group_bytes = sum(_page(s) for s in layer_specs)
        groups.append(GroupPlan(
            index=index, kind="uniform_type", layer_names=tuple(layer_names),
            layer_indices=indices, layers=format_ranges(list(indices)), spec=None,
            layer_specs=layer_specs, uniform_type=True,
            manager_block_size=block_size, kernel_block_size=None,
            virtual_blocks_per_manager_block=None,
            page_size_bytes=tuple(sorted({_page(s) for s in layer_specs})),
            bytes_per_token=sum(s.bytes_per_token for s in layer_specs
                                if not isinstance(s, MambaSpec)),
            bytes_per_block=group_bytes, blocks_per_request=0,
            attention_groups=tuple(attention), cudagraph_support=support))
    level: CGSupport = "ALWAYS"
    lowest: str | None = None
    for support_level, name in supports:  # the first backend reaching the minimum
        if CG_LEVEL[support_level] < CG_LEVEL[level]:
            level, lowest = support_level, name
    cg: CudaGraphResolution = resolve_cudagraph_mode(
        options.cudagraph_mode, level, lowest,
        uniform_decode_query_len=options.uniform_decode_query_len,
        vllm_compile=options.vllm_compile,
        attention_in_splitting_ops=options.attention_in_splitting_ops,
        inductor_graph_partition=options.inductor_graph_partition,
        piecewise_capture_available=options.piecewise_capture_available)
    errors = (PlanError(stage="cudagraph", exc_type="ValueError", message=cg.error),) if cg.error else ()
    errors = (block_error, *errors) if block_error is not None else errors
    decision = BlockSizeDecision(block_size=block, user_specified=options.block_size is not None,
                                 preferred=block)
    layout = LayoutResolution.model_validate({
        "layout": rule.kv_cache_layout, "candidates": (rule.kv_cache_layout,),
        "supported_sets": (), "source": "default",
        "info": f"KV-cache layout {rule.kv_cache_layout} (vLLM's resolve_kv_cache_layout for "
                "these caches)"})
    return ModelPlan(
        model=model.name, tp_size=model.tp_size, kv_cache_dtype=cache_dtype, ok=not errors,
        errors=errors, warnings=tuple(cg.warnings), block_size=decision, layout=layout,
        grouping_path=rule.grouping, groups=tuple(groups),
        reorder_batch_threshold=backend.reorder_batch_threshold, cudagraph=cg, capacity=None,
        entries=tuple(cache_entries))


def own_backend_facts(model: ModelFacts, engine: str, catalog: Catalog
                      ) -> dict[str, BackendKVFacts]:
    """The facts of the backends the model's layers build themselves (a layer's
    ``own_backend``, its indexer's ``backend``, its conv cache's ``backend``), by name, as the release's
    ``model-driven.yaml`` states them; a name the release does not state is left out (the
    planner then refuses the model)."""
    names = {layer.own_backend for layer in model.layers if layer.own_backend}
    indexers = {layer.indexer.backend for layer in model.layers
                if layer.indexer is not None and layer.indexer.backend}
    indexers |= {layer.conv_cache.backend for layer in model.layers if layer.conv_cache}
    indexers |= {layer.indexer.tail.backend for layer in model.layers
                 if layer.indexer is not None and layer.indexer.tail is not None}
    pools = {layer.indexer.backend: layer.indexer.tokens_per_state for layer in model.layers
             if layer.indexer is not None and layer.indexer.backend}
    data = load_model_driven(engine, catalog)
    if data is None or not names | indexers:
        return {}
    out: dict[str, BackendKVFacts] = {}
    for name in sorted(names & set(data.backends)):
        b = data.backends[name]
        out[name] = BackendKVFacts(name=name, class_name=b.class_path.rsplit(".", 1)[-1],
                                   kernel_block_sizes=b.kernel_block_sizes,
                                   cudagraph_support=b.cudagraph_support or "NEVER",
                                   reorder_batch_threshold=b.reorder_batch_threshold)
    for name in sorted(indexers & set(data.layer_backends)):
        helper = data.layer_backends[name]
        sizes = _sizes(helper.kernel_block_sizes) or tuple(
            pools.get(name, 1) * states for states in helper.kernel_block_states)
        out[name] = BackendKVFacts(name=name, class_name=helper.class_name or name,
                                   cudagraph_support=helper.cudagraph_support,
                                   supported_layouts=helper.supported_layouts,
                                   # none stated: AttentionBackend's default, [MultipleOf(1)]
                                   **({"kernel_block_sizes": sizes} if sizes else {}))
    return out


def _common_block(entries: Sequence[DrivenEntry], rule: DrivenModel, data: ModelDrivenData,
                  selected: str, default: int) -> int:
    """``_preferred_block_size_for_backends`` over the distinct backends the registered
    cache modules name, in layer order (vllm/platforms/interface.py:700-745 in 0.33.0)."""
    backends = [BackendKVFacts(name=name, class_name=name, kernel_block_sizes=_rules(sizes))
                for name, sizes in ((e.backend, _kernel_sizes(e.backend, rule, data, selected))
                                    for e in entries)]
    return preferred_block_size(distinct_backends(backends), default)


def _kernel_sizes(name: str, rule: DrivenModel, data: ModelDrivenData, selected: str
                  ) -> tuple[int | str, ...]:
    if name in data.backends:
        return data.backends[name].kernel_block_sizes
    helper = rule.layer_backends.get(name) or data.layer_backends.get(name)
    if helper is None:
        raise CatalogError(f"{rule.source}: {name} (a cache's backend, with {selected}) "
                           "is not in model-driven.yaml")
    return helper.kernel_block_sizes


def _rules(sizes: Sequence[int | str]) -> tuple[BlockSizeRule, ...]:
    """Kernel block sizes as block-size rules (``multiple_of N``: ``MultipleOf(N)``; none
    stated: AttentionBackend's default, ``[MultipleOf(1)]``)."""
    rules = tuple(s if isinstance(s, int) else MultipleOf(multiple_of=int(s.split()[-1]))
                  for s in sizes)
    return rules or (MultipleOf(multiple_of=1),)


def _sizes(sizes: Sequence[int | str]) -> tuple[int, ...]:
    """Exact kernel block sizes (a ``multiple_of N`` entry of a helper is not one)."""
    return tuple(s for s in sizes if isinstance(s, int))


def _backend_facts(name: str, rule: DrivenModel, data: ModelDrivenData, selected: str
                   ) -> BackendKVFacts:
    if name in data.backends:
        b = data.backends[name]
        return BackendKVFacts(name=name, class_name=b.class_path.rsplit(".", 1)[-1],
                              kernel_block_sizes=b.kernel_block_sizes,
                              cudagraph_support=b.cudagraph_support or "NEVER",
                              reorder_batch_threshold=b.reorder_batch_threshold, is_mla=True)
    helper = rule.layer_backends[name]
    return BackendKVFacts(name=name, class_name=helper.class_name or name,
                          cudagraph_support=helper.support_with(selected))


