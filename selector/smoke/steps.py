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
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from selector.smoke.batch import BatchSpec
from selector.smoke.contract import Dtype, TensorRef, query_dtype, resolve_calls
from selector.smoke.flashinfer_jit import Call, compile_planned_variants
from selector.smoke.metadata import (
    FlashAttentionMetadata,
    FlashInferMetadata,
    build_flash_attn_metadata,
    build_flashinfer_metadata,
)
from selector.smoke.plan import SmokePlan
from selector.smoke.providers import Provider, materialize
from selector.smoke.tensors import PagedKvCache

__all__ = ["FlashAttentionStep", "FlashInferStep", "FlashInferWrappers", "TimedLaunch", "quantize_query"]

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


def _flash_attn_tensors(torch: Torch, metadata: Any, device: Any,
                        block_table_width: int | None = None
                        ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """FlashAttention's metadata as device tensors: ``cu_seqlens_q``, ``seqused_k``, the
    block table (rows padded with page 0 to ``block_table_width`` or the widest row) and
    the slot mapping."""
    width = max(block_table_width or 0, len(metadata.block_table[0]))
    rows = [row + [0] * (width - len(row)) for row in metadata.block_table]
    block_table = _int32(torch, [value for row in rows for value in row],
                         device).reshape(len(rows), width)
    slot_mapping = torch.tensor(metadata.common.slot_mapping, device=device, dtype=torch.long)
    return (_int32(torch, metadata.cu_seqlens_q, device),
            _int32(torch, metadata.seqused_k, device), block_table, slot_mapping)


def quantize_query(torch: Torch, queries: Tensor, dtype: Dtype, q_scale: float) -> Tensor:
    """The query in the dtype the kernel is handed (fp8: divided by the per-tensor scale)."""
    target = getattr(torch, dtype.name)
    if queries.dtype == target:
        return queries
    if dtype.name.startswith("float8"):
        return (queries.float() / q_scale).to(target)
    return queries.to(target)


def _descale(torch: Torch, value: float, rows: int, heads: int, device: Any) -> Tensor:
    """``layer._k_scale.expand(descale_shape)``: one float32 scale per (sequence, kv head)."""
    return torch.full((1, 1), value, dtype=torch.float32, device=device).expand(rows, heads)


class FlashAttentionStep:
    """FlashAttention: the common metadata renamed, one call for every request, made with
    exactly the arguments the engine's kernel call contract lists."""

    def __init__(self, torch: Torch, provider: Provider, plan: SmokePlan,
                 batch: BatchSpec, device: Any, *, block_table_width: int | None = None,
                 graph_capture: bool = False) -> None:
        self.torch = torch
        self.provider = provider
        self.implementation = provider
        self.plan = plan
        self.batch = batch
        self.device = device
        self.metadata = build_flash_attn_metadata(batch)
        (self.cu_seqlens_q, self.seqused_k, self.block_table,
         self.slot_mapping) = _flash_attn_tensors(torch, self.metadata, device, block_table_width)
        self.token_order: list[int] | None = None
        self.calls = {call.name: call for call in resolve_calls(
            plan, batch, graph_capture=graph_capture)}
        self.query_dtype = query_dtype(plan)
        heads, count = plan.num_kv_heads, len(batch.requests)
        self.descales = {"q_descale": _descale(torch, plan.q_scale, count, heads, device),
                         "k_descale": _descale(torch, plan.k_scale, count, heads, device),
                         "v_descale": _descale(torch, plan.v_scale, count, heads, device)}
        self.notes: list[str] = []
        self.scheduler_metadata: Tensor | None = None
        schedule = self.calls.get("scheduler_metadata")
        if schedule is not None:
            if schedule.entry_point in provider.entries:
                self.scheduler_metadata = provider.call(schedule.entry_point, materialize(
                    schedule.arguments(), self._tensors(), torch))
            else:
                self.notes.append(f"{provider.label} has no {schedule.entry_point}: ran "
                                  "without vLLM's ahead-of-time schedule")

    def _tensors(self) -> dict[str, Any]:
        return {"cu_seqlens_q": self.cu_seqlens_q, "seqused_k": self.seqused_k,
                "block_table": self.block_table, **self.descales,
                "scheduler_metadata": self.scheduler_metadata}

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

    def run(self, queries: Tensor, cache: PagedKvCache, sinks: Tensor | None = None
            ) -> Tensor:
        """Attention output for ``queries`` (scheduler order) in scheduler order."""
        torch, plan = self.torch, self.plan
        query = quantize_query(torch, queries, self.query_dtype, plan.q_scale)
        out = torch.empty(queries.shape, dtype=getattr(torch, plan.dtype), device=queries.device)
        call = self.calls["attention"]
        tensors = {**self._tensors(), "query": query, "key_cache": cache.key,
                   "value_cache": cache.value, "out": out, "sinks": sinks}
        result = self.provider.call(call.entry_point, materialize(call.arguments(), tensors,
                                                                   torch))
        return out if result is None else result

    def timed_launches(self, queries: Tensor, cache: PagedKvCache,
                       sinks: Tensor | None = None) -> list[TimedLaunch]:
        return [TimedLaunch("whole batch, 1 call", lambda: self.run(queries, cache, sinks),
                            self.batch, "attention")]


class FlashInferWrappers:
    """A group's decode and prefill wrappers and workspaces, created once, planned per step,
    constructed with the contract's ``construct`` arguments (tensor cores for decode...)."""

    def __init__(self, torch: Torch, flashinfer: Any, plan: SmokePlan, device: Any,
                 *, graph_capture: bool = False, buffers: dict[str, Tensor] | None = None,
                 phases: tuple[str, ...] = ("decode", "prefill")) -> None:
        self.torch = torch
        self.calls = {call.phase or call.name: call
                      for call in resolve_calls(plan, graph_capture=graph_capture)
                      if (call.phase or call.name) in phases}
        self.flashinfer = flashinfer
        self.workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        tensors = {"workspace": self.workspace, **(buffers or {})}
        self.wrappers: dict[str, Any] = {}
        self.construct: dict[str, dict[str, Any]] = {}
        for phase, call in self.calls.items():
            self.construct[phase] = materialize(call.arguments("construct"), tensors, torch)
            self.wrappers[phase] = getattr(flashinfer, call.entry_point)(**self.construct[phase])
        self.variant_notes: list[str] | None = None
        """What :meth:`compile_variants` compiled (None: not asked yet)."""

    @property
    def decode(self) -> Any:
        return self.wrappers["decode"]

    @property
    def prefill(self) -> Any:
        return self.wrappers["prefill"]

    @property
    def prefill_backend(self) -> str:
        """The prefill kernel family FlashInfer resolved (``auto`` becomes fa2 or fa3)."""
        return str(getattr(self.prefill, "_backend", "unknown"))

    def compile_variants(self, tensors: dict[str, Any], phases: list[str]) -> list[str]:
        """Compile, before the first plan, only the FlashInfer kernel variants the phases'
        calls run (:mod:`selector.smoke.flashinfer_jit`); notes for the report."""
        if self.variant_notes is None:
            self.variant_notes = compile_planned_variants(
                self.flashinfer, *self.variant_calls(tensors, phases))
        return self.variant_notes

    def variant_calls(self, tensors: dict[str, Any], phases: list[str]
                      ) -> tuple[dict[str, Call], dict[str, tuple[str, dict[str, Any]]]]:
        """The wrapper calls :meth:`compile_variants` reduces FlashInfer's modules for:
        the phases' calls (entry point, construct and plan() arguments), and the other
        phases' entry points with their literal plan() arguments (``later``)."""
        later = {phase: (call.entry_point, {
                     name: value for name, value in call.arguments("plan").items()
                     if not isinstance(value, TensorRef)})
                 for phase, call in self.calls.items() if phase not in phases}
        return {phase: (self.calls[phase].entry_point, self.construct[phase],
                        materialize(self.calls[phase].arguments("plan"), tensors, self.torch))
                for phase in phases}, later

    def plan(self, phase: str, tensors: dict[str, Any]) -> None:
        call = self.calls[phase]
        self.wrappers[phase].plan(**materialize(call.arguments("plan"), tensors, self.torch))

    def run(self, phase: str, tensors: dict[str, Any]) -> Any:
        call = self.calls[phase]
        return self.wrappers[phase].run(**materialize(call.arguments("run"), tensors,
                                                      self.torch))

    def query_dtype(self, phase: str) -> Dtype:
        value = self.calls[phase].arguments("plan").get("q_data_type")
        return value if isinstance(value, Dtype) else Dtype("bfloat16")


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
        self.notes: list[str] = []

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

    def _seq_lens(self, indptr: Tensor, last: Tensor) -> Tensor:
        block = self.batch.block_size
        return ((indptr[1:] - indptr[:-1] - 1) * block + last).to(self.torch.int32)

    def plan_tensors(self) -> dict[str, Any]:
        return {"decode_indptr": self.decode_indptr, "decode_indices": self.indices,
                "decode_last_page_len": self.decode_last_page_len,
                "decode_seq_lens": self._seq_lens(self.decode_indptr, self.decode_last_page_len)
                if self.metadata.num_decodes else None,
                "qo_indptr": self.qo_indptr, "prefill_indptr": self.prefill_indptr,
                "prefill_indices": self.indices,
                "prefill_last_page_len": self.prefill_last_page_len,
                "prefill_seq_lens": self._seq_lens(self.prefill_indptr,
                                                   self.prefill_last_page_len)
                if self.metadata.num_prefills else None}

    def phases(self) -> list[str]:
        """The phases this step's batch has (decode first)."""
        return [phase for phase, present in (("decode", self.metadata.num_decodes),
                                             ("prefill", self.metadata.num_prefills))
                if present]

    def plan_kernels(self) -> None:
        """Plan both wrappers once for this batch (FlashInfer JIT-compiles on first use).

        First only the kernel variants the calls run are compiled, the modules side by side
        (:meth:`FlashInferWrappers.compile_variants`). The decode (tensor-core) and prefill
        wrappers load different JIT modules, each under its own file lock: a first plan of
        both runs them side by side (a module left to FlashInfer's whole build compiles
        then, overlapped); the wrappers are then planned again one after the other, so their
        state is that of a plain serial plan."""
        tensors = self.plan_tensors()
        phases = self.phases()
        self.notes = self.wrappers.compile_variants(tensors, phases)
        if len(phases) == 2:
            self._plan_side_by_side(tensors)
        for phase in phases:
            self.wrappers.plan(phase, tensors)

    def _plan_side_by_side(self, tensors: dict[str, Any]) -> None:
        """Plan decode in a thread while prefill plans here; an error in either is left
        to the serial plan that follows (which raises it)."""
        def decode() -> None:
            try:
                self.wrappers.plan("decode", tensors)
            except Exception:  # raised again by the serial plan
                return

        worker = threading.Thread(target=decode, name="attn-select-flashinfer-jit", daemon=True)
        worker.start()
        try:
            self.wrappers.plan("prefill", tensors)
        except Exception:  # raised again by the serial plan
            pass
        finally:
            worker.join()

    def run_reordered(self, queries: Tensor, cache: PagedKvCache, out: Tensor,
                      sinks: Tensor | None = None) -> Tensor:
        """Decode rows then prefill rows, both written into ``out`` (reordered order)."""
        split = self.metadata.num_decode_tokens
        q_scale = self.plan_spec.q_scale
        for phase, rows, present in (("decode", slice(0, split), self.metadata.num_decodes),
                                     ("prefill", slice(split, None), self.metadata.num_prefills)):
            if not present:
                continue
            query = quantize_query(self.torch, queries[rows], self.wrappers.query_dtype(phase),
                                   q_scale)
            self.wrappers.run(phase, {f"{phase}_query": query, "kv_cache": cache.storage,
                                      f"{phase}_out": out[rows], "sinks": sinks})
        return out

    def run(self, queries: Tensor, cache: PagedKvCache, sinks: Tensor | None = None
            ) -> Tensor:
        """Attention output for ``queries`` (scheduler order) in scheduler order."""
        reordered = queries[self.order].contiguous()
        out = self.torch.empty(reordered.shape, dtype=getattr(self.torch, self.plan_spec.dtype),
                               device=reordered.device)
        self.run_reordered(reordered, cache, out, sinks)
        return out[self.inverse]

    def _sub_batch(self, start: int, stop: int) -> BatchSpec:
        permuted = [self.batch.requests[i] for i in self.metadata.permutation[start:stop]]
        return BatchSpec(block_size=self.batch.block_size, requests=permuted)

    def timed_launches(self, queries: Tensor, cache: PagedKvCache,
                       sinks: Tensor | None = None) -> list[TimedLaunch]:
        meta = self.metadata
        reordered = queries[self.order].contiguous()
        out = self.torch.empty(reordered.shape, dtype=getattr(self.torch, self.plan_spec.dtype),
                               device=reordered.device)
        split = meta.num_decode_tokens
        q_scale = self.plan_spec.q_scale
        launches = []
        if meta.num_decodes:
            decode_query = quantize_query(self.torch, reordered[:split],
                                          self.wrappers.query_dtype("decode"), q_scale)
            decode_tensors = {"decode_query": decode_query, "kv_cache": cache.storage,
                              "decode_out": out[:split], "sinks": sinks}
            launches.append(TimedLaunch(
                f"decode ({meta.num_decodes} requests, tensor-core wrapper)",
                lambda: self.wrappers.run("decode", decode_tensors),
                self._sub_batch(0, meta.num_decodes), "decode"))
        if meta.num_prefills:
            prefill_query = quantize_query(self.torch, reordered[split:],
                                           self.wrappers.query_dtype("prefill"), q_scale)
            prefill_tensors = {"prefill_query": prefill_query, "kv_cache": cache.storage,
                               "prefill_out": out[split:], "sinks": sinks}
            launches.append(TimedLaunch(
                f"prefill ({meta.num_prefills} requests, {self.wrappers.prefill_backend})",
                lambda: self.wrappers.run("prefill", prefill_tensors),
                self._sub_batch(meta.num_decodes, len(meta.permutation)), "attention"))
        launches.append(TimedLaunch("decode + prefill", lambda: self.run_reordered(
            reordered, cache, out, sinks), self.batch, "attention"))
        return launches

    def device_seq_lens(self) -> list[int]:
        """KV lengths as FlashInfer derives them from the CSR arrays given to plan()."""
        meta = self.device_metadata()
        block = self.batch.block_size
        indptr = meta.paged_kv_indptr
        return [(indptr[i + 1] - indptr[i] - 1) * block + meta.paged_kv_last_page_len[i]
                for i in range(len(meta.paged_kv_last_page_len))]


class MlaDecodeStep:
    """MLA decode (FLASHMLA, FLASH_ATTN_MLA): absorbed queries ``(tokens, heads, kv_lora_rank
    + rope)`` over one latent cache ``(pages, block, 1, kv_lora_rank + rope)``; values are the
    first ``kv_lora_rank`` channels of the same cache. Decode requests only."""

    def __init__(self, torch: Torch, provider: Provider, plan: SmokePlan, batch: BatchSpec,
                 device: Any) -> None:
        if any(request.query_len != 1 for request in batch.requests):
            raise ValueError("the MLA decode step takes decode requests only")
        self.torch, self.provider, self.plan, self.batch = torch, provider, plan, batch
        self.implementation = provider
        self.metadata = build_flash_attn_metadata(batch)
        (self.cu_seqlens_q, self.seqused_k, self.block_table,
         self.slot_mapping) = _flash_attn_tensors(torch, self.metadata, device)
        self.token_order: list[int] | None = None
        self.calls = {call.name: call for call in resolve_calls(plan, batch)}
        self.notes: list[str] = []
        self.scheduler_metadata: Tensor | None = None
        schedule = self.calls.get("scheduler_metadata")
        if schedule is not None and schedule.entry_point in provider.entries:
            self.scheduler_metadata = provider.call(schedule.entry_point, materialize(
                schedule.arguments(), self._tensors(), torch))

    def _tensors(self) -> dict[str, Any]:
        return {"cu_seqlens_q": self.cu_seqlens_q, "seqused_k": self.seqused_k,
                "block_table": self.block_table, "scheduler_metadata": self.scheduler_metadata}

    def device_metadata(self) -> FlashAttentionMetadata:
        table = self.block_table.tolist()
        return dataclasses.replace(
            self.metadata, cu_seqlens_q=self.cu_seqlens_q.tolist(),
            seqused_k=self.seqused_k.tolist(), block_table=table,
            common=dataclasses.replace(self.metadata.common, block_table=table,
                                       slot_mapping=self.slot_mapping.tolist()))

    def device_seq_lens(self) -> list[int]:
        return [int(value) for value in self.seqused_k.tolist()]

    def run(self, queries: Tensor, cache: PagedKvCache, sinks: Tensor | None = None
            ) -> Tensor:
        del sinks
        rank = self.plan.kv_lora_rank
        tokens, heads = queries.shape[0], queries.shape[1]
        latent = cache.key
        tensors = {**self._tensors(),
                   "query": queries.reshape(tokens, 1, heads, -1),
                   "kv_c_and_k_pe_cache": latent,
                   "query_pe": queries[..., rank:], "query_nope": queries[..., :rank],
                   "k_pe_cache": latent[..., rank:], "kv_c_cache": latent[..., :rank]}
        call = self.calls["decode"]
        result = self.provider.call(call.entry_point, materialize(call.arguments(), tensors,
                                                                   self.torch))
        return result.reshape(tokens, heads, -1)

    def timed_launches(self, queries: Tensor, cache: PagedKvCache,
                       sinks: Tensor | None = None) -> list[TimedLaunch]:
        return [TimedLaunch("decode", lambda: self.run(queries, cache), self.batch, "decode")]
