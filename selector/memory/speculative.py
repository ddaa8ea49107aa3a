"""The speculative draft at start-up (``--speculative-config``): the model runner vLLM
uses, the draft's layers (EAGLE / EAGLE-3 drafts from their own config.json, MTP layers
from the target's config as vLLM reads it, a whole draft model), the attention backend
its layers get, its weights, and vLLM's refusals in its words.

Data: ``speculative.yaml`` of the engine profile (inherited whole); checked against
vLLM's own answers (``tools/draft_oracle.py``, ``tests/golden/test_draft_oracle.py``).
The draft's layers join the model's layers (``LayerFacts.draft``), so the KV plan groups
and unifies them with the target's as vLLM's KV-cache manager does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from selector.catalog import Catalog
from selector.memory.issues import StartupIssue, startup_issue
from selector.memory.profile import StartupProfile
from selector.memory.weights import WeightPart, config_int, estimate_weights, text_config
from selector.models import LayerFacts, ModelFacts

__all__ = [
    "DraftReport",
    "DraftRequest",
    "SpeculativeData",
    "draft_backend",
    "draft_layers",
    "draft_report",
    "draft_tp_refusal",
    "draft_weight_part",
    "key_refusal",
    "speculative_data",
    "unknown_backend_message",
]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DraftBackendRule(_Strict):
    source: str
    v2: Literal["inherit", "auto"]
    v1: Literal["inherit", "auto"]
    v2_reads_given: bool = True
    """Model Runner V2 reads ``attention_backend`` (False: the draft is built under the
    target's attention config whatever is given)."""
    v2_ignores_given: tuple[str, ...] = ()
    unknown: str
    enum_members: tuple[str, ...]


class MTPRule(_Strict):
    draft: str
    layers_key: str
    default_layers: int | None = None
    extras: str
    source: str


class EagleRule(_Strict):
    reads_as: str
    extras: str
    source: str


class Term(_Strict):
    factor: int
    of: tuple[str, ...]
    sharded: bool = False
    """Split over the tensor-parallel ranks (a parallel linear layer, the vocab-parallel
    head); else every rank holds it whole (``nn.Linear``, ``ReplicatedLinear``, a norm)."""

    def params(self, cfg: Mapping[str, Any]) -> int:
        value = self.factor
        for key in self.of:
            value *= config_int(cfg, key)
        return value


class Extras(_Strict):
    source: str
    per_layer: tuple[Term, ...] = ()
    once: tuple[Term, ...] = ()
    qkv_input_multiple: int = 1
    lm_head_vocab: str | None = None


class KeyRefusal(_Strict):
    """A ``--speculative-config`` key ``SpeculativeConfig`` refuses (a field the release
    lacks, or one its validator allows only for some methods)."""

    message: str
    source: str
    except_methods: tuple[str, ...] = ()


class DraftTP(_Strict):
    """``SpeculativeConfig._verify_and_get_draft_tp``: the draft's tensor-parallel size is
    the target's unless given, and only 1 or the target's is accepted."""

    source: str
    refusal: str


class DraftSettings(_Strict):
    """What the draft is built with besides its backend (the keys of
    ``apply_draft_overrides`` / the draft-model speculator): its KV-cache dtype, its
    quantization, and where each is read."""

    source: str
    kv_cache_dtype_key: str | None = None
    """The key that gives the draft its own KV-cache dtype (None: the release has none;
    the draft's cache is the target's)."""


class Codes(_Strict):
    unknown_backend: str
    key_refused: str
    draft_note: str
    not_modelled: str


class SpeculativeData(_Strict):
    """``speculative.yaml`` of an engine profile."""

    engine: str
    draft_backend: DraftBackendRule
    draft_tp: DraftTP
    draft_settings: DraftSettings
    key_refusals: dict[str, KeyRefusal | None] | None = None
    """Null in a patch: none (a patch's mapping merges into its parent's)."""
    draft_free_methods: tuple[str, ...]
    mtp: dict[str, MTPRule]
    eagle: dict[str, EagleRule]
    extras: dict[str, Extras]
    codes: Codes


class DraftRequest(_Strict):
    """What ``--speculative-config`` (or the deployment's ``speculative:``) asks for."""

    method: str | None = None
    model: str | None = None
    attention_backend: str | None = None
    """As given (``auto`` and None: not given)."""
    num_speculative_tokens: int = 0
    keys: dict[str, Any] = Field(default_factory=dict)
    """Every key given (the runner's unsupported features are keys)."""


class DraftReport(_Strict):
    """The draft at start-up: its method, the runner, its layers (indices in the model's
    layers), the backend rule its layers follow, its weights; notes and refusals."""

    method: str
    runner: Literal["v1", "v2"]
    num_speculative_tokens: int
    draft: str | None = None
    """The draft model's name (a path or id; None: MTP layers of the target, n-gram)."""
    architecture: str | None = None
    layers: tuple[int, ...] = ()
    backend: str | None = None
    """The backend asked for the draft's layers (None: vLLM selects it)."""
    backend_rule: str = ""
    weight_params: int = 0
    """The draft's parameters on one GPU (the shared input embedding not counted)."""
    notes: tuple[tuple[str, str], ...] = ()
    issues: tuple[StartupIssue, ...] = ()


SPECULATIVE_FILE = "speculative.yaml"


def speculative_data(catalog: Catalog, engine: str | None) -> SpeculativeData | None:
    """The engine's speculative data (None: the release's profile chain has none)."""
    return catalog.patched_data(engine, SPECULATIVE_FILE, SpeculativeData)


def draft_tp_refusal(data: SpeculativeData, request: DraftRequest, target_tp: int) -> str | None:
    """vLLM's refusal of a ``draft_tensor_parallel_size`` other than 1 or the target's."""
    given = request.keys.get("draft_tensor_parallel_size")
    if not isinstance(given, int) or given in (1, target_tp):
        return None
    return data.draft_tp.refusal.format(value=given)


def key_refusal(data: SpeculativeData, request: DraftRequest) -> str | None:
    """``SpeculativeConfig``'s refusal of a key given (None: every key is accepted)."""
    for key, rule in (data.key_refusals or {}).items():
        value = request.keys.get(key)
        if rule is not None and value not in (None, False) \
                and (request.method or "") not in rule.except_methods:
            return rule.message.replace("{value}", str(value))
    return None


def _given_backend(request: DraftRequest) -> str | None:
    name = (request.attention_backend or "").strip()
    return None if not name or name.lower() == "auto" else name.upper()


def unknown_backend_message(data: SpeculativeData, value: str) -> str | None:
    """vLLM's refusal of an ``attention_backend`` name ``AttentionBackendEnum`` lacks."""
    rule = data.draft_backend
    name = value.strip().upper()
    if not value.strip() or value.strip().lower() == "auto" or name in rule.enum_members:
        return None
    return rule.unknown.format(name=name, value=value, valid=", ".join(rule.enum_members))


def draft_backend(data: SpeculativeData, request: DraftRequest, runner: Literal["v1", "v2"],
                  target_backend: str | None) -> tuple[str | None, str]:
    """(the backend the draft's layers are built with, None: selected by vLLM; why)."""
    given = _given_backend(request)
    if runner == "v2" and not data.draft_backend.v2_reads_given:
        ignored = f"; attention_backend {given} is not read" if given else ""
        return target_backend, ("Model Runner V2 builds the draft under the target's "
                                f"attention config{ignored}")
    if runner == "v2" and (request.method or "") in data.draft_backend.v2_ignores_given:
        ignored = f"; attention_backend {given} is not read" if given else ""
        return target_backend, ("Model Runner V2 builds a draft model under the target's "
                                f"attention config{ignored}")
    if given is not None:
        return given, "--speculative-config.attention_backend"
    rule = data.draft_backend.v2 if runner == "v2" else data.draft_backend.v1
    if rule == "inherit":
        return target_backend, ("the target's --attention-backend: Model Runner V2 keeps it "
                                "for the draft" if target_backend
                                else "selected by vLLM, as for the target")
    return None, ("selected afresh: the V1 runner never gives the draft the target's backend"
                  if target_backend else "selected by vLLM, as for the target")


def _mtp_rule(data: SpeculativeData, model: ModelFacts) -> MTPRule | None:
    raw = model.config or {}
    return data.mtp.get(str(raw.get("model_type") or model.model_type))


def is_mtp(request: DraftRequest) -> bool:
    method = request.method or ""
    return method == "mtp" or method.endswith("_mtp")


def draft_layers(data: SpeculativeData, request: DraftRequest, model: ModelFacts,
                 draft: ModelFacts | None) -> tuple[tuple[LayerFacts, ...], str | None]:
    """The draft's layers as vLLM builds them, numbered after the target's (each with
    ``draft`` set), and the draft's architecture; ((), None) for a method without a draft
    model. MTP: ``layers_key`` of the target's config, each a copy of the target's last
    attention layer; EAGLE / a draft model: the layers of ``draft`` (its config read as
    ``reads_as``)."""
    method = request.method or ""
    if method in data.draft_free_methods:
        return (), None
    start = len(model.layers)
    own = _own_kv_cache_dtype(data, request)
    if is_mtp(request):
        rule = _mtp_rule(data, model)
        if rule is None:
            return (), None
        cfg = text_config(model.config or {})
        count = config_int(cfg, rule.layers_key, default=rule.default_layers or 0)
        template = next((layer for layer in reversed(model.layers) if layer.is_attention), None)
        if template is None or count <= 0:
            return (), rule.draft
        return tuple(template.model_copy(update={"index": start + i, "draft": True,
                                                 "kv_cache_dtype": own})
                     for i in range(count)), rule.draft
    if draft is None:
        return (), None
    return tuple(layer.model_copy(update={"index": start + i, "draft": True,
                                          "kv_sharing_target": None, "kv_cache_dtype": own})
                 for i, layer in enumerate(draft.layers)), draft.architecture


def _own_kv_cache_dtype(data: SpeculativeData, request: DraftRequest) -> str | None:
    """The draft's own KV-cache dtype: the release's key when given (vLLM replaces the
    draft's ``cache_config.cache_dtype`` with it, ``auto`` included: the draft's cache is
    then the model dtype whatever the target's; ``draft_settings``), else None (the
    target's)."""
    key = data.draft_settings.kv_cache_dtype_key
    value = request.keys.get(key) if key else None
    return str(value) if value is not None else None


def _extras(data: SpeculativeData, request: DraftRequest, model: ModelFacts,
            draft_raw: Mapping[str, Any] | None) -> Extras | None:
    if is_mtp(request):
        rule = _mtp_rule(data, model)
        return data.extras.get(rule.extras) if rule else None
    archs = (draft_raw or {}).get("architectures") or []
    rule_e = next((data.eagle[a] for a in archs if a in data.eagle), None)
    return data.extras.get(rule_e.extras) if rule_e else None


def draft_weight_part(data: SpeculativeData, request: DraftRequest, model: ModelFacts,
                      draft: ModelFacts | None, profile: StartupProfile, *, dtype_bytes: int,
                      cc: int, moe_backend: str | None, quantization: str | None) -> WeightPart | None:
    """The draft's weights on one GPU (``model``: the sharded model with the draft's
    layers), as its class builds them, the target's input embedding shared: the draft's
    decoder layers (counted as the target's at that index for MTP, as the draft's own
    config for EAGLE / a draft model) plus its class's extra matrices."""
    layers = tuple(layer for layer in model.layers if layer.draft)
    if not layers:
        return None
    tp = model.tp_size
    raw = model.config or {}
    bits = 8.0 * dtype_bytes
    decoder = model.model_copy(update={"layers": tuple(la for la in model.layers if not la.draft)})

    def total(facts: ModelFacts, config: Mapping[str, Any]) -> dict[str, int]:
        estimate = estimate_weights(config, layer_kinds=tuple(la.kind for la in facts.layers),
                                    tp=tp, dtype_bytes=dtype_bytes, cc=cc, profile=profile,
                                    moe_backend=moe_backend, quantization=quantization,
                                    model=facts)
        return {part.name: part.bytes for part in estimate.parts}

    draft_raw = draft.config if draft is not None else None
    if is_mtp(request):
        with_draft, without = total(model, raw), total(decoder, raw)
        layer_bytes = sum(with_draft.values()) - sum(without.values())
        cfg = text_config(raw)
    else:
        assert draft is not None and draft_raw is not None
        own = total(draft.model_copy(update={"tp_size": tp}), draft_raw)
        cfg = text_config(draft_raw)
        shared = {"embedding"} if request.method != "draft_model" else set()
        extras_e = _extras(data, request, model, draft_raw)
        if extras_e is not None and extras_e.lm_head_vocab:
            shared.add("lm_head")
        layer_bytes = sum(b for name, b in own.items() if name not in shared)
    extras = _extras(data, request, model, draft_raw) if request.method != "draft_model" else None
    params = 0
    if extras is not None:
        params += len(layers) * sum(term.params(cfg) // (tp if term.sharded else 1)
                                    for term in extras.per_layer)
        params += sum(term.params(cfg) // (tp if term.sharded else 1) for term in extras.once)
        if extras.lm_head_vocab:
            params += config_int(cfg, extras.lm_head_vocab) * config_int(cfg, "hidden_size") // tp
        if extras.qkv_input_multiple > 1:
            first = layers[0]
            qkv = (first.total_q_heads + 2 * first.total_kv_heads) * first.head_size
            params += (extras.qkv_input_multiple - 1) * config_int(cfg, "hidden_size") * qkv // tp
    return WeightPart(name="draft model", params=int(layer_bytes * 8 / bits) + params, bits=bits)


def draft_report(catalog: Catalog, data: SpeculativeData, request: DraftRequest, *,
                 runner: Literal["v1", "v2"], runner_refusal: str | None, runner_code: str,
                 layers: tuple[LayerFacts, ...], architecture: str | None,
                 backend: str | None, backend_rule: str,
                 weights: WeightPart | None, selected: tuple[str, ...] = (),
                 groups: tuple[int, ...] = (), kv_bytes_per_token: int = 0,
                 thresholds: tuple[int | None, ...] = (), capture_sizes: tuple[int, ...] = (),
                 target_tp: int = 1, target_kv_cache_dtype: str | None = None) -> DraftReport:
    """The report of the draft: a note of what vLLM builds (``selected``: the backends the
    solver selected for its layers; ``groups``: the KV-cache groups holding them;
    ``kv_bytes_per_token``: their KV cache per token; ``thresholds``: their metadata
    builders' reorder thresholds; ``capture_sizes``: the CUDA-graph capture sizes with the
    uniform decode query of 1 + num_speculative_tokens), and its refusals."""
    codes = data.codes
    method = request.method or "?"
    issues = []
    if runner_refusal is not None:
        issues.append(startup_issue(catalog, runner_code, ("speculative", "method"),
                                    message=runner_refusal))
    notes = []
    tokens = request.num_speculative_tokens
    head = f"speculative draft ({method}, {tokens} speculative token{'s' * (tokens != 1)}"
    if layers:
        span = (f"layer {layers[0].index}" if len(layers) == 1
                else f"layers {layers[0].index}-{layers[-1].index}")
        what = f"{architecture}, " if architecture else ""
        chosen = ", ".join(selected) or backend or "none valid"
        text = (f"{head}, {what}Model Runner {runner.upper()}): {span}, backend {chosen} "
                f"({backend_rule})")
        if groups:
            text += (f"; KV-cache group{'s' * (len(groups) > 1)} "
                     f"{', '.join(map(str, groups))}, {kv_bytes_per_token:,} bytes per token")
        own_dtype = _own_kv_cache_dtype(data, request)
        if own_dtype is not None:
            text += (f"; its own KV-cache dtype {own_dtype} (the target's: "
                     f"{target_kv_cache_dtype or 'auto'}; {data.draft_settings.source})")
        if weights is not None:
            text += (f"; weights {weights.bytes / 1024**3:.2f} GiB per GPU (in the memory "
                     "table's weights; the target's input embedding shared)")
        text += _settings_text(request, thresholds, capture_sizes, target_tp)
        notes.append((codes.draft_note, text))
    elif method in data.draft_free_methods and capture_sizes:
        notes.append((codes.draft_note, (
            f"{head}, Model Runner {runner.upper()}): no draft model, no draft KV cache"
            + _settings_text(request, (), capture_sizes, target_tp))))
    elif method not in data.draft_free_methods:
        notes.append((codes.not_modelled, (
            f"{head}): its layers are not modelled (no draft config.json read, or a target "
            "model type without an MTP rule): its KV cache and weights are not counted")))
    else:
        notes.append((codes.draft_note, (
            f"{head}, Model Runner {runner.upper()}): no draft model, no draft KV cache")))
    return DraftReport(method=method, runner=runner,
                       num_speculative_tokens=request.num_speculative_tokens,
                       draft=request.model, architecture=architecture,
                       layers=tuple(layer.index for layer in layers), backend=backend,
                       backend_rule=backend_rule,
                       weight_params=weights.params if weights is not None else 0,
                       notes=tuple(notes), issues=tuple(issues))


def _settings_text(request: DraftRequest, thresholds: tuple[int | None, ...],
                   capture_sizes: tuple[int, ...], target_tp: int) -> str:
    """What the speculative tokens and the draft's settings change at start-up."""
    query = 1 + request.num_speculative_tokens
    parts = []
    known = sorted({t for t in thresholds if t is not None})
    if known:
        parts.append("reorder batch threshold " + ", ".join(map(str, known))
                     + f" (a verify step queries {query} tokens per request)")
    if capture_sizes:
        decode = [size for size in capture_sizes if size % query == 0] if query > 1 else []
        parts.append(f"{len(capture_sizes)} CUDA-graph capture sizes"
                     + (f", {len(decode)} of them multiples of the {query}-token decode"
                        if query > 1 else ""))
    given = request.keys.get("draft_tensor_parallel_size")
    parts.append(f"draft tensor-parallel size {given or target_tp}"
                 + ("" if given else " (the target's)"))
    if request.keys.get("quantization"):
        parts.append(f"draft quantization {request.keys['quantization']}")
    return "; " + "; ".join(parts)
