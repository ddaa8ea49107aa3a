"""Test doubles: paged attention in plain torch, called exactly as the kernel call contract
calls the real kernels (vLLM's argument names).

``flash_attn_varlen_func`` / ``get_scheduler_metadata`` stand in for FlashAttention,
:class:`FakeFlashInfer` for FlashInfer's wrappers and ``flash_mla_with_kvcache`` for
FlashMLA, so the cache layout, the slot writes, the reorder, the CSR arrays and every
contract argument are exercised end to end without a GPU. :data:`BUGS` injects a kernel
bug (the smoke must then FAIL): ``ignore_window``, ``ignore_softcap``, ``ignore_sinks``,
``wrong_page``, ``drop_key``, ``wrong_scale``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from selector.smoke.contract import ProviderSpec
from selector.smoke.providers import Provider, ProviderChoice
from selector.smoke.runner import SmokeMachine

BUGS: set[str] = set()
"""Kernel bugs to inject (tests set and clear it)."""


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float,
            window_left: int, softcap: float | None, sinks: torch.Tensor | None
            ) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    if "drop_key" in BUGS and k.shape[0] > 1:
        k, v = k[1:], v[1:]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if softcap and "ignore_softcap" not in BUGS:
        scores = softcap * torch.tanh(scores / softcap)
    q_len, kv_len = q.shape[0], k.shape[0]
    query_pos = torch.arange(kv_len - q_len, kv_len)
    key_pos = torch.arange(kv_len)
    visible = key_pos[None, :] <= query_pos[:, None]
    if window_left >= 0 and "ignore_window" not in BUGS:
        visible &= key_pos[None, :] >= query_pos[:, None] - window_left
    scores = scores.masked_fill(~visible[None], float("-inf"))
    if sinks is not None and "ignore_sinks" not in BUGS:
        sink = sinks.float().reshape(-1, 1, 1).expand(-1, q_len, 1)
        probabilities = torch.softmax(torch.cat([scores, sink], -1), -1)[..., :-1]
    else:
        probabilities = torch.softmax(scores, -1)
    return torch.einsum("hqk,khd->qhd", probabilities, v)


def _pages(table: list[int]) -> list[int]:
    if "wrong_page" in BUGS and len(table) > 1:
        return [table[0], table[0], *table[2:]]  # reads the first page where the second is
    return table


def _scale(value: float) -> float:
    return 1.0 if "wrong_scale" in BUGS else value


def _dequant(t: torch.Tensor, scale: torch.Tensor | float | None) -> torch.Tensor:
    if scale is None:
        return t.float()
    factor = float(scale.reshape(-1)[0]) if isinstance(scale, torch.Tensor) else scale
    return t.float() * _scale(factor)


def flash_attn_varlen_func(*, q: Any, k: Any, v: Any, cu_seqlens_q: Any, max_seqlen_q: int,
                           seqused_k: Any, max_seqlen_k: int, softmax_scale: float,
                           causal: bool, block_table: Any,
                           window_size: list[int] | None = None, softcap: float = 0.0,
                           fa_version: int | None = None, out: Any = None,
                           scheduler_metadata: Any = None, q_descale: Any = None,
                           k_descale: Any = None, v_descale: Any = None, num_splits: int = 0,
                           s_aux: Any = None, q_v: Any = None) -> Any:
    """vLLM's ``flash_attn_varlen_func`` semantics over logical (pages, block, heads, d)."""
    del max_seqlen_q, max_seqlen_k, scheduler_metadata, num_splits, fa_version
    assert causal
    if q_v is not None:  # MLA: q = rope part, q_v = latent part; V = the latent cache
        q = torch.cat([q_v, q], dim=-1)
        k = torch.cat([v, k], dim=-1)
    block = k.shape[1]
    heads_out = v.shape[-1]
    result = torch.empty(q.shape[0], q.shape[1], heads_out, dtype=torch.float32)
    starts = cu_seqlens_q.tolist()
    query = _dequant(q, q_descale)
    for index, length in enumerate(seqused_k.tolist()):
        pages = torch.tensor(_pages(block_table[index, : math.ceil(length / block)].tolist()))
        keys = _dequant(k[pages].reshape(-1, *k.shape[2:])[:length], k_descale)
        values = _dequant(v[pages].reshape(-1, *v.shape[2:])[:length], v_descale)
        rows = slice(starts[index], starts[index + 1])
        result[rows] = _attend(query[rows], keys, values, scale=softmax_scale,
                               window_left=window_size[0] if window_size else -1,
                               softcap=softcap or None, sinks=s_aux)
    if out is not None and q_v is None:
        out.copy_(result.to(out.dtype))
        return out
    return result.to(torch.bfloat16)


