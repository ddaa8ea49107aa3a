"""A CPU node for the fleet tests: torch on the CPU stands in for CUDA and plain-torch
kernels taking vLLM's argument names do the work, inside the real smoke pipeline
(:func:`selector.fleet.entry.smoke_on_this_node` -> ``run_smoke`` with a CPU
:class:`SmokeMachine`).

Each Ray worker imports this module by name (the test cluster puts this folder on the
workers' PYTHONPATH). Device types misbehave on purpose, by name:

- ``L40S`` hangs (the timeout cancels it), ``L4`` kills its worker process,
- ``A100``'s kernel raises (the smoke reports a failed kernel call, exit 3),
- ``A10G`` runs without the stand-ins: CPU torch, no kernel library (exit 4 with the hint),
- ``A10``'s task raises outside the pipeline (a bug: exit 70, named with its node).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from selector.fleet import entry
from selector.smoke.contract import load_contract
from selector.smoke.plan import SmokePlan
from selector.smoke.providers import Provider, ProviderChoice
from selector.smoke.runner import SmokeMachine

HANGS, CRASHES, RAISES, NO_LIBRARIES, BUGGY = "L40S", "L4", "A100", "A10G", "A10"


class FakeGraph:
    """Capture records each stand-in kernel launch; replay runs them again into the same
    output tensors (reading whatever the input buffers hold by then)."""

    def __init__(self) -> None:
        self.launches: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], Any]] = []

    def replay(self) -> None:
        for function, args, kwargs, out in self.launches:
            result = function(*args, **kwargs)
            if result is not out:
                out.copy_(result)


_CAPTURING: list[FakeGraph] = []


def _recorded(function: Callable[..., Any]) -> Callable[..., Any]:
    def launch(*args: Any, **kwargs: Any) -> Any:
        out = function(*args, **kwargs)
        if _CAPTURING:
            _CAPTURING[-1].launches.append((function, args, kwargs, out))
        return out
    return launch


class _CpuCuda:
    def __init__(self, device: str) -> None:
        self.name = device
        self.CUDAGraph = FakeGraph

    def init(self) -> None:
        return None

    def is_available(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def get_device_properties(self, _: Any) -> Any:
        return SimpleNamespace(name=f"CPU stand-in for {self.name}", major=0, minor=0)

    @contextmanager
    def graph(self, graph: FakeGraph) -> Iterator[None]:
        _CAPTURING.append(graph)
        try:
            yield
        finally:
            _CAPTURING.pop()


class CpuTorch:
    """torch, except that ``cuda`` is the CPU stand-in and every device is the CPU."""

    def __init__(self, device: str) -> None:
        self.cuda = _CpuCuda(device)

    def device(self, *_: Any, **__: Any) -> Any:
        return torch.device("cpu")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


def _attend(q: Any, k: Any, v: Any, *, scale: float, window_left: int | None,
            softcap: float | None) -> Any:
    """Causal attention of one request's new tokens over its whole context, in float32."""
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    query_pos = torch.arange(k.shape[0] - q.shape[0], k.shape[0])
    key_pos = torch.arange(k.shape[0])
    visible = key_pos[None, :] <= query_pos[:, None]
    if window_left is not None and window_left >= 0:
        visible &= key_pos[None, :] >= query_pos[:, None] - window_left
    scores = scores.masked_fill(~visible[None], float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).to(q.dtype)


def _pages(cache: Any, pages: list[int], length: int) -> Any:
    return cache[pages].reshape(-1, *cache.shape[2:])[:length]


