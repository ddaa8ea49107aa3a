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
compressed caches' block to the backend's kernel block.

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
from selector.kv.backend_facts import CG_LEVEL, BackendKVFacts, CGSupport
from selector.kv.cudagraph import CudaGraphResolution, resolve_cudagraph_mode
from selector.kv.layer_specs import CacheEntry
from selector.kv.layout import LayoutResolution
from selector.kv.options import KVOptions
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
    "ModelDrivenData",
    "compress_ratios",
    "driven_caches",
    "driven_rule",
    "kernel_block",
    "layer_refusal",
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

    def on_gpu(self, cc_major: int) -> DrivenBackend:
        """The backend as the layers are built on a GPU of ``cc_major``."""
        override = self.on_cc_major.get(cc_major)
        if override is None:
            return self
        changes = {k: v for k, v in (("layer_class", override.layer_class),
                                     ("packed_layout", override.packed_layout)) if v is not None}
        return self.model_copy(update=changes)
    source: str = ""


class SelectionRule(_Strict):
    """One step of the model's own backend choice; the first whose ``when`` holds decides.
    ``when`` reads ``requested`` (the ``--attention-backend`` name, ``none`` when not
    given) and ``cc_major``."""

    when: str | bool = True
    backend: str | None = None
    """The backend the layers then name; null with ``refuse``. ``when`` also reads
    ``tp_size``, the text config's numbers and the rule's ``probes``."""
    refuse: str | None = None
    """vLLM's error, word for word (``{requested}`` is the name given)."""
    exc_type: str = "ValueError"
    note: str = ""


class CacheDtypeRule(_Strict):
    """The KV-cache dtype the layer resolves (``_resolve_dsv4_kv_cache_dtype``); reads
    ``packed`` (the backend's layout), ``kv_cache_dtype`` (``--kv-cache-dtype``) and
    ``kv_fp8`` (vLLM's ``kv_cache_dtype.startswith("fp8")``)."""

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
    read the config's fields, ``compress_ratio`` (this layer's), ``packed``,
    ``kv_bytes`` (the plain row's element bytes) and ``cache_block``
    (``cache_config.block_size``)."""

    name: str
    """The module's name under ``<layer_prefix>.<i>.`` (vLLM's static forward context;
    ``model.layers`` unless the rule's ``layer_prefix`` names the architecture's own)."""
    module: str
    backend: str
    """What the module's ``get_attn_backend().get_name()`` says (``selected``: the
    model-driven backend chosen)."""
    when: str | bool = True
    spec: Literal["mla", "sliding_window_mla", "circular_buffer", "none"]
    block_size: str | int = "cache_block"
    head_size: str | int = 0
    tokens_per_state: str | int = 1
    sliding_window: str | int | None = None
    dtype: str = "uint8"
    """The spec's element dtype: ``uint8``, ``float32`` or ``kv`` (the resolved row dtype)."""
    state_bytes: str | int | None = None
    """Bytes per state when packed (``state_content_bytes``); null: head_size x dtype."""
    alignment: str | int | None = None
    """``_apply_alignment_padding``: the page rounded up to this many bytes."""
    source: str = ""


class LayerRefusal(_Strict):
    """A config the layer code refuses while a decoder layer is built: ``when`` reads the
    layer's facts (as a cache's expressions do); the first layer for which it holds is
    named in vLLM's message (``{layer_index}``, ``{compress_ratio}``)."""

    when: str
    refuse: str
    exc_type: str = "ValueError"
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
    source: str = ""

    def support_with(self, selected: str) -> CGSupport:
        return self.by_selected.get(selected, self.cudagraph_support)


