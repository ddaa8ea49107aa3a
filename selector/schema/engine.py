"""An engine profile (``schemas/engines/<engine>/profile.yaml``): the request
vocabulary, environment facts, derived facts, the ordered validity checks, the
priority lists and the engine's message templates."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, model_validator

from selector.schema.types import Condition, StrictModel

__all__ = [
    "BRANCH_ID",
    "CheckSpec",
    "EngineMessages",
    "EngineProfile",
    "FactSpec",
    "FactStep",
    "HybridAlignmentRules",
    "InputSpec",
    "KVCacheDtypeRewrite",
    "LayerBuildCheck",
    "PerformanceHint",
    "PriorityBranch",
    "PriorityEntry",
    "SuggestionSpec",
]

Scalar = Union[int, bool, str, None]


class InputSpec(StrictModel):
    """One named request fact that conditions may read."""

    type: Literal["int", "bool", "str"]
    nullable: bool = False
    default: Scalar = None
    doc: str = ""
    choices: tuple[str, ...] = ()


class FactStep(StrictModel):
    """``if when: fact = set`` (``set`` is an expression; ints/bools are literals)."""

    when: Condition = True
    set: Scalar
    note: str = ""


class FactSpec(StrictModel):
    """A fact derived from inputs and earlier facts: an initial value, then steps
    applied in order (a later matching step overrides an earlier one)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    doc: str = ""
    value: Scalar
    """Initial value (an expression)."""
    steps: tuple[FactStep, ...] = ()


class CheckSpec(StrictModel):
    """One ``validate_configuration`` check; ``fails_when`` may read ``cap.<name>``,
    the backend's capability (``cap.head_size``, ``cap.sink``, ...)."""

    code: str
    fails_when: Condition


class LayerBuildCheck(StrictModel):
    """One refusal of vLLM's attention layer once its backend is selected (``Attention.__init__``,
    ``vllm/model_executor/layers/attention/attention.py``): ``fails_when`` reads the layer's
    request facts, ``backend`` (the selected backend's name) and ``cap.<name>``, the selected
    backend's capability (``cap.alibi_sqrt``: ``supports_alibi_sqrt()``); when it holds, vLLM's
    start-up fails with the code's message (a start-up refusal, not a reason of the selection)."""

    code: str
    fails_when: Condition
    source: str = ""
    """The vLLM lines that raise."""


class PriorityEntry(StrictModel):
    backend: str
    when: Condition = True


BRANCH_ID = r"^[a-z][a-z0-9_]*$"
"""Priority-branch ids: a child profile names the branch it replaces, removes or
places a new one next to."""


class PriorityBranch(StrictModel):
    """The priority list used when ``when`` holds (first matching branch)."""

    id: str = Field(pattern=BRANCH_ID)
    """Names the branch, so that a newer profile can replace this one alone."""
    when: Condition = True
    order: tuple[str | PriorityEntry, ...]
    note: str = ""


class EngineMessages(StrictModel):
    """Templates of the engine's selection errors."""

    no_valid_backend: str
    selected_invalid: str
    config_repr: str
    reasons_item: str = "{name}: [{reasons}]"
    reasons_join: str = ", "
    block_size_precluded: str = ""
    kv_dtypes_hint: str = ""
    """Appended where ``no_valid_backend`` has ``{kv_hint}`` when a backend refused the
    KV-cache dtype (``{dtypes}``: the KV-cache dtypes of those backends)."""
    unknown_backend: str = ""
    """vLLM's refusal of an ``--attention-backend`` word that is no ``AttentionBackendEnum``
    member (``{name}``: the word upper-cased, as the enum lookup is; ``{members}``: the
    profile's ``attention_backend_enum``, comma-separated); empty: not recorded."""
    selected_import_error: str = ""
    """A pinned backend whose module fails to import (its one reason an ``IM`` code), where
    the platform words it apart from ``selected_invalid`` (``{backend}``, ``{reason}``: the
    reason's text, not a list repr); empty: ``selected_invalid``."""


class PerformanceHint(StrictModel):
    """A warning where vLLM's choice leaves speed on the table: when ``when`` holds, one of
    ``selected`` is selected and one of ``faster`` is valid for the same layer, ``code``'s
    message names the first valid one of ``faster`` (``{faster}`` in ``fix`` too)."""

    code: str
    when: Condition = True
    selected: tuple[str, ...]
    faster: tuple[str, ...] = Field(min_length=1)
    why: str
    fix: str
    """The change as the command line spells it (``{faster}``: the faster backend)."""
    source: str
    """Where the measurement or the rule comes from (an issue, a file and line)."""


class SuggestionSpec(StrictModel):
    """One change to a request that attn-select tries when no backend is valid: the
    input ``input`` set to ``value`` (``null`` = as if not given); proposed when the
    solver then selects a backend."""

    input: str
    """A name of the profile's ``inputs``."""
    value: bool | int | str | None
    flag: str
    """The change as the ``vllm serve`` command line spells it."""
    summary: str | None = None
    """The suggestion's text (default: ``use <flag>``)."""

    @property
    def text(self) -> str:
        return self.summary if self.summary is not None else f"use {self.flag}"


class KVSpecRules(StrictModel):
    """What the model runner of the release adds to a layer's KV-cache spec."""

    source: str = ""
    block_size_all_backends: bool = False
    """``update_block_size_for_backend`` prefers a block size every non-SSM backend of
    the model's layers takes (``_find_non_ssm_backends``); False: the first non-SSM
    layer's backend alone decides (``_find_non_ssm_backend``, so a speculative draft's
    other backend does not)."""
    exact_size_alignment: bool = False
    """``customize_attention_spec``: a backend that declares only exact kernel block
    sizes gives its spec ``block_stride_alignment = MultipleOf(largest)`` (so two layers
    of backends that differ in it are not one spec: ``UniformTypeKVCacheSpecs``); False:
    the release has no such step (a FlashInfer draft's spec equals a FLASH_ATTN target's)."""


