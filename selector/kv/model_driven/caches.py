"""The cache modules each decoder layer registers, with their KV-cache specs, and each
layer's backend (the one its main cache module names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selector.kv.model_driven.environment import layer_envs
from selector.kv.model_driven.expressions import evaluate
from selector.kv.model_driven.rules import DrivenCache, DrivenModel, DrivenRecord
from selector.kv.specs import (
    AnySpec,
    CircularBufferSpec,
    FullAttentionSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)

__all__ = [
    "DrivenEntry",
    "driven_caches",
    "layer_backends",
]


class DrivenEntry(DrivenRecord):
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
    for env in layer_envs(rule, config, extra):
        index = int(env["layer_index"])
        for cache_module in rule.caches:
            if not evaluate(cache_module.when, env):
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
    for env in layer_envs(rule, config, extra):
        held = [c for c in rule.caches if evaluate(c.when, env)]
        names = [selected if c.backend == "selected" else c.backend for c in held]
        main = [n for c, n in zip(held, names, strict=True) if c.name == rule.main_cache]
        if rule.main_cache:
            out.append(main[0] if main else selected)
        else:
            out.append(selected if selected in names or not names else names[-1])
    return out


def _spec(cache_module: DrivenCache, env: Mapping[str, Any], cache_dtype: str) -> AnySpec:
    block = int(evaluate(cache_module.block_size, env))
    heads = int(evaluate(cache_module.num_kv_heads, env))
    head = int(evaluate(cache_module.head_size, env))
    head_v = int(evaluate(cache_module.head_size_v, env))
    per_state = int(evaluate(cache_module.tokens_per_state, env))
    dtype = cache_module.dtype
    if dtype not in _DTYPE_BYTES and dtype != "kv":
        dtype = str(evaluate(dtype, env))
    dtype_bytes = int(env["kv_bytes"]) if dtype == "kv" else _DTYPE_BYTES[dtype]
    state = evaluate(cache_module.state_bytes, env)
    content = int(state) if state is not None else (head + head_v) * dtype_bytes
    # AttentionSpec.get_num_kernel_states: one state per block when tokens_per_state is 0
    states = block // per_state if per_state > 0 else 1
    per_state = per_state if per_state > 0 else block
    page = heads * states * content
    alignment = evaluate(cache_module.alignment, env)
    if alignment:
        page = -(-page // int(alignment)) * int(alignment)
    fields: dict[str, Any] = {
        "block_size": block, "num_kv_heads": heads, "head_size": head, "head_size_v": head_v,
        "kv_cache_dtype": cache_dtype if dtype == "kv" or cache_module.spec == "mla" else dtype,
        "dtype_bytes": dtype_bytes, "state_content_bytes": content, "tokens_per_state": per_state,
        "page_size_padded": page}
    if cache_module.spec in ("sliding_window_mla", "sliding_window"):
        return SlidingWindowSpec(sliding_window=int(evaluate(cache_module.sliding_window, env)), **fields)
    if cache_module.spec == "full_attention":
        return FullAttentionSpec(**fields)
    if cache_module.spec == "circular_buffer":
        return CircularBufferSpec(**fields)
    return MLAAttentionSpec(**fields)