class DrivenModel(_Strict):
    """The rule of one model family whose layers choose their backend."""

    architectures: tuple[str, ...]
    source: str
    compress_ratios_field: str
    """The config's per-layer list of compression ratios."""
    selection: tuple[SelectionRule, ...]
    cache_dtype: tuple[CacheDtypeRule, ...]
    caches: tuple[DrivenCache, ...]
    layer_backends: dict[str, HelperBackend] = Field(default_factory=dict)
    aligned_block_size: str = "kernel_block"
    """``update_block_size_for_backend``: the block the compressed caches take
    (``kernel_block``: the chosen backend's one kernel block size)."""
    kv_cache_layout: str = "BLHNC"
    layer_prefix: dict[str, str] = Field(default_factory=dict)
    """The decoder layers' module prefix by architecture (a wrapper builds the text model
    under its own prefix, e.g. ``language_model.model.layers``); ``model.layers`` else."""
    kind_prefix: str = "model-driven"
    """How the report names these layers' kind (with each layer's compression ratio)."""
    config_defaults: dict[str, Any] = Field(default_factory=dict)
    """What the layer code takes for a config field the config omits (its ``getattr``
    default, e.g. DeepSeek-V4.1's ``kv_source_layer_ids``: ``()``)."""
    layer_refusals: tuple[LayerRefusal, ...] = ()
    """Configs the layer code refuses while built, checked layer by layer after the
    backend choice (``selection``) and before the KV-cache dtype (``cache_dtype``)."""
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
    return frozenset(data.backends) if data is not None else frozenset()


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
    return [int(r) for r in text.get(rule.compress_ratios_field, [0] * model.num_layers)]


def _eval(text: str | int | bool | None, env: Mapping[str, Any]) -> Any:
    if text is None or isinstance(text, bool | int):
        return text
    return expr_lang.evaluate(expr_lang.parse(text), env)


class DrivenSelection(_Strict):
    """What the model's layer code does with the request: the backend, or its error."""

    requested: str | None
    backend: str | None
    error: str | None = None
    exc_type: str | None = None
    ignored: bool = False
    """A name was given and the layer code took its default anyway."""


def select_driven(rule: DrivenModel, requested: str | None, cc_major: int, *,
                  config: Mapping[str, Any] | None = None, tp_size: int = 1,
                  pcp_size: int = 1, probes: Mapping[str, bool] | None = None
                  ) -> DrivenSelection:
    """The layer code's choice for ``requested`` on a GPU of ``cc_major`` at ``tp_size``
    and ``pcp_size`` (prefill context parallelism); ``probes`` overrides the rule's probed
    facts."""
    env: dict[str, Any] = {**_numbers(_text_config(config or {})), **rule.probes,
                           **(probes or {}), "requested": requested or "none",
                           "cc_major": cc_major, "tp_size": tp_size, "pcp_size": pcp_size}
    for step in rule.selection:
        if _eval(step.when, env):
            if step.refuse is not None:
                return DrivenSelection(requested=requested, backend=None,
                                       error=step.refuse.format(requested=requested),
                                       exc_type=step.exc_type)
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


def _numbers(text: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
             ) -> dict[str, Any]:
    """The config's scalar fields and its lists of integers (as tuples, for ``in``), over
    the rule's ``config_defaults`` for the fields it omits (or gives empty: vLLM's
    ``getattr(config, name, None) or ()``)."""
    text = {**(defaults or {}), **{k: v for k, v in text.items() if v not in (None, [])}}
    out: dict[str, Any] = {k: v for k, v in text.items() if isinstance(v, int | float | str)}
    out.update({k: tuple(v) for k, v in text.items()
                if isinstance(v, list) and all(isinstance(i, int) for i in v)})
    return out


def layer_refusal(rule: DrivenModel, config: Mapping[str, Any]) -> str | None:
    """vLLM's error (``Type: message``) for the first decoder layer the rule's
    ``layer_refusals`` refuse, or None."""
    text = _text_config(config)
    ratios = list(text.get(rule.compress_ratios_field) or [])
    numbers = _numbers(text, rule.config_defaults)
    for index in range(int(text.get("num_hidden_layers") or 0)):
        ratio = int(ratios[index]) if index < len(ratios) else 0
        env = {**numbers, "layer_index": index, "compress_ratio": ratio}
        for refusal in rule.layer_refusals:
            if _eval(refusal.when, env):
                return f"{refusal.exc_type}: " + refusal.refuse.format(
                    layer_index=index, compress_ratio=ratio)
    return None