class HybridAlignmentRules(StrictModel):
    """Which steps ``Platform._align_hybrid_block_size`` of the release takes when it
    sizes the attention block of an attention + Mamba model (the defaults are 0.25.1's)."""

    source: str = ""
    mla_min_block_size: int | None = None
    """MLA hybrids: the alignment is at least this many tokens (the TRTLLM / FlashInfer
    MLA decode kernels' 128); null: no such step."""
    lcm_non_ssm_backends: bool = False
    """The block is also a multiple of every non-SSM backend's smallest kernel block."""
    prefill_checkpoint: bool = False
    """In ``align`` mode the alignment is also LCM'd with the Mamba layers' prefill
    checkpoint alignment (``get_mamba_prefill_checkpoint_alignment``; the mixers'
    rules are in their state backend's ``prefill_checkpoint``)."""
    all_mode: bool = False
    """With prefix caching, a model with ``SupportsMambaPrefixCaching`` gets Mamba cache
    mode ``all`` (``MambaModelConfig``), which aligns the block to the Mamba chunk size:
    ``lcm(chunk size, kernel alignment) * cdiv(state tokens, that)``."""
    hybrid_prefix_caching: bool = True
    """Prefix caching is on by default for a generative hybrid model
    (``ModelConfig.is_prefix_caching_supported``), so its Mamba cache mode is ``align``;
    false: off by default (mode ``none``: the Mamba block is ``max_model_len``)."""


class KVCacheDtypeRewrite(StrictModel):
    """A layer whose selected backend stores another KV-cache dtype than the one it was
    built with writes that dtype back into the model's one cache config, which every layer
    built after it reads (vLLM's ``MLAAttention.__init__``: ``cache_config.cache_dtype =
    normalized_kv_cache_dtype``): those layers are selected and stored with it."""

    source: str
    backends: tuple[str, ...] = Field(min_length=1)
    """The backends whose layer writes its stored dtype back: the dtype written is the
    backend's ``canonical_kv_cache_dtype`` fact (vLLM's
    ``_canonicalize_sparse_mla_kv_cache_dtype``), where it differs from the layer's."""


class EngineProfile(StrictModel):
    """Everything engine-version specific except the per-backend files."""

    engine: str = Field(pattern=r"^[a-z][a-z0-9_-]*==\d+(\.\d+)*$")
    """Profile identity, e.g. ``vllm==0.33.0``."""
    extends: str | None = None
    """The older profile this one states its changes from (None: the base profile).
    Every section is inherited: see ``docs/engine-profiles.md``."""
    product: str = "vLLM"
    """How messages name the engine (with the version: ``vLLM 0.33.0``)."""
    description: str = ""
    source: str = ""
    platform: str
    """The platform this profile was loaded for (``cuda``): :attr:`environment`,
    :attr:`priorities` and :attr:`reported_backends` are that platform's
    (``platforms/<name>.yaml`` of the engine folder)."""
    inputs: dict[str, InputSpec]
    environment: dict[str, InputSpec]
    """Run-time facts vLLM detects on the machine; explicit inputs with defaults."""
    facts: tuple[FactSpec, ...]
    checks: tuple[CheckSpec, ...]
    layer_build: tuple[LayerBuildCheck, ...] = ()
    """The attention layer's own refusals of the selected backend (every backend alike,
    keyed on its capability columns), in vLLM's order."""
    priorities: tuple[PriorityBranch, ...]
    reported_backends: tuple[str, ...]
    """Backends a sweep line reports (the oracle's default set)."""
    messages: EngineMessages
    attention_backend_enum: tuple[str, ...] = ()
    """The release's ``AttentionBackendEnum`` members in enum order, as its refusal of another
    word lists them (``messages.unknown_backend``'s ``{members}``); empty: not recorded."""
    suggestions: tuple[SuggestionSpec, ...] = ()
    """Request changes to try, in order, when no backend is valid (fix suggestions)."""
    performance_hints: tuple[PerformanceHint, ...] = ()
    """Warnings where vLLM's choice is slower than a valid alternative (a platform's)."""
    kv_cache_layout_default: Literal["NHD", "HND"] | None = None
    """The process-wide KV-cache layout when the selected backend requires none
    (engines whose backends shape their own KV cache, e.g. vLLM 0.25.1: ``NHD``)."""
    hybrid_alignment: HybridAlignmentRules = Field(default_factory=HybridAlignmentRules)
    """The steps of the hybrid (attention + Mamba) block-size alignment."""
    kv_spec: KVSpecRules = Field(default_factory=KVSpecRules)
    """What the model runner adds to a layer's KV spec (the defaults are 0.25.1's)."""
    kv_cache_dtype_rewrite: KVCacheDtypeRewrite | None = None
    """The layers that rewrite the shared KV-cache dtype for the layers built after them;
    None: none does."""

    @model_validator(mode="after")
    def _unique_keys(self) -> EngineProfile:
        """Facts, checks and priority branches are inherited by key: keys are unique."""
        for section, keys in (("facts", [f.name for f in self.facts]),
                              ("checks", [c.code for c in self.checks]),
                              ("layer_build", [c.code for c in self.layer_build]),
                              ("priorities", [b.id for b in self.priorities])):
            duplicates = sorted({k for k in keys if keys.count(k) > 1})
            if duplicates:
                raise ValueError(f"{section}: duplicate key(s) {duplicates}")
        return self