def flash_attn_varlen_func(*, q: Any, k: Any, v: Any, cu_seqlens_q: Any, seqused_k: Any,
                           block_table: Any, softmax_scale: float, window_size: Any = None,
                           softcap: float | None = None, out: Any = None, **_: Any) -> Any:
    """vLLM's ``flash_attn_varlen_func`` call (its argument names) over a paged cache."""
    out = torch.empty_like(q) if out is None else out
    starts = cu_seqlens_q.tolist()
    block = k.shape[1]
    left = None if window_size is None or window_size[0] < 0 else int(window_size[0])
    for index, length in enumerate(seqused_k.tolist()):
        pages = block_table[index, : -(-length // block)].long().tolist()
        rows = slice(starts[index], starts[index + 1])
        out[rows] = _attend(q[rows], _pages(k, pages, length), _pages(v, pages, length),
                            scale=softmax_scale, window_left=left, softcap=softcap or None)
    return out


def _raising(**_: Any) -> Any:
    raise RuntimeError("CUDA error: an illegal memory access was encountered (stand-in)")


class _Wrapper:
    """FlashInfer's paged wrappers with vLLM's argument names; with ``use_cuda_graph``,
    ``plan`` copies its arrays into the caller's fixed buffers, as FlashInfer does."""

    def __init__(self, float_workspace_buffer: Any, kv_layout: str = "NHD", **kwargs: Any) -> None:
        del float_workspace_buffer
        self.layout = kv_layout
        self._backend = "torch stand-in"
        self._paged_kv_indptr_buf = kwargs.get("paged_kv_indptr_buffer")
        self._paged_kv_indices_buf = kwargs.get("paged_kv_indices_buffer")
        self._paged_kv_last_page_len_buf = kwargs.get("paged_kv_last_page_len_buffer")

    def _store(self, qo_indptr: list[int], indptr: Any, indices: Any, last: Any,
               page_size: int, sm_scale: float, window_left: int | None,
               logits_soft_cap: float | None) -> None:
        for buffer, values in ((self._paged_kv_indptr_buf, indptr),
                               (self._paged_kv_indices_buf, indices),
                               (self._paged_kv_last_page_len_buf, last)):
            if buffer is not None:
                buffer[: len(values)].copy_(values)
        self.qo_indptr = qo_indptr
        self.indptr, self.indices, self.last = indptr.tolist(), indices.tolist(), last.tolist()
        self.page_size, self.scale = page_size, sm_scale
        self.window_left = None if window_left is None or window_left < 0 else window_left
        self.softcap = logits_soft_cap or None

    def _run(self, q: Any, paged_kv_cache: Any, out: Any = None, **_: Any) -> Any:
        out = torch.empty_like(q) if out is None else out
        keys, values = paged_kv_cache[:, 0], paged_kv_cache[:, 1]
        if self.layout == "HND":
            keys, values = keys.transpose(1, 2), values.transpose(1, 2)
        for index, last in enumerate(self.last):
            pages = self.indices[self.indptr[index]:self.indptr[index + 1]]
            length = (len(pages) - 1) * self.page_size + last
            rows = slice(self.qo_indptr[index], self.qo_indptr[index + 1])
            out[rows] = _attend(q[rows], _pages(keys, pages, length),
                                _pages(values, pages, length), scale=self.scale,
                                window_left=self.window_left, softcap=self.softcap)
        return out

    def run(self, **kwargs: Any) -> Any:
        return _recorded(self._run)(**kwargs)


class _Decode(_Wrapper):
    def plan(self, *, indptr: Any, indices: Any, last_page_len: Any, page_size: int,
             sm_scale: float, window_left: int | None = None,
             logits_soft_cap: float | None = None, **_: Any) -> None:
        self._store(list(range(len(last_page_len) + 1)), indptr, indices, last_page_len,
                    page_size, sm_scale, window_left, logits_soft_cap)


class _Prefill(_Wrapper):
    def plan(self, *, qo_indptr: Any, paged_kv_indptr: Any, paged_kv_indices: Any,
             paged_kv_last_page_len: Any, page_size: int, causal: bool, sm_scale: float,
             window_left: int | None = None, logits_soft_cap: float | None = None,
             **_: Any) -> None:
        assert causal
        self._store(qo_indptr.tolist(), paged_kv_indptr, paged_kv_indices,
                    paged_kv_last_page_len, page_size, sm_scale, window_left, logits_soft_cap)


class FakeFlashInfer:
    BatchDecodeWithPagedKVCacheWrapper = _Decode
    BatchPrefillWithPagedKVCacheWrapper = _Prefill


def cpu_machine(device: str) -> SmokeMachine:
    """The smoke runner's machine for a CPU node standing in for ``device``: each plan gets
    the contract's first provider for its backend, with the stand-in kernels as entries."""
    attention = _raising if device == RAISES else _recorded(flash_attn_varlen_func)

    def choose(plan: SmokePlan) -> ProviderChoice:
        spec = load_contract(plan.engine).providers_for(plan.backend)[0]
        entries = {"flash_attn_varlen_func": attention} if plan.backend == "FLASH_ATTN" else {}
        return ProviderChoice(Provider(spec, f"{spec.id} (CPU stand-in)", entries))

    return SmokeMachine(CpuTorch(device), torch.device("cpu"), f"CPU stand-in for {device}",
                        choose, flashinfer=FakeFlashInfer)


def smoke_on_cpu(request: dict[str, Any]) -> dict[str, Any]:
    """The fleet's smoke entry on a CPU node, misbehaving by device type (module doc)."""
    device = str(request["device"])
    if device == HANGS:
        time.sleep(3600)
    if device == CRASHES:
        os._exit(1)
    if device == BUGGY:
        raise ValueError("a bug in the task (stand-in)")
    if device == NO_LIBRARIES:
        return entry.smoke_on_this_node(request)
    return entry.smoke_on_this_node(request, machine=cpu_machine(device))


def bench_on_cpu(request: dict[str, Any]) -> dict[str, Any]:
    """The fleet's bench entry on a CPU node: the bench's CPU clock and sizes
    (tests/bench/cpu_env.py) with this module's stand-in kernels, named for the device."""
    from cpu_env import cpu_environment

    device = str(request["device"])
    environment = cpu_environment()
    spec = load_contract("vllm==0.33.0").providers_for("FLASH_ATTN")[0]
    info = environment.device_info.model_copy(update={
        "name": f"CPU stand-in for {device}", "catalog_name": device})
    return entry.bench_on_this_node(request, environment=replace(
        environment, device_info=info, flashinfer=FakeFlashInfer,
        flash_attention=Provider(spec, f"{spec.id} (CPU stand-in)",
                                 {"flash_attn_varlen_func": flash_attn_varlen_func})))
