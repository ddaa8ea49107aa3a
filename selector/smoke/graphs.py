"""Full CUDA-graph check of the decode path: capture once, replay with new data.

The decode call is captured over fixed buffers (queries, output, page table, lengths)
and a fixed KV cache. Each replay loads a new decode batch -- new lengths, new pages,
new K/V and queries -- into the same buffers, checks that every captured address is
unchanged (invariant 8) and that the metadata the graph will read satisfies the batch
invariants, replays, and compares with the float32 reference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeAlias

from selector.smoke.backend_classes import VllmBackendStep, VllmRuntime
from selector.smoke.batch import BatchRequest, BatchSpec
from selector.smoke.contract import ProviderSpec, query_dtype, resolve_calls
from selector.smoke.invariants import Violation, check_graph_addresses, check_metadata
from selector.smoke.metadata import build_flash_attn_metadata, build_flashinfer_metadata
from selector.smoke.plan import SmokeOptions, SmokePlan
from selector.smoke.providers import Provider, materialize
from selector.smoke.reference import compare, reference_attention, tolerance_for
from selector.smoke.report import CheckResult
from selector.smoke.steps import FlashInferWrappers, quantize_query
from selector.smoke.tensors import (
    PagedKvCache,
    RequestData,
    allocate_cache,
    fill_cache,
    make_request_data,
)
from selector.smoke.workload import Workload, decode_batch, graph_capacity_pages

__all__ = ["GRAPH_REQUESTS", "capacity_batch", "check_decode_graph"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any

GRAPH_REQUESTS = 8


def _addresses(buffers: dict[str, Tensor | None]) -> dict[str, int]:
    return {name: int(t.data_ptr()) for name, t in buffers.items() if t is not None}


class _GraphHarness:
    """Backend-specific buffers, loading and capture behind one interface."""

    buffers: dict[str, Tensor | None]
    output: Tensor
    sinks: Tensor | None

    def load(self, workload: Workload, data: RequestData) -> list[Violation]:
        raise NotImplementedError

    def launch(self) -> Tensor:
        raise NotImplementedError

    def current_buffers(self) -> dict[str, Tensor | None]:
        return self.buffers


def capacity_batch(block: int, width: int) -> BatchSpec:
    """The batch a decode graph is captured for: every request at the page-table capacity."""
    return BatchSpec(block_size=block, requests=[
        BatchRequest(id=f"g{index}", context_len=width * block - 1, query_len=1,
                     block_ids=list(range(1 + index * width, 1 + (index + 1) * width)))
        for index in range(GRAPH_REQUESTS)])


class _FlashAttentionHarness(_GraphHarness):
    def __init__(self, torch: Torch, provider: Provider, plan: SmokePlan,
                 cache: PagedKvCache, device: Any) -> None:
        self.torch, self.provider, self.plan, self.cache = torch, provider, plan, cache
        self.width = graph_capacity_pages(plan.kernel_block_size)
        capacity = capacity_batch(plan.kernel_block_size, self.width)
        self.calls = {call.name: call for call in resolve_calls(plan, capacity,
                                                                 graph_capture=True)}
        self.query_dtype = query_dtype(plan)
        dtype = getattr(torch, plan.dtype)
        self.queries = torch.zeros(GRAPH_REQUESTS, plan.num_q_heads, plan.head_size,
                                   dtype=self.query_dtype.torch(torch), device=device)
        self.output = torch.zeros(GRAPH_REQUESTS, plan.num_q_heads, plan.head_size,
                                  dtype=dtype, device=device)
        self.block_table = torch.zeros(GRAPH_REQUESTS, self.width, dtype=torch.int32,
                                       device=device)
        self.seqused_k = torch.zeros(GRAPH_REQUESTS, dtype=torch.int32, device=device)
        self.cu_seqlens_q = torch.arange(GRAPH_REQUESTS + 1, dtype=torch.int32, device=device)
        self.scheduler_metadata: Tensor | None = None
        self.descales = {
            f"{part}_descale": torch.full((GRAPH_REQUESTS, plan.num_kv_heads), scale,
                                          dtype=torch.float32, device=device)
            for part, scale in (("q", plan.q_scale), ("k", plan.k_scale), ("v", plan.v_scale))}
        self.sinks: Tensor | None = None
        self.buffers = {"queries": self.queries, "block_table": self.block_table,
                        "seqused_k": self.seqused_k, "cu_seqlens_q": self.cu_seqlens_q,
                        "kv_cache": cache.storage}

    def _tensors(self) -> dict[str, Any]:
        return {"cu_seqlens_q": self.cu_seqlens_q, "seqused_k": self.seqused_k,
                "block_table": self.block_table, **self.descales,
                "scheduler_metadata": self.scheduler_metadata, "query": self.queries,
                "key_cache": self.cache.key, "value_cache": self.cache.value,
                "out": self.output, "sinks": self.sinks}

    def load(self, workload: Workload, data: RequestData) -> list[Violation]:
        torch, batch = self.torch, workload.batch
        metadata = build_flash_attn_metadata(batch)
        slots = torch.tensor(metadata.common.slot_mapping, device=self.queries.device,
                             dtype=torch.long)
        fill_cache(torch, self.cache, batch, data, slots)
        rows = [row + [0] * (self.width - len(row)) for row in metadata.block_table]
        self.queries.copy_(quantize_query(torch, data.flat_queries(torch), self.query_dtype,
                                          self.plan.q_scale))
        self.block_table.copy_(torch.tensor(rows, dtype=torch.int32))
        self.seqused_k.copy_(torch.tensor(metadata.seqused_k, dtype=torch.int32))
        schedule = self.calls.get("scheduler_metadata")
        if schedule is not None and schedule.entry_point in self.provider.entries:
            # vLLM recomputes the schedule each step and copies it into the buffer the
            # captured graph reads (flash_attn.py, _store_scheduler_metadata)
            fresh = self.provider.call(schedule.entry_point, materialize(
                schedule.arguments(), self._tensors(), torch))
            if self.scheduler_metadata is None:
                self.scheduler_metadata = fresh.clone()
                self.buffers["scheduler_metadata"] = self.scheduler_metadata
            else:
                self.scheduler_metadata.copy_(fresh)
        table = self.block_table.tolist()
        seen = dataclasses.replace(
            metadata, seqused_k=self.seqused_k.tolist(), cu_seqlens_q=self.cu_seqlens_q.tolist(),
            block_table=table, max_k=max(self.seqused_k.tolist()),
            common=dataclasses.replace(metadata.common, block_table=table,
                                       slot_mapping=slots.tolist()))
        return check_metadata(batch, seen, cache_block_size=self.cache.block_size)

    def launch(self) -> Tensor:
        call = self.calls["attention"]
        result = self.provider.call(call.entry_point, materialize(
            call.arguments(), self._tensors(), self.torch))
        return self.output if result is None else result


class _VllmClassesHarness(_GraphHarness):
    """vLLM's backend classes: the builder's metadata built once for the capture batch
    (every request at the page-table capacity), its tensors refilled in place per replay;
    the impl's cache update and forward captured."""

    def __init__(self, torch: Torch, step: VllmBackendStep, cache: PagedKvCache,
                 device: Any) -> None:
        self.torch, self.step, self.cache, self.plan = torch, step, cache, step.plan
        plan = step.plan
        dtype = getattr(torch, plan.dtype)
        self.queries = torch.zeros(GRAPH_REQUESTS, plan.num_q_heads, plan.head_size,
                                   dtype=dtype, device=device)
        self.keys = torch.zeros(GRAPH_REQUESTS, plan.num_kv_heads, plan.head_size,
                                dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)
        step.stage_new_tokens(cache, self.keys, self.values)
        self.keys, self.values = step.staged(cache)
        self.sinks: Tensor | None = None
        self.buffers = {"queries": self.queries, "keys": self.keys, "values": self.values,
                        "kv_cache": cache.storage, **step.graph_buffers()}

    def load(self, workload: Workload, data: RequestData) -> list[Violation]:
        torch, batch, step = self.torch, workload.batch, self.step
        step.load_batch(batch)
        fill_cache(torch, self.cache, batch, data, step.common.slot_mapping, new_tokens=False)
        keys, values = data.new_tokens(torch, batch)
        self.keys.copy_(keys)
        self.values.copy_(values)
        self.queries.copy_(data.flat_queries(torch))
        return check_metadata(batch, step.device_metadata(),
                              cache_block_size=self.cache.block_size)

    def launch(self) -> Tensor:
        return self.step.run(self.queries, self.cache, self.sinks)


