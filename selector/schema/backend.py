"""One backend's capability matrix, as written in ``schemas/engines/<engine>/backends/<NAME>.yaml``."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, field_validator, model_validator

from selector import expr as expr_lang
from selector.schema.engine import FactSpec
from selector.schema.types import (
    AttnType,
    CGSupport,
    Condition,
    DType,
    KVCacheDType,
    KVLayout,
    MultipleOf,
    StrictModel,
)

__all__ = [
    "PREFILL_CHECKPOINT_NAMES",
    "BackendSpec",
    "BlockSizeVariant",
    "CascadeRule",
    "CombinationRule",
    "Features",
    "KVCacheGeometry",
    "KVCacheShapeRule",
    "LayoutVariant",
    "LevelRule",
    "PrefillCheckpoint",
    "PrefillCheckpointRule",
    "RequiredLayoutRule",
    "Runtime",
    "ThresholdRule",
    "WiredFor",
    "split_shape",
]

KernelBlockSize = Union[int, MultipleOf]

WiredFor = Literal["mamba1", "mamba2", "gdn", "short_conv", "linear", "sparse_indexer"]
"""The layers a backend serves without selection (``BackendSpec.wired_for``)."""


class BlockSizeVariant(StrictModel):
    """Kernel block sizes that apply when ``when`` holds (first matching variant wins)."""

    when: Condition = True
    sizes: tuple[KernelBlockSize, ...]
    """Exact sizes (ints) and ``{multiple_of: n}`` rules; empty means any size."""
    exact: bool = False
    """The backend overrides ``supports_block_size``: only the listed ints are accepted
    (not their multiples)."""
    note: str = ""


class CombinationRule(StrictModel):
    """A ``supports_combination`` rule: when ``when`` holds, the backend is rejected
    with the registered message of ``code``.  Rules are tried in order and the
    first match is the (single) combination reason, as in vLLM."""

    code: str
    when: Condition
    note: str = ""
    raises: bool = False
    """vLLM raises here (e.g. reading a model attribute that is absent) instead of
    returning a reason; the exception replaces the backend's reasons and aborts any
    selection that evaluates this backend."""


class Features(StrictModel):
    """Feature support; each entry is true, false or a condition over request facts."""

    mla: Condition = False
    sparse: Condition = False
    sink: Condition = False
    mm_prefix: Condition = False
    per_head_quant_scales: Condition = False
    sliding_window: Condition = False
    rswa: Condition = False
    non_causal: Condition = False
    non_causal_dcp: Condition = False
    batch_invariance: Condition = False
    kv_connector: Condition = True
    pcp: Condition = False
    dcp: Condition = False
    device_cpu_query_lens_mismatch: Condition = True
    alibi_sqrt: Condition = False


class LevelRule(StrictModel):
    """CUDA-graph support level when ``when`` holds (first match wins)."""

    when: Condition = True
    level: CGSupport
    note: str = ""


class ThresholdRule(StrictModel):
    """Reorder-batch threshold when ``when`` holds (first match wins); the value is an
    expression (``null`` = the builder does not reorder)."""

    when: Condition = True
    value: int | str | None
    note: str = ""


class LayoutVariant(StrictModel):
    """Supported KV-cache layouts (most preferred first) when ``when`` holds;
    ``null`` layouts = any layout, no preference."""

    when: Condition = True
    layouts: tuple[KVLayout, ...] | None


def split_shape(text: str) -> tuple[str, ...]:
    """``"(num_blocks, 2, block_size)"`` -> ``("num_blocks", "2", "block_size")``
    (top-level commas only)."""
    body = text.strip()
    if not (body.startswith("(") and body.endswith(")")):
        raise ValueError(f"a shape is a parenthesised tuple of expressions, got {text!r}")
    parts: list[str] = []
    depth = 0
    current = ""
    for char in body[1:-1]:
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += (char in "([") - (char in ")]")
        current += char
    if current.strip():
        parts.append(current.strip())
    return tuple(parts)


class KVCacheShapeRule(StrictModel):
    """One case of ``get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
    cache_dtype_str)``; the first rule whose ``when`` holds applies.  Conditions and
    shape items may read the request facts and those five call arguments."""

    when: Condition = True
    shape: str | None = None
    """The tuple, e.g. ``(num_blocks, 2, block_size, num_kv_heads, head_size)``; each
    item is an expression."""
    raises: str | None = None
    """What the call raises instead, e.g. ``ValueError: Block size must be a multiple of 16.``"""
    note: str = ""

    @field_validator("shape")
    @classmethod
    def _shape_parses(cls, value: str | None) -> str | None:
        if value is not None:
            for item in split_shape(value):
                try:
                    expr_lang.parse(item)
                except expr_lang.ExprSyntaxError as exc:
                    raise ValueError(f"bad shape item {item!r}: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _one_outcome(self) -> KVCacheShapeRule:
        if (self.shape is None) == (self.raises is None):
            raise ValueError("give exactly one of shape and raises")
        return self


class RequiredLayoutRule(StrictModel):
    """``get_required_kv_cache_layout()`` when ``when`` holds (first match wins)."""

    when: Condition = True
    layout: Literal["NHD", "HND", None]


class KVCacheGeometry(StrictModel):
    """How the backend itself shapes its KV-cache tensor (engines before the
    ``KVCacheLayout`` refactor, e.g. vLLM 0.25.1)."""

    shape: tuple[KVCacheShapeRule, ...]
    stride_order: dict[Literal["NHD", "HND"], tuple[int, ...]] | None = None
    """``get_kv_cache_stride_order()`` under each process-wide layout (a permutation
    of the shape's axes, physical order); ``null``: not implemented, the physical
    layout is the logical shape."""
    required_layout: tuple[RequiredLayoutRule, ...] = ()
    """The layout the selector sets process-wide when this backend is chosen
    (``null``/empty: none; the engine's default applies)."""
    cache_dtype_default: str = "auto"
    """The default of ``get_kv_cache_shape``'s ``cache_dtype_str`` argument."""


class CascadeRule(StrictModel):
    """Whether the metadata builder's ``use_cascade_attention`` can ever answer yes
    (shared-prefix cascade attention), first match wins."""

    when: Condition = True
    supported: bool
    note: str = ""


class PrefillCheckpointRule(StrictModel):
    """The prefill kernel a state mixer runs when ``when`` holds (first match wins) and
    the checkpoint alignment it declares with it."""

    when: Condition = True
    kernel: str
    """The prefill kernel vLLM resolves (e.g. ``flashinfer``, ``triton``)."""
    alignment: int | None = Field(default=None, gt=0)
    """Tokens (``get_prefill_checkpoint_alignment``); null: the kernel exports none."""
    note: str = ""


PREFILL_CHECKPOINT_NAMES = frozenset(
    {"cc", "cc_major", "head_k_dim", "cuda_runtime_major", "requested"})
"""The names a prefill-checkpoint rule may read: the deployment's compute capability
(``cc``, ``cc_major``), the mixer's key head size (``head_k_dim``), the CUDA major
version the release's wheel is built for and the prefill backend requested
(``auto`` unless pinned)."""


class PrefillCheckpoint(StrictModel):
    """A state mixer's prefill checkpoints in Mamba ``align`` mode
    (``MambaBase.get_prefill_checkpoint_alignment``): which mixer classes declare one,
    and the kernel rules that decide it. The platform's hybrid alignment makes the block
    size a multiple of the LCM of every state layer's alignment, and none when one
    layer declares none (``get_mamba_prefill_checkpoint_alignment``). Unlike the other
    rules of a wired backend these read deployment facts (``PREFILL_CHECKPOINT_NAMES``):
    the pipeline evaluates them, the KV planner takes the answer
    (``KVOptions.mamba_prefill_checkpoint_alignment``)."""

    source: str = ""
    mixers: tuple[str, ...]
    """vLLM's mixer classes (``ssm.mixer_class`` of a family in families.yaml)."""
    cuda_runtime_major: int
    """The CUDA major version of the release's wheel (its ``nvidia-*[cuNN]`` requirements)."""
    rules: tuple[PrefillCheckpointRule, ...]


class Runtime(StrictModel):
    """Metadata-builder and impl properties that do not decide validity."""

    cudagraph_support: tuple[LevelRule, ...] = Field(
        default_factory=lambda: (LevelRule(level="NEVER"),))
    reorder_batch_threshold: tuple[ThresholdRule, ...] = Field(
        default_factory=lambda: (ThresholdRule(value=None),))
    update_block_table: bool = False
    kv_layouts: tuple[LayoutVariant, ...] = Field(
        default_factory=lambda: (LayoutVariant(layouts=None),))
    query_len_support: Literal["SINGLE_ONLY", "UNIFORM", "VARLEN", None] = None
    lse_base: Literal["e", "2", None] = None
    """Base of the softmax log-sum-exp the backend's kernels return and vLLM's DCP combine
    reads (``is_lse_base_on_e``): ``e`` natural log, ``2`` base 2; null: not stated."""
    dcp_decode_kv: Literal["context", "sequence", None] = None
    """What a decode token's DCP-sharded attention reads from the KV cache: ``context``
    (the cached context only; the new tokens attend to themselves in a second, causal
    pass merged by LSE) or ``sequence`` (the new token is written to its owner rank's
    cache first and read with the rest); null: no DCP support stated."""
    report_facts: tuple[str, ...] = ()
    """Derived facts to explain in the report when this backend is selected."""
    notes: tuple[str, ...] = ()
    kv_cache: KVCacheGeometry | None = None
    """KV-cache tensor shape, stride order and required layout (optional; engines
    whose backends shape their own KV cache)."""
    cascade_attention: tuple[CascadeRule, ...] = ()
    """Cascade (shared-prefix) attention support (optional; empty: not modelled)."""


class BackendSpec(StrictModel):
    """Everything attn-select knows about one attention backend of one engine version."""

    name: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    """vLLM's ``AttentionBackendEnum`` member name."""
    engine: str
    """The engine profile this file belongs to, e.g. ``vllm==0.33.0``."""
    platforms: tuple[str, ...] = Field(min_length=1)
    """The platforms whose selector knows this backend (``schemas/platforms.yaml``:
    ``[cuda]``); the engine loaded for another platform has no such backend."""
    class_name: str
    """vLLM's backend class name (used in CUDA-graph messages)."""
    source: str = ""
    """Where in the engine's source the facts come from."""
    description: str = ""
    family: Literal["standard", "mla", "composite", "state"] = "standard"
    """``state``: a Mamba / linear-attention state backend (no KV heads)."""
    wired_for: WiredFor | None = None
    """The layers vLLM gives this backend without the attention selector (``mamba1``,
    ``mamba2``, ``gdn``: a mixer's state, by its mamba type; ``sparse_indexer``: the
    sparse-MLA indexer's K cache); null: an attention backend the selector chooses.
    Such a backend is never in a priority list or a report's verdicts; its rules must
    not read request facts (the KV planner evaluates them without any)."""
    children: tuple[str, ...] = ()
    """Composite backends: the child backends."""
    selection: Literal["auto", "explicit"] = "auto"
    """``explicit``: only reachable with ``--attention-backend`` (never in a priority list)."""
    suggestable: bool = True
    """Whether to propose pinning this backend as a fix (false for model-specific backends)."""
    suggested_on: tuple[str, ...] | None = None
    """The platforms where a suggestable backend is proposed as a fix (null: all of its
    ``platforms``); another platform's backend that vLLM validates only when pinned
    (ROCM_ATTN on an NVIDIA GPU) is never proposed there."""
    pin_selects_auto: bool = False
    """Through ``AttentionConfig.backend`` (``--attention-config.backend``, a flat config's
    ``attention_backend`` as vLLM's recorded answers give it) a pin of this name is vLLM's
    automatic selection: ``AttentionConfig.__post_init__`` rewrites it to no backend (the
    MiniMax M3 MSA aliases, which set only the model's sparse decode kernel).
    ``--attention-backend`` is set after that rewrite (0.33.0 ``engine/arg_utils.py:2727-2737``),
    so the platform validates the class like any pin; its validate_configuration answers
    for it either way."""

    dtypes: tuple[DType, ...] = ("float16", "bfloat16")
    kv_cache_dtypes: tuple[KVCacheDType, ...] | None = ("auto", "float16", "bfloat16")
    """Accepted KV-cache dtypes (``null``/empty = any)."""
    kv_cache_dtype_condition: Condition = True
    """An extra condition ANDed into the KV-cache dtype check."""
    head_sizes: tuple[int, ...] | None = None
    """Accepted head sizes (``null``/empty = any)."""
    head_size_condition: Condition = True
    """An extra condition ANDed into the head-size check."""
    kernel_block_sizes: tuple[BlockSizeVariant, ...] = Field(
        default_factory=lambda: (BlockSizeVariant(sizes=(MultipleOf(multiple_of=1),)),))
    compute_capability: Condition = True
    attn_types: tuple[AttnType, ...] = ("decoder",)
    facts: tuple[FactSpec, ...] = ()
    """Backend-local derived facts (e.g. a model attribute read with this backend's default)."""
    features: Features = Field(default_factory=Features)
    combination: tuple[CombinationRule, ...] = ()
    layer_checks: tuple[CombinationRule, ...] = ()
    """Rules the backend's implementation enforces when vLLM builds the layer
    (``AttentionImpl.__init__``, after selection): when one holds for the selected
    backend, vLLM's start-up fails with the code's message (a start-up refusal, not a
    reason of the selection)."""
    runtime: Runtime = Field(default_factory=Runtime)
    prefill_checkpoint: PrefillCheckpoint | None = None
    """A state backend's mixers' prefill checkpoints (wired state backends only)."""