def driven_caches(rule: DrivenModel, config: Mapping[str, Any], *, selected: str,
                  element_bytes: int | None, cache_dtype: str, cache_block: int,
                  layer_class: str = "", architecture: str = "", cc_major: int = 0
                  ) -> list[DrivenEntry]:
    """Every cache module in registration order, with its spec at ``cache_block``
    (named under the architecture's ``layer_prefix``). Expressions also read
    ``layer_index`` and ``cc_major``."""
    text = _text_config(config)
    prefix = rule.layer_prefix.get(architecture, "model.layers")
    ratios = list(text.get(rule.compress_ratios_field) or [])  # absent: every layer ratio 0
    num_layers = int(text["num_hidden_layers"])
    packed = element_bytes is None
    numbers = _numbers(text, rule.config_defaults)
    out: list[DrivenEntry] = []
    for index in range(num_layers):
        env: dict[str, Any] = {**numbers, "layer_index": index, "cc_major": cc_major,
                               "compress_ratio": int(ratios[index]) if index < len(ratios) else 0,
                               "packed": packed, "kv_bytes": element_bytes or 1,
                               "cache_block": cache_block, "cache_dtype": cache_dtype}
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


def _spec(cache_module: DrivenCache, env: Mapping[str, Any], cache_dtype: str) -> AnySpec:
    block = int(_eval(cache_module.block_size, env))
    head = int(_eval(cache_module.head_size, env))
    per_state = int(_eval(cache_module.tokens_per_state, env))
    dtype = cache_module.dtype
    if dtype not in _DTYPE_BYTES:
        dtype = str(_eval(dtype, env))
    dtype_bytes = int(env["kv_bytes"]) if dtype == "kv" else _DTYPE_BYTES[dtype]
    state = _eval(cache_module.state_bytes, env)
    content = int(state) if state is not None else head * dtype_bytes
    # AttentionSpec.get_num_kernel_states: one state per block when tokens_per_state is 0
    states = block // per_state if per_state > 0 else 1
    per_state = per_state if per_state > 0 else block
    page = states * content
    alignment = _eval(cache_module.alignment, env)
    if alignment:
        page = -(-page // int(alignment)) * int(alignment)
    fields: dict[str, Any] = {
        "block_size": block, "num_kv_heads": 1, "head_size": head, "head_size_v": 0,
        "kv_cache_dtype": cache_dtype if dtype == "kv" or cache_module.spec == "mla" else dtype,
        "dtype_bytes": dtype_bytes, "state_content_bytes": content, "tokens_per_state": per_state,
        "page_size_padded": page}
    if cache_module.spec == "sliding_window_mla":
        return SlidingWindowSpec(sliding_window=int(_eval(cache_module.sliding_window, env)), **fields)
    if cache_module.spec == "circular_buffer":
        return CircularBufferSpec(**fields)
    return MLAAttentionSpec(**fields)


def _uniform_key(spec: AnySpec) -> tuple[Any, ...]:
    """``UniformTypeKVCacheSpecs.is_uniform_type``: one block size, one base spec type (a
    sliding window also of one width; a circular buffer only with its own kind)."""
    if isinstance(spec, CircularBufferSpec):
        return ("circular_buffer", spec.block_size)
    if isinstance(spec, SlidingWindowSpec):
        return ("sliding", spec.block_size, spec.sliding_window)
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
    """``_get_packed_kv_cache_groups`` (vllm/v1/core/kv_cache_planning.py:914-1041 in
    0.33.0) for attention and circular-buffer specs (no Mamba state): greedy buckets of
    one type; balanced buckets (one layer of each page size per repeat) split into groups
    of the same number of repeats; the rest stay whole; a state bucket (a circular
    buffer, or a sliding window when nothing repeats) splits into as many groups as the
    widest group's block cannot hold of it (``anchor_bytes``, :989-1016)."""
    buckets: dict[tuple[Any, ...], dict[str, AnySpec]] = {}
    for name, spec in specs.items():
        buckets.setdefault(_uniform_key(spec), {})[name] = spec
    rows = []
    for bucket in buckets.values():
        by_page: dict[int, list[str]] = {}
        for name, spec in bucket.items():
            by_page.setdefault(spec.page_size_bytes, []).append(name)
        balanced = len({len(names) for names in by_page.values()}) == 1
        most = Counter(s.page_size_bytes for s in bucket.values()).most_common(1)[0][1]
        rows.append((bucket, by_page, balanced, most))
    floor = max((most for _, by_page, balanced, most in rows if balanced and len(by_page) > 1),
                default=0)
    repeats = (_approximate_gcd([most for _, _, balanced, most in rows if balanced], floor)
               if floor else None)

    def groups_for(balanced: bool, most: int) -> int:
        return -(-most // repeats) if balanced and repeats is not None else 1

    def is_state(bucket: Mapping[str, AnySpec]) -> bool:
        first = next(iter(bucket.values()))
        return isinstance(first, CircularBufferSpec) or (
            repeats is None and isinstance(first, SlidingWindowSpec))

    def widest(by_page: Mapping[int, list[str]], count: int) -> int:
        return sum(-(-len(names) // count) * page for page, names in by_page.items())

    anchor = max((widest(by_page, len(bucket) if is_state(bucket) else groups_for(balanced, most))
                  for bucket, by_page, balanced, most in rows), default=0)
    out: list[list[str]] = []
    for bucket, by_page, balanced, most in rows:
        count = groups_for(balanced, most)
        if anchor and is_state(bucket):
            per_block = max(anchor // next(iter(bucket.values())).page_size_bytes, 1)
            count = max(count, -(-len(bucket) // per_block))
        if count == 1:
            out.append(list(bucket))
            continue
        pattern = list(zip(*by_page.values(), strict=False))
        for i in range(count):
            out.append([name for repeat in pattern[i::count] for name in repeat])
    return out


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


def plan_driven(model: ModelFacts, rule: DrivenModel, data: ModelDrivenData, backend_name: str,
                *, cache_dtype: str, element_bytes: int | None, options: KVOptions,
                cc_major: int = 0) -> ModelPlan:
    """The KV plan vLLM builds for the model-driven layers on a GPU of ``cc_major``: the
    caches at the aligned block (``update_block_size_for_backend``), the packed groups,
    the CUDA-graph mode."""
    backend = data.backends[backend_name].on_gpu(cc_major)
    config = model.config or {}
    preferred = options.block_size or 16  # CacheConfig.DEFAULT_BLOCK_SIZE
    kernel = kernel_block(backend, cc_major) or preferred
    block = options.block_size if options.block_size else (
        kernel if rule.aligned_block_size == "kernel_block" else preferred)
    entries = driven_caches(rule, config, selected=backend_name, element_bytes=element_bytes,
                            cache_dtype=cache_dtype, cache_block=block,
                            layer_class=backend.layer_class, architecture=model.architecture,
                            cc_major=cc_major)
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


def kernel_block(backend: DrivenBackend, cc_major: int) -> int | None:
    """The backend's kernel block size on a GPU of ``cc_major`` (None: none stated)."""
    if backend.kernel_block_size:
        return int(_eval(backend.kernel_block_size, {"cc_major": cc_major}))
    return backend.kernel_block_sizes[0] if backend.kernel_block_sizes else None


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
        sizes = _sizes(helper.kernel_block_sizes)
        out[name] = BackendKVFacts(name=name, class_name=helper.class_name or name,
                                   cudagraph_support=helper.cudagraph_support,
                                   # none stated: AttentionBackend's default, [MultipleOf(1)]
                                   **({"kernel_block_sizes": sizes} if sizes else {}))
    return out


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