class _FlashInferHarness(_GraphHarness):
    def __init__(self, torch: Torch, flashinfer: Any, plan: SmokePlan, cache: PagedKvCache,
                 device: Any) -> None:
        self.torch, self.plan, self.cache = torch, plan, cache
        width = graph_capacity_pages(plan.kernel_block_size)
        self.indptr = torch.zeros(GRAPH_REQUESTS + 1, dtype=torch.int32, device=device)
        self.indices = torch.zeros(GRAPH_REQUESTS * width, dtype=torch.int32, device=device)
        self.last_page_len = torch.zeros(GRAPH_REQUESTS, dtype=torch.int32, device=device)
        self.wrappers = FlashInferWrappers(
            torch, flashinfer, plan, device, graph_capture=True, phases=("decode",),
            buffers={"graph_indptr": self.indptr, "graph_indices": self.indices,
                     "graph_last_page_len": self.last_page_len})
        self.workspace = self.wrappers.workspace
        self.wrapper = self.wrappers.decode
        self.query_dtype = self.wrappers.query_dtype("decode")
        self.queries = torch.zeros(GRAPH_REQUESTS, plan.num_q_heads, plan.head_size,
                                   dtype=self.query_dtype.torch(torch), device=device)
        self.output = torch.zeros(GRAPH_REQUESTS, plan.num_q_heads, plan.head_size,
                                  dtype=getattr(torch, plan.dtype), device=device)
        self.sinks: Tensor | None = None
        self.buffers = {"queries": self.queries, "output": self.output, "indptr": self.indptr,
                        "indices": self.indices, "last_page_len": self.last_page_len,
                        "workspace": self.workspace, "kv_cache": cache.storage}

    def current_buffers(self) -> dict[str, Tensor | None]:
        internal = {f"wrapper.{name}": getattr(self.wrapper, attribute, None)
                    for name, attribute in (("indptr", "_paged_kv_indptr_buf"),
                                            ("indices", "_paged_kv_indices_buf"),
                                            ("last_page_len", "_paged_kv_last_page_len_buf"))}
        return {**self.buffers, **internal}

    def load(self, workload: Workload, data: RequestData) -> list[Violation]:
        torch, plan, batch = self.torch, self.plan, workload.batch
        metadata = build_flashinfer_metadata(batch,
                                             reorder_batch_threshold=plan.reorder_batch_threshold)
        slots = torch.tensor(metadata.common.slot_mapping, device=self.queries.device,
                             dtype=torch.long)
        fill_cache(torch, self.cache, batch, data, slots,
                   token_order=metadata.token_permutation)
        order = torch.tensor(metadata.token_permutation, device=self.queries.device)
        self.queries.copy_(quantize_query(torch, data.flat_queries(torch)[order],
                                          self.query_dtype, plan.q_scale))
        indptr = torch.tensor(metadata.paged_kv_indptr, dtype=torch.int32)
        last = torch.tensor(metadata.paged_kv_last_page_len, dtype=torch.int32)
        lengths = ((indptr[1:] - indptr[:-1] - 1) * plan.kernel_block_size + last).to(torch.int32)
        self.wrappers.plan("decode", {
            "decode_indptr": indptr, "decode_last_page_len": last, "decode_seq_lens": lengths,
            "decode_indices": torch.tensor(metadata.paged_kv_indices, dtype=torch.int32)})
        count = len(metadata.paged_kv_indices)
        seen = dataclasses.replace(
            metadata, paged_kv_indptr=self.indptr.tolist(),
            paged_kv_indices=self.indices[:count].tolist(),
            paged_kv_last_page_len=self.last_page_len.tolist(),
            decode_paged_kv_indptr=self.indptr.tolist(),
            decode_paged_kv_last_page_len=self.last_page_len.tolist(),
            common=dataclasses.replace(metadata.common, slot_mapping=slots.tolist()))
        self.order = order
        return check_metadata(batch, seen, cache_block_size=self.cache.block_size)

    def launch(self) -> Tensor:
        self.wrappers.run("decode", {"decode_query": self.queries, "kv_cache": self.cache.storage,
                                     "decode_out": self.output, "sinks": self.sinks})
        return self.output


