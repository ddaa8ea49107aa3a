"""Mamba-1 and Gated DeltaNet mixer dimensions from a config.json."""

from __future__ import annotations

from selector.models.config_reader import ConfigReader
from selector.models.facts import GDNDims, Mamba1Dims

__all__ = ["read_gdn", "read_mamba1"]


def read_mamba1(text: ConfigReader, hidden_size: int) -> Mamba1Dims:
    """Jamba: ``intermediate = mamba_expand * hidden_size``, ``mamba_d_state``,
    ``mamba_d_conv`` (vLLM ``JambaForCausalLM.get_mamba_state_shape_from_config``)."""
    return Mamba1Dims(
        intermediate_size=text.int_("mamba_expand", 2) * hidden_size,
        state_size=text.int_("mamba_d_state", 16),
        conv_kernel=text.int_("mamba_d_conv", 4),
    )


def read_gdn(text: ConfigReader) -> GDNDims:
    """Qwen3-Next: the ``linear_*`` keys (vLLM ``Qwen3NextForCausalLM``)."""
    return GDNDims(
        num_k_heads=text.int_("linear_num_key_heads"),
        num_v_heads=text.int_("linear_num_value_heads"),
        head_k_dim=text.int_("linear_key_head_dim"),
        head_v_dim=text.int_("linear_value_head_dim"),
        conv_kernel=text.int_("linear_conv_kernel_dim", 4),
    )
