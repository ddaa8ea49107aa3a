"""What the KV planner needs to know about one layer's chosen attention backend.

The per-layer backend *choice* is the core solver's job; this module only
defines the small, frozen input it hands to :func:`selector.kv.plan_model`,
plus the fixed facts of the backends vLLM wires without selection (Mamba /
GDN state backends and the DeepSeek-V3.2 indexer cache).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from selector.schema.types import MultipleOf

__all__ = [
    "CG_LEVEL",
    "DEEPSEEK_V32_INDEXER",
    "GDN_ATTN",
    "MAMBA1_ATTN",
    "MAMBA2_ATTN",
    "BackendKVFacts",
    "BlockSizeRule",
    "CGSupport",
    "KVLayout",
    "KVPacking",
    "MultipleOf",
    "render_sizes",
    "rule_base",
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
    model_config = ConfigDict(frozen=True, extra="forbid")


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


MAMBA1_ATTN = BackendKVFacts(
    name="MAMBA1_ATTN",
    class_name="Mamba1AttentionBackend",
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=1,
    is_ssm=True,
)
"""Jamba / Mamba-1 state backend (``mamba1_attn.py``; builder in ``mamba_attn.py``)."""

MAMBA2_ATTN = BackendKVFacts(
    name="MAMBA2_ATTN",
    class_name="Mamba2AttentionBackend",
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=1,
    is_ssm=True,
)
"""Mamba-2 state backend (``mamba2_attn.py``; builder ``BaseMambaAttentionMetadataBuilder``
in ``mamba_attn.py``: UNIFORM_BATCH, reorder threshold 1)."""

GDN_ATTN = BackendKVFacts(
    name="GDN_ATTN",
    class_name="GDNAttentionBackend",
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=1,
    is_ssm=True,
)
"""Gated DeltaNet state backend (``gdn_attn.py``)."""

DEEPSEEK_V32_INDEXER = BackendKVFacts(
    name="DEEPSEEK_V32_INDEXER",
    class_name="DeepseekV32IndexerBackend",
    kernel_block_sizes=(64,),
    cudagraph_support="UNIFORM_BATCH",
    reorder_batch_threshold=None,
)
"""DeepSeek-V3.2 sparse indexer K cache (``mla/indexer.py``). Its CUDA-graph
support is ALWAYS when DeepGEMM's varlen paged MQA logits kernel is usable
(SM100 family) or decode is flattened; UNIFORM_BATCH otherwise — pass a copy
with the right level through :class:`selector.kv.KVOptions` when known."""