def get_scheduler_metadata(**arguments: Any) -> Any:
    """A stand-in for FA3's ahead-of-time schedule: records that it was asked for."""
    assert arguments["cache_seqlens"] is not None
    return torch.zeros(1 + 4 * arguments["batch_size"], dtype=torch.int32)


def flash_mla_with_kvcache(*, q: Any, k_cache: Any, block_table: Any, cache_seqlens: Any,
                           head_dim_v: int, tile_scheduler_metadata: Any,
                           softmax_scale: float, causal: bool, is_fp8_kvcache: bool) -> Any:
    """FlashMLA's dense decode: q (batch, 1, heads, d), latent cache (pages, block, 1, d)."""
    del tile_scheduler_metadata, is_fp8_kvcache
    batch, _, heads, _ = q.shape
    cu = torch.arange(batch + 1, dtype=torch.int32)
    out = flash_attn_varlen_func(
        q=q[..., head_dim_v:].reshape(batch, heads, -1), k=k_cache[..., head_dim_v:],
        v=k_cache[..., :head_dim_v], q_v=q[..., :head_dim_v].reshape(batch, heads, -1),
        cu_seqlens_q=cu, max_seqlen_q=1, seqused_k=cache_seqlens, max_seqlen_k=0,
        softmax_scale=softmax_scale, causal=causal, window_size=[-1, -1],
        block_table=block_table, softcap=0.0)
    return out.reshape(batch, 1, heads, head_dim_v)


class _Wrapper:
    def __init__(self, float_workspace_buffer: Any, kv_layout: str = "NHD", **_: Any) -> None:
        self.layout = kv_layout
        self._backend = "torch-double"

    def _store(self, qo_indptr: list[int], indptr: Any, indices: Any, last: Any,
               page_size: int, kwargs: dict[str, Any]) -> None:
        assert kwargs["q_data_type"] is not None and kwargs["kv_data_type"] is not None
        self.qo_indptr = qo_indptr
        self.indptr, self.indices, self.last = indptr.tolist(), indices.tolist(), last.tolist()
        self.page_size = page_size
        self.window_left = kwargs["window_left"]
        self.softcap = kwargs["logits_soft_cap"]
        self.scale = kwargs["sm_scale"]
        self.q_dtype = kwargs["q_data_type"]

    def run(self, q: Any, paged_kv_cache: Any, *, out: Any, q_scale: float = 1.0,
            k_scale: float = 1.0, v_scale: float = 1.0, sinks: Any = None) -> Any:
        assert q.dtype == self.q_dtype, (q.dtype, self.q_dtype)
        keys, values = paged_kv_cache[:, 0], paged_kv_cache[:, 1]
        if self.layout == "HND":
            keys, values = keys.transpose(1, 2), values.transpose(1, 2)
        query = q.float() * _scale(q_scale)
        for index, last in enumerate(self.last):
            pages = _pages(self.indices[self.indptr[index]:self.indptr[index + 1]])
            length = (len(pages) - 1) * self.page_size + last
            k = keys[pages].reshape(-1, *keys.shape[2:])[:length].float() * _scale(k_scale)
            v = values[pages].reshape(-1, *values.shape[2:])[:length].float() * _scale(v_scale)
            rows = slice(self.qo_indptr[index], self.qo_indptr[index + 1])
            out[rows] = _attend(query[rows], k, v, scale=self.scale,
                                window_left=self.window_left, softcap=self.softcap,
                                sinks=sinks).to(out.dtype)
        return out


