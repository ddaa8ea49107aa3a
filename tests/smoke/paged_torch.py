"""Test doubles: paged attention in plain torch with the kernels' calling conventions.

Used by the CPU pipeline tests to stand in for FlashAttention's varlen paged call and
FlashInfer's decode/prefill wrappers, so the cache layout, the slot writes, the
reorder and the CSR arrays are exercised end to end without a GPU.
"""

from __future__ import annotations

import math
from typing import Any

import torch


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float,
            window_left: int | None, softcap: float | None) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    q_len, kv_len = q.shape[0], k.shape[0]
    query_pos = torch.arange(kv_len - q_len, kv_len)
    key_pos = torch.arange(kv_len)
    visible = key_pos[None, :] <= query_pos[:, None]
    if window_left is not None and window_left >= 0:
        visible &= key_pos[None, :] >= query_pos[:, None] - window_left
    scores = scores.masked_fill(~visible[None], float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).to(q.dtype)


def flash_attn_varlen_paged(q: Any, key_cache: Any, value_cache: Any, *, cu_seqlens_q: Any,
                            seqused_k: Any, block_table: Any, max_q: int, max_k: int,
                            scale: float, window_left: int | None,
                            softcap: float | None) -> torch.Tensor:
    """FlashAttention semantics: logical (pages, block, heads, head) caches, a page table."""
    del max_q, max_k
    block = key_cache.shape[1]
    out = torch.empty_like(q)
    starts = cu_seqlens_q.tolist()
    for index, length in enumerate(seqused_k.tolist()):
        pages = block_table[index, : math.ceil(length / block)].long()
        k = key_cache[pages].reshape(-1, *key_cache.shape[2:])[:length]
        v = value_cache[pages].reshape(-1, *value_cache.shape[2:])[:length]
        rows = slice(starts[index], starts[index + 1])
        out[rows] = _attend(q[rows], k, v, scale=scale, window_left=window_left,
                            softcap=softcap)
    return out


class _Wrapper:
    def __init__(self, workspace: Any, kv_layout: str = "NHD", **_: Any) -> None:
        self.layout = kv_layout
        self._backend = "torch-double"

    def _store(self, qo_indptr: list[int], indptr: Any, indices: Any, last: Any,
               page_size: int, kwargs: dict[str, Any]) -> None:
        assert kwargs["q_data_type"] is not None
        self.qo_indptr = qo_indptr
        self.indptr, self.indices, self.last = indptr.tolist(), indices.tolist(), last.tolist()
        self.page_size = page_size
        self.window_left = kwargs["window_left"]
        self.softcap = kwargs["logits_soft_cap"]
        self.scale = kwargs["sm_scale"]

    def run(self, q: Any, cache: Any, *, out: Any) -> Any:
        keys, values = cache[:, 0], cache[:, 1]
        if self.layout == "HND":
            keys, values = keys.transpose(1, 2), values.transpose(1, 2)
        for index, last in enumerate(self.last):
            pages = self.indices[self.indptr[index]:self.indptr[index + 1]]
            length = (len(pages) - 1) * self.page_size + last
            k = keys[pages].reshape(-1, *keys.shape[2:])[:length]
            v = values[pages].reshape(-1, *values.shape[2:])[:length]
            rows = slice(self.qo_indptr[index], self.qo_indptr[index + 1])
            out[rows] = _attend(q[rows], k, v, scale=self.scale, window_left=self.window_left,
                                softcap=self.softcap)
        return out


class DecodeWrapper(_Wrapper):
    def plan(self, indptr: Any, indices: Any, last: Any, num_qo_heads: int, num_kv_heads: int,
             head_dim: int, page_size: int, **kwargs: Any) -> None:
        self._store(list(range(len(last) + 1)), indptr, indices, last, page_size, kwargs)


class PrefillWrapper(_Wrapper):
    def plan(self, qo_indptr: Any, indptr: Any, indices: Any, last: Any, num_qo_heads: int,
             num_kv_heads: int, head_dim: int, page_size: int, *, causal: bool,
             **kwargs: Any) -> None:
        assert causal
        # like FlashInfer, read the kv indptr as absolute offsets into the shared indices
        self._store(qo_indptr.tolist(), indptr, indices, last, page_size, kwargs)


class FakeFlashInfer:
    BatchDecodeWithPagedKVCacheWrapper = DecodeWrapper
    BatchPrefillWithPagedKVCacheWrapper = PrefillWrapper
