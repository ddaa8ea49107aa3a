"""One batch prepared for one backend: metadata on the device, ready to run per layer.

* :class:`FlashAttentionStep` -- one varlen paged call over the whole batch;
* :class:`FlashInferStep` -- the batch reordered decode-first, a decode wrapper and a
  prefill wrapper planned once, then run for each layer; outputs are put back in the
  scheduler's token order.

Both expose ``device_metadata()``: the metadata rebuilt from what the kernels actually
receive, so the invariant checker sees the real inputs before every call.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from selector.smoke.batch import BatchSpec
from selector.smoke.environment import FlashAttentionImpl
from selector.smoke.metadata import (
    FlashAttentionMetadata,
    FlashInferMetadata,
    build_flash_attn_metadata,
    build_flashinfer_metadata,
)
from selector.smoke.plan import SmokePlan
from selector.smoke.tensors import PagedKvCache, torch_dtype

__all__ = ["FlashAttentionStep", "FlashInferStep", "FlashInferWrappers", "TimedLaunch"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any

WORKSPACE_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class TimedLaunch:
    """A kernel launch to time, and the sub-batch whose work it does."""

    name: str
    launch: Callable[[], object]
    batch: BatchSpec
    kind: str
    """``"decode"`` (report KV-read bandwidth) or ``"attention"`` (report TFLOP/s)."""


def _int32(torch: Torch, values: list[int], device: Any) -> Tensor:
    return torch.tensor(values, dtype=torch.int32, device=device)


class FlashAttentionStep:
    """FlashAttention: the common metadata renamed, one call for every request."""

    def __init__(self, torch: Torch, implementation: FlashAttentionImpl, plan: SmokePlan,
                 batch: BatchSpec, device: Any, *, block_table_width: int | None = None
                 ) -> None:
        self.torch = torch
        self.implementation = implementation
        self.plan = plan
        self.batch = batch
        self.metadata = build_flash_attn_metadata(batch)
        width = max(block_table_width or 0, len(self.metadata.block_table[0]))
        rows = [row + [0] * (width - len(row)) for row in self.metadata.block_table]
        self.cu_seqlens_q = _int32(torch, self.metadata.cu_seqlens_q, device)
        self.seqused_k = _int32(torch, self.metadata.seqused_k, device)
        self.block_table = _int32(torch, [value for row in rows for value in row],
                                  device).reshape(len(rows), width)
        self.slot_mapping = torch.tensor(self.metadata.common.slot_mapping, device=device,
                                         dtype=torch.long)
        self.token_order: list[int] | None = None

    def device_metadata(self) -> FlashAttentionMetadata:
        """The metadata as the kernel will read it (device tensors copied back)."""
        seqused = self.seqused_k.tolist()
        table = self.block_table.tolist()
        return dataclasses.replace(
            self.metadata, cu_seqlens_q=self.cu_seqlens_q.tolist(), seqused_k=seqused,
            block_table=table,
            common=dataclasses.replace(self.metadata.common, block_table=table,
                                       slot_mapping=self.slot_mapping.tolist()))

    def device_seq_lens(self) -> list[int]:
        return [int(value) for value in self.seqused_k.tolist()]

    def run(self, queries: Tensor, cache: PagedKvCache) -> Tensor:
        """Attention output for ``queries`` (scheduler order) in scheduler order."""
        plan = self.plan
        return self.implementation.call(
            queries, cache.key, cache.value, cu_seqlens_q=self.cu_seqlens_q,
            seqused_k=self.seqused_k, block_table=self.block_table,
            max_q=self.metadata.max_q, max_k=self.metadata.max_k,
            scale=1.0 / math.sqrt(plan.head_size),
            window_left=None if plan.sliding_window is None else plan.sliding_window - 1,
            softcap=plan.logits_soft_cap)

    def timed_launches(self, queries: Tensor, cache: PagedKvCache) -> list[TimedLaunch]:
        return [TimedLaunch("whole batch, 1 call", lambda: self.run(queries, cache), self.batch,
                            "attention")]


class FlashInferWrappers:
    """A group's decode and prefill wrappers and workspaces, created once, planned per step."""

    def __init__(self, torch: Torch, flashinfer: Any, plan: SmokePlan, device: Any,
                 prefill_backend: str) -> None:
        self.decode_workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self.prefill_workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self.decode = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            self.decode_workspace, plan.kv_layout)
        self.prefill = flashinfer.BatchPrefillWithPagedKVCacheWrapper(
            self.prefill_workspace, plan.kv_layout, backend=prefill_backend)

    @property
    def prefill_backend(self) -> str:
        """The prefill kernel family FlashInfer resolved (``auto`` becomes fa2 or fa3)."""
        return str(getattr(self.prefill, "_backend", "unknown"))


def flashinfer_plan_arguments(plan: SmokePlan, torch: Torch) -> dict[str, Any]:
    """Keyword arguments shared by the decode and prefill ``plan()`` calls."""
    dtype = torch_dtype(torch, plan.dtype)
    return {
        "window_left": -1 if plan.sliding_window is None else plan.sliding_window - 1,
        "logits_soft_cap": plan.logits_soft_cap,
        "q_data_type": dtype,
        "kv_data_type": dtype,
        "sm_scale": 1.0 / math.sqrt(plan.head_size),
    }


