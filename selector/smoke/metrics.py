"""Work done by an attention call: KV bytes read and matmul FLOPs (pure Python)."""

from __future__ import annotations

from selector.smoke.batch import BatchSpec

__all__ = ["attention_flops", "dtype_bytes", "kv_read_bytes", "visible_pairs"]


def dtype_bytes(dtype: str) -> int:
    return {"float8": 1, "bfloat16": 2, "float16": 2, "float32": 4}[dtype]


def visible_pairs(batch: BatchSpec, sliding_window: int | None) -> int:
    """(query, key) pairs the causal (and windowed) mask lets through, summed over requests."""
    total = 0
    for request in batch.requests:
        for position in range(request.context_len, request.seq_len):
            visible = position + 1
            if sliding_window is not None:
                visible = min(visible, sliding_window)
            total += visible
    return total


def attention_flops(batch: BatchSpec, *, num_q_heads: int, head_size: int,
                    sliding_window: int | None) -> int:
    """2 matmuls x 2 FLOPs per multiply-add, per visible pair, head and head dimension."""
    return 4 * visible_pairs(batch, sliding_window) * num_q_heads * head_size


def kv_read_bytes(batch: BatchSpec, *, num_kv_heads: int, head_size: int, dtype: str,
                  sliding_window: int | None = None) -> int:
    """Bytes of K and V a decode must read: each request's (windowed) keys, once per KV head."""
    tokens = 0
    for request in batch.requests:
        tokens += request.seq_len if sliding_window is None else min(request.seq_len,
                                                                     sliding_window)
    return 2 * tokens * num_kv_heads * head_size * dtype_bytes(dtype)
