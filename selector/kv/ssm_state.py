"""Mamba-1, Mamba-2, Gated DeltaNet, short-convolution and linear-attention state shapes per rank
(vLLM's ``MambaStateShapeCalculator`` / ``MambaStateDtypeCalculator``)."""

from __future__ import annotations

from selector.kv.dtypes import dtype_bytes
from selector.models.facts import GDNDims, LinearAttnDims, Mamba1Dims, Mamba2Dims, ShortConvDims

__all__ = ["ssm_state_dtypes", "ssm_state_shapes"]


def ssm_state_shapes(
    dims: Mamba1Dims | Mamba2Dims | GDNDims | ShortConvDims | LinearAttnDims, tp: int,
    num_spec: int = 0
) -> tuple[tuple[int, ...], ...]:
    """(conv state, temporal/recurrent state) shapes on one rank, conv state in
    the default ``SD`` orientation ``(state_len, dim)``; a short convolution has the
    conv state only (``short_conv_state_shape``, mamba_utils.py:249-258), a linear
    attention its one ``(heads, head_dim, head_dim)`` state
    (``linear_attention_state_shape``, mamba_utils.py:153-161), in the conv state's dtype
    (``linear_attention_state_dtype``: ``--mamba-cache-dtype``, :54-61)."""
    if isinstance(dims, LinearAttnDims):
        return ((dims.num_heads // tp, dims.head_dim, dims.head_dim),)
    if isinstance(dims, ShortConvDims):
        return ((dims.conv_kernel - 1 + num_spec, dims.conv_dim // tp),)
    if isinstance(dims, Mamba1Dims):
        local = dims.intermediate_size // tp
        return ((dims.conv_kernel - 1, local), (local, dims.state_size))
    if isinstance(dims, Mamba2Dims):
        # MambaStateShapeCalculator.mamba2_state_shape: groups are replicated
        # up to the TP size when they do not divide it (extra_groups_for_head_shards)
        groups = dims.n_groups + (0 if dims.n_groups % tp == 0 else tp - dims.n_groups)
        conv_dim = dims.intermediate_size + 2 * groups * dims.state_size
        return (
            (dims.conv_kernel - 1 + num_spec, conv_dim // tp),
            (dims.num_heads // tp, dims.head_dim, dims.state_size),
        )
    conv = (dims.conv_kernel - 1 + num_spec, dims.conv_dim // tp)
    recurrent = (dims.num_v_heads // tp, dims.head_v_dim, dims.head_k_dim)
    return (conv, recurrent)


def ssm_state_dtypes(
    model_dtype: str, mamba_cache_dtype: str = "auto", mamba_ssm_cache_dtype: str = "auto"
) -> tuple[tuple[str, str], tuple[int, int]]:
    """(conv dtype, temporal dtype) names and their element sizes: the conv state
    follows ``mamba_cache_dtype`` (auto: the model dtype), the temporal state
    ``mamba_ssm_cache_dtype`` (auto: same as the conv state)."""
    conv = model_dtype if mamba_cache_dtype == "auto" else mamba_cache_dtype
    temporal = conv if mamba_ssm_cache_dtype == "auto" else mamba_ssm_cache_dtype
    return (conv, temporal), (dtype_bytes(conv), dtype_bytes(temporal))