class FlashInferStep:
    """FlashInfer: decode-first reorder, CSR page table, decode + prefill plans."""

    def __init__(self, torch: Torch, wrappers: FlashInferWrappers, plan: SmokePlan,
                 batch: BatchSpec, device: Any) -> None:
        self.torch = torch
        self.wrappers = wrappers
        self.plan_spec = plan
        self.batch = batch
        self.metadata: FlashInferMetadata = build_flashinfer_metadata(
            batch, reorder_batch_threshold=plan.reorder_batch_threshold)
        meta = self.metadata
        cpu = "cpu"
        self.decode_indptr = _int32(torch, meta.decode_paged_kv_indptr, cpu)
        self.decode_last_page_len = _int32(torch, meta.decode_paged_kv_last_page_len, cpu)
        self.indices = _int32(torch, meta.paged_kv_indices, cpu)
        self.qo_indptr = _int32(torch, meta.qo_indptr, cpu)
        self.prefill_indptr = _int32(torch, meta.prefill_paged_kv_indptr, cpu)
        self.prefill_last_page_len = _int32(torch, meta.prefill_paged_kv_last_page_len, cpu)
        self.order = torch.tensor(meta.token_permutation, device=device, dtype=torch.long)
        self.inverse = torch.argsort(self.order)
        self.slot_mapping = torch.tensor(meta.common.slot_mapping, device=device,
                                         dtype=torch.long)
        self.token_order: list[int] | None = meta.token_permutation

    def device_metadata(self) -> FlashInferMetadata:
        """The metadata rebuilt from the arrays handed to ``plan()`` and the KV write."""
        meta = self.metadata
        decode_indptr = self.decode_indptr.tolist()
        prefill_indptr = self.prefill_indptr.tolist()
        decode_last = self.decode_last_page_len.tolist()
        prefill_last = self.prefill_last_page_len.tolist()
        full_indptr = decode_indptr + prefill_indptr[1:] if decode_indptr else prefill_indptr
        return dataclasses.replace(
            meta, paged_kv_indptr=full_indptr, paged_kv_indices=self.indices.tolist(),
            paged_kv_last_page_len=decode_last + prefill_last, qo_indptr=self.qo_indptr.tolist(),
            decode_paged_kv_indptr=decode_indptr, decode_paged_kv_last_page_len=decode_last,
            prefill_paged_kv_indptr=prefill_indptr, prefill_paged_kv_last_page_len=prefill_last,
            token_permutation=self.order.tolist(),
            common=dataclasses.replace(meta.common, slot_mapping=self.slot_mapping.tolist()))

    def plan_kernels(self) -> None:
        """Plan both wrappers once for this batch (FlashInfer JIT-compiles on first use)."""
        spec, meta, torch = self.plan_spec, self.metadata, self.torch
        shared = flashinfer_plan_arguments(spec, torch)
        if meta.num_decodes:
            self.wrappers.decode.plan(
                self.decode_indptr, self.indices, self.decode_last_page_len, spec.num_q_heads,
                spec.num_kv_heads, spec.head_size, spec.kernel_block_size, **shared)
        if meta.num_prefills:
            self.wrappers.prefill.plan(
                self.qo_indptr, self.prefill_indptr, self.indices, self.prefill_last_page_len,
                spec.num_q_heads, spec.num_kv_heads, spec.head_size, spec.kernel_block_size,
                causal=True, **shared)

    def run_reordered(self, queries: Tensor, cache: PagedKvCache, out: Tensor) -> Tensor:
        """Decode rows then prefill rows, both written into ``out`` (reordered order)."""
        split = self.metadata.num_decode_tokens
        if self.metadata.num_decodes:
            self.wrappers.decode.run(queries[:split], cache.storage, out=out[:split])
        if self.metadata.num_prefills:
            self.wrappers.prefill.run(queries[split:], cache.storage, out=out[split:])
        return out

    def run(self, queries: Tensor, cache: PagedKvCache) -> Tensor:
        """Attention output for ``queries`` (scheduler order) in scheduler order."""
        reordered = queries[self.order].contiguous()
        out = self.torch.empty_like(reordered)
        self.run_reordered(reordered, cache, out)
        return out[self.inverse]

    def _sub_batch(self, start: int, stop: int) -> BatchSpec:
        permuted = [self.batch.requests[i] for i in self.metadata.permutation[start:stop]]
        return BatchSpec(block_size=self.batch.block_size, requests=permuted)

    def timed_launches(self, queries: Tensor, cache: PagedKvCache) -> list[TimedLaunch]:
        meta = self.metadata
        reordered = queries[self.order].contiguous()
        out = self.torch.empty_like(reordered)
        split = meta.num_decode_tokens
        launches = []
        if meta.num_decodes:
            launches.append(TimedLaunch(
                f"decode ({meta.num_decodes} requests)",
                lambda: self.wrappers.decode.run(reordered[:split], cache.storage,
                                                 out=out[:split]),
                self._sub_batch(0, meta.num_decodes), "decode"))
        if meta.num_prefills:
            launches.append(TimedLaunch(
                f"prefill ({meta.num_prefills} requests, {self.wrappers.prefill_backend})",
                lambda: self.wrappers.prefill.run(reordered[split:], cache.storage,
                                                  out=out[split:]),
                self._sub_batch(meta.num_decodes, len(meta.permutation)), "attention"))
        launches.append(TimedLaunch("decode + prefill", lambda: self.run_reordered(
            reordered, cache, out), self.batch, "attention"))
        return launches

    def device_seq_lens(self) -> list[int]:
        """KV lengths as FlashInfer derives them from the CSR arrays given to plan()."""
        meta = self.device_metadata()
        block = self.batch.block_size
        indptr = meta.paged_kv_indptr
        return [(indptr[i + 1] - indptr[i] - 1) * block + meta.paged_kv_last_page_len[i]
                for i in range(len(meta.paged_kv_last_page_len))]
