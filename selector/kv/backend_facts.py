"""What the KV planner needs to know about one layer's chosen attention backend.

The per-layer backend *choice* is the core solver's job; this module only
defines the small, frozen input it hands to :func:`selector.kv.plan_model`,
plus the facts of the backends vLLM wires without selection (Mamba / GDN state
backends and the DeepSeek-V3.2 indexer cache), read from their backend files.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from selector.catalog import EngineData
from selector.schema.backend import BackendSpec
from selector.schema.types import MultipleOf

__all__ = [
    "CG_LEVEL",
    "BackendKVFacts",
    "BlockSizeRule",
    "CGSupport",
    "KVLayout",
    "KVPacking",
    "MultipleOf",
    "render_sizes",
    "rule_base",
    "wired_backends",
    "wired_kv_facts",
]

CGSupport = Literal["NEVER", "UNIFORM_SINGLE_TOKEN_DECODE", "UNIFORM_BATCH", "ALWAYS"]
"""vLLM's ``AttentionCGSupport`` member names."""

CG_LEVEL: dict[str, int] = {
    "NEVER": 0,
    "UNIFORM_SINGLE_TOKEN_DECODE": 1,
    "UNIFORM_BATCH": 2,
    "ALWAYS": 3,
}
"""``AttentionCGSupport`` values; vLLM compares supports by value."""

KVLayout = Literal["LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"]

KVPacking = Literal["dense", "flashinfer_nvfp4"]
"""How the backend's ``customize_spec`` repacks an attention spec.

``dense``: K and V side by side, one slot per KV head (the default).
``flashinfer_nvfp4``: with an NVFP4 KV dtype, K and V become separate head
slots of ``head_size // 2 + head_size // 16`` bytes each.
"""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


BlockSizeRule = int | MultipleOf
"""One entry of a backend's ``get_supported_kernel_block_sizes()``."""


def rule_base(rule: BlockSizeRule) -> int:
    """The token count a rule contributes (``MultipleOf(n)`` -> n)."""
    return rule.multiple_of if isinstance(rule, MultipleOf) else rule


def render_sizes(rules: tuple[BlockSizeRule, ...]) -> str:
    """A kernel-size list as vLLM prints it: ``[16, 32, 64]`` / ``[MultipleOf(16)]``."""
    return "[" + ", ".join(repr(rule) for rule in rules) + "]"


class BackendKVFacts(_Frozen):
    """The KV-relevant facts of one attention backend, as resolved for a layer."""

    name: str
    """Registry name, e.g. ``FLASH_ATTN`` (vLLM's ``get_name()``)."""
    class_name: str
    """Backend class ``__name__``, e.g. ``FlashAttentionBackend`` (CUDA-graph messages)."""
    kernel_block_sizes: tuple[BlockSizeRule, ...] = (MultipleOf(multiple_of=1),)
    """``get_supported_kernel_block_sizes()`` (vLLM's default: ``[MultipleOf(1)]``);
    an empty tuple also means any size."""
    supported_layouts: tuple[KVLayout, ...] | None = None
    """``supported_kv_cache_layouts()``, most preferred first; None means any."""
    cudagraph_support: CGSupport = "ALWAYS"
    """The builder's ``get_cudagraph_support`` for this layer's spec."""
    reorder_batch_threshold: int | None = None
    """The builder's ``reorder_batch_threshold`` (None: no reordering)."""
    is_mla: bool = False
    is_ssm: bool = False
    packing: KVPacking = "dense"
    canonical_kv_cache_dtype: str | None = None
    """KV dtype this backend actually stores when it canonicalises the requested
    one (e.g. FLASHMLA_SPARSE stores ``fp8`` as ``fp8_ds_mla``); None: as requested."""
    fa_version: int | None = None
    """Resolved FlashAttention version, for reports only."""
    exact_size_alignment: bool = True
    """The release's runner aligns the spec of a backend of only exact kernel sizes
    (``kv_spec.exact_size_alignment`` of the engine profile)."""

    @property
    def only_exact_sizes(self) -> bool:
        """True when every declared kernel size is an exact int."""
        return bool(self.kernel_block_sizes) and all(
            isinstance(rule, int) for rule in self.kernel_block_sizes
        )

    def supports_block_size(self, block_size: int) -> bool:
        """vLLM's ``supports_block_size``: a multiple of any declared size."""
        if not self.kernel_block_sizes:
            return True
        return any(block_size % rule_base(rule) == 0 for rule in self.kernel_block_sizes)

    def accepts_kernel_block(self, block_size: int) -> bool:
        """Exact acceptance used by ``select_common_block_size``: an int must be
        equal, ``MultipleOf(n)`` must divide."""
        if not self.kernel_block_sizes:
            return True
        for rule in self.kernel_block_sizes:
            if isinstance(rule, MultipleOf):
                if block_size % rule.multiple_of == 0:
                    return True
            elif block_size == rule:
                return True
        return False

    def preferred_block_size(self, default: int) -> int:
        """vLLM's ``get_preferred_block_size``."""
        if not self.kernel_block_sizes or self.supports_block_size(default):
            return default
        return min(rule_base(rule) for rule in self.kernel_block_sizes)


def wired_kv_facts(spec: BackendSpec) -> BackendKVFacts:
    """The KV facts of a backend vLLM wires without selection (``wired_for``; its rules
    are unconditional, which the catalog checks)."""
    threshold = spec.runtime.reorder_batch_threshold[0].value
    return BackendKVFacts(
        name=spec.name,
        class_name=spec.class_name,
        kernel_block_sizes=spec.kernel_block_sizes[0].sizes,
        cudagraph_support=spec.runtime.cudagraph_support[0].level,
        reorder_batch_threshold=threshold if isinstance(threshold, int) else None,
        is_mla=spec.family == "mla",
        is_ssm=spec.family == "state",
    )


def wired_backends(engine: EngineData) -> dict[str, BackendKVFacts]:
    """The engine's wired backends by ``wired_for`` (``mamba1``, ``mamba2``, ``gdn``:
    a mixer's state; ``sparse_indexer``: DeepSeek-V3.2's indexer K cache)."""
    return {wired_for: wired_kv_facts(spec) for wired_for, spec in engine.wired.items()}