class DecodeWrapper(_Wrapper):
    def __init__(self, float_workspace_buffer: Any, kv_layout: str = "NHD", *,
                 use_tensor_cores: bool = False, use_cuda_graph: bool = False,
                 paged_kv_indptr_buffer: Any = None, paged_kv_indices_buffer: Any = None,
                 paged_kv_last_page_len_buffer: Any = None, **kwargs: Any) -> None:
        assert use_tensor_cores, "vLLM builds its decode wrapper with tensor cores"
        assert not use_cuda_graph or paged_kv_indptr_buffer is not None
        self._buffers = (paged_kv_indptr_buffer, paged_kv_indices_buffer,
                         paged_kv_last_page_len_buffer)
        super().__init__(float_workspace_buffer, kv_layout, **kwargs)

    def plan(self, *, indptr: Any, indices: Any, last_page_len: Any, num_qo_heads: int,
             num_kv_heads: int, head_dim: int, page_size: int, **kwargs: Any) -> None:
        if self._buffers[0] is not None:  # graph mode: plan() fills the fixed buffers
            for buffer, values in zip(self._buffers, (indptr, indices, last_page_len),
                                      strict=True):
                buffer[:len(values)] = values
        self._store(list(range(len(last_page_len) + 1)), indptr, indices, last_page_len,
                    page_size, kwargs)


class PrefillWrapper(_Wrapper):
    def plan(self, *, qo_indptr: Any, paged_kv_indptr: Any, paged_kv_indices: Any,
             paged_kv_last_page_len: Any, num_qo_heads: int, num_kv_heads: int,
             head_dim_qk: int, page_size: int, causal: bool, **kwargs: Any) -> None:
        assert causal
        # like FlashInfer, read the kv indptr as absolute offsets into the shared indices
        self._store(qo_indptr.tolist(), paged_kv_indptr, paged_kv_indices,
                    paged_kv_last_page_len, page_size, kwargs)


class FakeFlashInfer:
    BatchDecodeWithPagedKVCacheWrapper = DecodeWrapper
    BatchPrefillWithPagedKVCacheWrapper = PrefillWrapper


def _spec(spec_id: str, backends: list[str], entry_points: list[str]) -> ProviderSpec:
    return ProviderSpec(id=spec_id, backends=backends, kind="module", module="paged_torch",
                        entry_points={name: name for name in entry_points})


FAKE_FA = Provider(_spec("paged_torch", ["FLASH_ATTN", "FLASH_ATTN_MLA"],
                         ["flash_attn_varlen_func", "get_scheduler_metadata"]),
                   "paged_torch test double",
                   {"flash_attn_varlen_func": flash_attn_varlen_func,
                    "get_scheduler_metadata": get_scheduler_metadata})
FAKE_FLASHINFER = Provider(_spec("flashinfer", ["FLASHINFER"], []), "FlashInfer test double",
                           {})
FAKE_FLASHMLA = Provider(_spec("paged_torch_mla", ["FLASHMLA"], ["flash_mla_with_kvcache"]),
                         "FlashMLA test double",
                         {"flash_mla_with_kvcache": flash_mla_with_kvcache})


def cpu_machine() -> SmokeMachine:
    """The smoke runner on the CPU with these doubles (measure off, no full graphs)."""
    choices = {"FLASH_ATTN": FAKE_FA, "FLASH_ATTN_MLA": FAKE_FA, "FLASHINFER": FAKE_FLASHINFER,
               "FLASHMLA": FAKE_FLASHMLA}
    return SmokeMachine(torch, torch.device("cpu"), "CPU test double",
                        lambda plan: ProviderChoice(choices[plan.backend]),
                        flashinfer=FakeFlashInfer)
