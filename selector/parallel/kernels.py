"""Attention calls that return the log-sum-exp, as vLLM's DCP path makes them.

Two calls per backend, each returning ``(out, lse)`` with ``out`` ``(tokens, heads,
dim)`` and ``lse`` ``(tokens, heads)`` float32 in the kernel's own base:

* ``paged(q, cache, call)`` -- attention over a paged cache (``seqused_k`` lengths, a
  block table; causal bottom-right or, for DCP's context part, non-causal);
* ``ragged(q, k, v, cu_seqlens)`` -- the new tokens attending to themselves, causally.

Implementations:

* :class:`TorchAttention` -- plain torch (the stand-in for CPU tests; any device);
  returns the LSE in the base it is told (the backend's, or a wrong one on purpose);
* :class:`FlashAttentionLse` -- vLLM's ``flash_attn_varlen_func`` (``vllm.vllm_flash_attn``),
  else vLLM's compiled ``_vllm_fa3_C`` loaded from ``$VLLM_KERNELS_DIR``, else
  ``flash_attn_interface`` (FA3); ``return_softmax_lse=True``; LSE natural log,
  ``(heads, tokens)`` (vLLM transposes it: ``flash_attn.py:1618``);
* :class:`FlashInferLse` -- FlashInfer's decode wrapper with ``use_tensor_cores=True``
  (as vLLM 0.33.0 builds it) for single-token rows, the paged prefill wrapper for
  longer rows and the ragged prefill wrapper for new tokens (vLLM's
  ``BatchDCPPrefillWrapper``, ``flashinfer.py:426-550``), all with ``return_lse=True``;
  LSE base 2 (FlashInfer 0.7.2 ``prefill.py:4084-4089``: "log2 (default, FlashInfer's
  convention)").

torch and the kernel libraries are imported inside functions only.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from selector.errors import CannotRunHereError
from selector.smoke.tensors import PagedKvCache, torch_dtype

__all__ = [
    "ADAPTERS",
    "FlashAttentionLse",
    "FlashInferLse",
    "LseAttention",
    "PagedCall",
    "TorchAttention",
    "load_lse_attention",
]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any

_LN_2 = math.log(2.0)
_WORKSPACE_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class PagedCall:
    """One paged attention call: per request its query rows, KV length and pages."""

    cu_seqlens_q: list[int]
    kv_lens: list[int]
    block_table: list[list[int]]
    block_size: int
    causal: bool
    window_left: int | None = None
    softcap: float | None = None

    @property
    def max_q(self) -> int:
        return max(b - a for a, b in pairwise(self.cu_seqlens_q))

    @property
    def max_k(self) -> int:
        return max(self.kv_lens) if self.kv_lens else 0

    def padded_table(self) -> list[list[int]]:
        width = max([1, *(len(row) for row in self.block_table)])
        return [row + [0] * (width - len(row)) for row in self.block_table]


class LseAttention(Protocol):
    label: str
    lse_base: str

    def paged(self, queries: Tensor, cache: PagedKvCache, call: PagedCall
              ) -> tuple[Tensor, Tensor]: ...

    def ragged(self, queries: Tensor, keys: Tensor, values: Tensor, cu_seqlens: list[int],
               *, softcap: float | None) -> tuple[Tensor, Tensor]: ...


def _attend(torch: Torch, q: Tensor, k: Tensor, v: Tensor, *, causal: bool,
            window_left: int | None, softcap: float | None) -> tuple[Tensor, Tensor]:
    """Float32 attention of ``q`` (rows at the end of the keys) and its natural LSE."""
    if k.shape[0] == 0:
        return (torch.zeros(q.shape, dtype=torch.float32, device=q.device),
                torch.full(q.shape[:2], float("-inf"), device=q.device))
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) / math.sqrt(q.shape[-1])
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    q_len, kv_len = q.shape[0], k.shape[0]
    query_pos = torch.arange(kv_len - q_len, kv_len, device=q.device)
    key_pos = torch.arange(kv_len, device=q.device)
    visible = torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device)
    if causal:
        visible &= key_pos[None, :] <= query_pos[:, None]
    if window_left is not None and window_left >= 0:
        visible &= key_pos[None, :] >= query_pos[:, None] - window_left
    scores = scores.masked_fill(~visible[None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)
    return out, lse.transpose(0, 1)


class TorchAttention:
    """Plain-torch paged attention returning its LSE in ``lse_base`` (a test stand-in)."""

    def __init__(self, torch: Torch, lse_base: str) -> None:
        self.torch = torch
        self.lse_base = lse_base
        self.label = f"torch stand-in (LSE base {lse_base})"

    def _in_base(self, lse: Tensor) -> Tensor:
        return lse / _LN_2 if self.lse_base == "2" else lse

    def paged(self, queries: Tensor, cache: PagedKvCache, call: PagedCall
              ) -> tuple[Tensor, Tensor]:
        torch = self.torch
        outs, lses = [], []
        starts = call.cu_seqlens_q
        for index, length in enumerate(call.kv_lens):
            q = queries[starts[index]:starts[index + 1]]
            keys, values = cache.gather(torch, call.block_table[index] or [0], length)
            out, lse = _attend(torch, q, keys[:length], values[:length], causal=call.causal,
                               window_left=call.window_left, softcap=call.softcap)
            outs.append(out.to(queries.dtype))
            lses.append(lse)
        return torch.cat(outs), self._in_base(torch.cat(lses))

    def ragged(self, queries: Tensor, keys: Tensor, values: Tensor, cu_seqlens: list[int],
               *, softcap: float | None) -> tuple[Tensor, Tensor]:
        torch = self.torch
        outs, lses = [], []
        for start, stop in pairwise(cu_seqlens):
            out, lse = _attend(torch, queries[start:stop], keys[start:stop],
                               values[start:stop], causal=True, window_left=None,
                               softcap=softcap)
            outs.append(out.to(queries.dtype))
            lses.append(lse)
        return torch.cat(outs), self._in_base(torch.cat(lses))


def _int32(torch: Torch, values: list[int], device: Any) -> Tensor:
    return torch.tensor(values, dtype=torch.int32, device=device)


def _fa3_compiled_op(torch: Torch) -> Any:
    """``torch.ops._vllm_fa3_C.fwd`` from ``$VLLM_KERNELS_DIR`` (see shared/gpu)."""
    namespace = torch.ops._vllm_fa3_C
    if not hasattr(namespace, "fwd"):
        root = os.environ.get("VLLM_KERNELS_DIR")
        if not root:
            raise ImportError("VLLM_KERNELS_DIR is not set")
        found = sorted(Path(root).rglob("_vllm_fa3_C*.so"))
        if not found:
            raise ImportError(f"no _vllm_fa3_C*.so under {root}")
        torch.ops.load_library(str(found[0]))
    return namespace.fwd.default


def _bind_by_schema(torch: Torch, op: Any, values: dict[str, Any]) -> list[Any]:
    """Positional arguments for ``op`` from ``values`` by the op schema's names; optional
    arguments not given are None (the vLLM 0.25.1 build's schema is recorded in
    tests/fixtures/kernel_contract/vllm-0.25.1-_vllm_fa3_C-schemas.txt)."""
    bound = []
    for argument in op._schema.arguments:
        if argument.name in values:
            bound.append(values[argument.name])
        elif isinstance(argument.type, torch._C.OptionalType):
            bound.append(None)
        else:
            raise TypeError(f"no value for the op argument {argument.name!r} ({op._schema})")
    return bound


class FlashAttentionLse:
    """FlashAttention 3 with ``return_softmax_lse`` (natural-log LSE)."""

    lse_base = "e"
    CALLS = {
        "paged": "flash_attn_varlen_func(q, key_cache, value_cache, cu_seqlens_q, "
                 "seqused_k=<kv_lens>, block_table, causal=<causal>, softcap, "
                 "return_softmax_lse=True, fa_version=3) -> (out, lse[heads, tokens])",
        "ragged": "flash_attn_varlen_func(q, k_new, v_new, cu_seqlens_q, cu_seqlens_k="
                  "cu_seqlens_q, causal=True, return_softmax_lse=True, fa_version=3)",
    }

    def __init__(self, torch: Torch, device: Any) -> None:
        self.torch, self.device = torch, device
        problems: list[str] = []
        self._varlen: Any = None
        self._op: Any = None
        try:
            module = importlib.import_module("vllm.vllm_flash_attn")
            self._varlen = module.flash_attn_varlen_func
            self.label = "FA3 (vllm.vllm_flash_attn.flash_attn_varlen_func)"
            return
        except Exception as error:  # a broken install raises more than ImportError
            problems.append(f"vllm.vllm_flash_attn: {type(error).__name__}: {error}")
        try:
            self._op = _fa3_compiled_op(torch)
            self.label = "FA3 (vLLM's _vllm_fa3_C from VLLM_KERNELS_DIR)"
            return
        except Exception as error:
            problems.append(f"_vllm_fa3_C: {type(error).__name__}: {error}")
        raise CannotRunHereError(
            "the FLASH_ATTN shard check needs FlashAttention 3 with return_softmax_lse "
            f"(vLLM's kernels); none loaded: {'; '.join(p[:160] for p in problems)}")

    def _call(self, q: Tensor, k: Tensor, v: Tensor, *, cu_seqlens_q: Tensor,
              max_q: int, max_k: int, seqused_k: Tensor | None, cu_seqlens_k: Tensor | None,
              block_table: Tensor | None, causal: bool, window_left: int | None,
              softcap: float | None) -> tuple[Tensor, Tensor]:
        scale = 1.0 / math.sqrt(q.shape[-1])
        window = [-1, -1] if window_left is None else [window_left, 0 if causal else -1]
        if self._varlen is not None:
            out, lse = self._varlen(
                q=q, k=k, v=v, max_seqlen_q=max_q, cu_seqlens_q=cu_seqlens_q,
                max_seqlen_k=max_k, cu_seqlens_k=cu_seqlens_k, seqused_k=seqused_k,
                softmax_scale=scale, causal=causal, window_size=window,
                softcap=softcap or 0.0, block_table=block_table, return_softmax_lse=True,
                fa_version=3)
        else:
            # the names vLLM's own wrapper fills (vllm_flash_attn/flash_attn_interface.py,
            # 0.33.0:388-424): paged KV through page_table + seqused_k, or ragged KV
            # through cu_seqlens_k; no split override (num_splits 0), no rotary, no cp
            values = {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q,
                      "cu_seqlens_k": cu_seqlens_k, "seqused_k": seqused_k,
                      "max_seqlen_q": max_q, "max_seqlen_k": max_k, "page_table": block_table,
                      "softmax_scale": scale, "is_causal": causal,
                      "window_size_left": window[0], "window_size_right": window[1],
                      "softcap": softcap or 0.0, "is_rotary_interleaved": True,
                      "num_splits": 0, "sm_margin": 0, "cp_world_size": 1, "cp_rank": 0}
            out, lse, *_ = self._op(*_bind_by_schema(self.torch, self._op, values))
        return out, lse.transpose(0, 1).float()

    def paged(self, queries: Tensor, cache: PagedKvCache, call: PagedCall
              ) -> tuple[Tensor, Tensor]:
        torch, device = self.torch, self.device
        table = call.padded_table()
        return self._call(
            queries.contiguous(), cache.key, cache.value,
            cu_seqlens_q=_int32(torch, call.cu_seqlens_q, device), max_q=call.max_q,
            max_k=max(call.max_k, 1), seqused_k=_int32(torch, call.kv_lens, device),
            cu_seqlens_k=None,
            block_table=_int32(torch, [v for row in table for v in row], device).reshape(
                len(table), -1),
            causal=call.causal, window_left=call.window_left, softcap=call.softcap)

    def ragged(self, queries: Tensor, keys: Tensor, values: Tensor, cu_seqlens: list[int],
               *, softcap: float | None) -> tuple[Tensor, Tensor]:
        cu = _int32(self.torch, cu_seqlens, self.device)
        longest = max(b - a for a, b in pairwise(cu_seqlens))
        return self._call(queries.contiguous(), keys.contiguous(), values.contiguous(),
                          cu_seqlens_q=cu, max_q=longest, max_k=longest, seqused_k=None,
                          cu_seqlens_k=cu, block_table=None, causal=True, window_left=None,
                          softcap=softcap)


class FlashInferLse:
    """FlashInfer wrappers as vLLM 0.33.0 builds them, each run with ``return_lse``."""

    lse_base = "2"
    CALLS = {
        "paged": "decodes: BatchDecodeWithPagedKVCacheWrapper(workspace, layout, "
                 "use_tensor_cores=True).plan(indptr, indices, last_page_len, ...) .run(q, "
                 "kv_cache, return_lse=True); longer rows: BatchPrefillWithPagedKVCacheWrapper"
                 "(workspace, layout).plan(qo_indptr, ..., causal=<causal>) .run(q, kv_cache, "
                 "return_lse=True) -> (out, lse[tokens, heads], base 2)",
        "ragged": "BatchPrefillWithRaggedKVCacheWrapper(workspace, 'NHD').plan(qo_indptr, "
                  "kv_indptr, ..., causal=True) .run(q, k_new, v_new, return_lse=True)",
    }

    def __init__(self, torch: Torch, device: Any, *, kv_layout: str, dtype: str) -> None:
        try:
            self.flashinfer = importlib.import_module("flashinfer")
        except Exception as error:
            raise CannotRunHereError(
                f"the FLASHINFER shard check needs flashinfer-python ({type(error).__name__}: "
                f"{error})") from None
        self.torch, self.device, self.layout = torch, device, kv_layout
        self.dtype = torch_dtype(torch, dtype)
        self.label = f"FlashInfer {getattr(self.flashinfer, '__version__', '?')} " \
                     "(decode with tensor cores)"
        self._wrappers: dict[str, Any] = {}

    def _wrapper(self, kind: str) -> Any:
        """One wrapper (and workspace) per kind, created once and planned per call."""
        if kind not in self._wrappers:
            fi = self.flashinfer
            workspace = self.torch.zeros(_WORKSPACE_BYTES, dtype=self.torch.uint8,
                                         device=self.device)
            if kind == "decode":
                wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace, self.layout,
                                                                use_tensor_cores=True)
            elif kind == "prefill":
                wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(workspace, self.layout)
            else:  # new tokens as (tokens, heads, dim) rows: NHD
                wrapper = fi.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD")
            self._wrappers[kind] = wrapper
        return self._wrappers[kind]

    def _shared(self, head_size: int, call_softcap: float | None,
                window_left: int | None) -> dict[str, Any]:
        return {"q_data_type": self.dtype, "kv_data_type": self.dtype,
                "sm_scale": 1.0 / math.sqrt(head_size), "logits_soft_cap": call_softcap,
                "window_left": -1 if window_left is None else window_left}

    def _csr(self, call: PagedCall, rows: list[int]) -> tuple[Tensor, Tensor, Tensor]:
        torch = self.torch
        indptr, indices, last = [0], [], []
        for index in rows:
            length = call.kv_lens[index]
            pages = call.block_table[index][: -(-length // call.block_size)]
            indices.extend(pages)
            indptr.append(indptr[-1] + len(pages))
            last.append(length - (len(pages) - 1) * call.block_size if pages else 0)
        # plan() reads these on the host (as vLLM passes them: flashinfer.py:1543-1549)
        return (_int32(torch, indptr, "cpu"), _int32(torch, indices, "cpu"),
                _int32(torch, last, "cpu"))

    def paged(self, queries: Tensor, cache: PagedKvCache, call: PagedCall
              ) -> tuple[Tensor, Tensor]:
        torch = self.torch
        q_heads, head_size = int(queries.shape[1]), int(queries.shape[2])
        kv_heads = int(cache.key.shape[2])
        starts = call.cu_seqlens_q
        lengths = [b - a for a, b in pairwise(starts)]
        decodes = [i for i, n in enumerate(lengths) if n == 1]
        prefills = [i for i, n in enumerate(lengths) if n > 1]
        if decodes != list(range(len(decodes))):
            raise ValueError("FlashInfer runs decodes first: reorder the batch")
        out = torch.empty_like(queries)
        lse = torch.empty(queries.shape[:2], dtype=torch.float32, device=self.device)
        shared = self._shared(head_size, call.softcap, call.window_left)
        split = len(decodes)
        if decodes:
            wrapper = self._wrapper("decode")
            indptr, indices, last = self._csr(call, decodes)
            wrapper.plan(indptr, indices, last, q_heads, kv_heads, head_size, call.block_size,
                         **shared)
            o, s = wrapper.run(queries[:split].contiguous(), cache.storage, return_lse=True)
            out[:split], lse[:split] = o, s
        if prefills:
            wrapper = self._wrapper("prefill")
            indptr, indices, last = self._csr(call, prefills)
            qo = [starts[i] - starts[split] for i in prefills] + [starts[-1] - starts[split]]
            wrapper.plan(_int32(torch, qo, "cpu"), indptr, indices, last, q_heads,
                         kv_heads, head_size, call.block_size, causal=call.causal, **shared)
            o, s = wrapper.run(queries[starts[split]:].contiguous(), cache.storage,
                               return_lse=True)
            out[starts[split]:], lse[starts[split]:] = o, s
        return out, lse

    def ragged(self, queries: Tensor, keys: Tensor, values: Tensor, cu_seqlens: list[int],
               *, softcap: float | None) -> tuple[Tensor, Tensor]:
        wrapper = self._wrapper("ragged")
        indptr = _int32(self.torch, cu_seqlens, "cpu")
        wrapper.plan(indptr, indptr, int(queries.shape[1]), int(keys.shape[1]),
                     int(queries.shape[2]), causal=True,
                     **self._shared(int(queries.shape[2]), softcap, None))
        out, lse = wrapper.run(queries.contiguous(), keys.contiguous(), values.contiguous(),
                               return_lse=True)
        return out, lse.float()


def load_lse_attention(torch: Torch, backend: str, device: Any, *, kernels: str,
                       lse_base: str, kv_layout: str, dtype: str) -> LseAttention:
    """The ``(out, lse)`` attention for ``backend``: the real kernels (``kernels='native'``)
    or the torch stand-in returning the LSE in ``lse_base`` (``kernels='torch'``)."""
    if kernels == "torch":
        return TorchAttention(torch, lse_base)
    if ADAPTERS[backend] is FlashAttentionLse:
        return FlashAttentionLse(torch, device)
    return FlashInferLse(torch, device, kv_layout=kv_layout, dtype=dtype)


ADAPTERS: dict[str, type[FlashAttentionLse] | type[FlashInferLse]] = {
    "FLASH_ATTN": FlashAttentionLse, "FLASHINFER": FlashInferLse}
"""The real-kernel adapter per backend."""