def check_decode_graph(torch: Torch, plan: SmokePlan, options: SmokeOptions, device: Any,
                       *, provider: Provider | None = None, flashinfer: Any = None,
                       vllm: tuple[VllmRuntime, ProviderSpec] | None = None,
                       progress: Callable[[str], None] = lambda _: None) -> list[CheckResult]:
    """Capture the decode path in a CUDA graph and replay it with new data; one item each
    (``vllm``: through vLLM's backend classes, the runtime and the contract's provider)."""
    block = plan.kernel_block_size
    workloads = [decode_batch(block, options.seed + 7919 * (index + 1),
                              num_requests=GRAPH_REQUESTS)
                 for index in range(options.graph_replays + 1)]
    generator = torch.Generator(device=device).manual_seed(options.seed + 17)
    harness: _GraphHarness
    if vllm is not None:
        capacity = capacity_batch(block, graph_capacity_pages(block))
        step = VllmBackendStep(torch, vllm[0], vllm[1], plan, capacity, device,
                               [f"{plan.name}.graph"])
        pages = max(workloads[0].num_pages,
                    1 + max(page for r in capacity.requests for page in r.block_ids))
        cache = step.allocate_cache(pages, generator)
        harness = _VllmClassesHarness(torch, step, cache, device)
    elif plan.backend == "FLASH_ATTN":
        cache = allocate_cache(torch, plan, workloads[0].num_pages, device, generator)
        assert provider is not None
        harness = _FlashAttentionHarness(torch, provider, plan, cache, device)
    else:
        cache = allocate_cache(torch, plan, workloads[0].num_pages, device, generator)
        harness = _FlashInferHarness(torch, flashinfer, plan, cache, device)
    atol, rtol = tolerance_for(plan.dtype, fp8=plan.fp8_kv)
    sinks = (torch.randn(plan.num_q_heads, generator=generator, device=device,
                         dtype=torch.float32) * 2.0).to(getattr(torch, plan.dtype)) \
        if plan.has_sinks else None
    harness.sinks = sinks

    def expected(workload: Workload, data: RequestData) -> Tensor:
        result = reference_attention(
            torch, workload.batch, data, num_q_heads=plan.num_q_heads,
            num_kv_heads=plan.num_kv_heads, head_size=plan.head_size,
            sliding_window=plan.sliding_window, logits_soft_cap=plan.logits_soft_cap,
            scale=plan.scale, sinks=sinks)
        if isinstance(harness, _FlashInferHarness):
            result = result[harness.order]
        return result

    results: list[CheckResult] = []
    data = make_request_data(torch, workloads[0].batch, plan, device, generator)
    violations = harness.load(workloads[0], data)
    if violations:
        return [CheckResult("graph capture: invariants", False, violations[0].render())]
    progress(f"{plan.name}: capturing the decode path in a CUDA graph")
    try:
        harness.launch()  # compile and warm up outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = harness.launch()
        torch.cuda.synchronize()
    except Exception as error:
        return [CheckResult("graph capture", False, f"{type(error).__name__}: {error}"[:300])]
    output = captured
    captured_addresses = _addresses({**harness.current_buffers(), "output": output})
    for index, workload in enumerate(workloads, start=0):
        if index:
            data = make_request_data(torch, workload.batch, plan, device, generator)
            violations = harness.load(workload, data)
        violations = violations + check_graph_addresses(
            captured_addresses, _addresses({**harness.current_buffers(), "output": output}))
        name = "graph replay (capture data)" if index == 0 else f"graph replay {index} (new data)"
        if violations:
            results.append(CheckResult(name, False, violations[0].render()))
            continue
        graph.replay()
        torch.cuda.synchronize()
        comparison = compare(torch, output, expected(workload, data), atol=atol, rtol=rtol)
        lengths = [r.seq_len for r in workload.batch.requests]
        results.append(CheckResult(
            name, comparison.passed,
            f"{GRAPH_REQUESTS} decodes, kv lens {min(lengths)}..{max(lengths)}"
            + ("" if comparison.passed else f"; worst token {comparison.worst_token}"),
            comparison.max_abs, comparison.max_rel))
    return results
