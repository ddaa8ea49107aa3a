"""A CPU node for the fleet tests: torch on the CPU stands in for CUDA and the kernel
doubles of tests/smoke/paged_torch.py do the work, inside the real smoke pipeline
(:func:`selector.fleet.entry.smoke_on_this_node` -> ``run_smoke``).

Each Ray worker imports this module by name (the test cluster puts this folder on the
workers' PYTHONPATH). Device types misbehave on purpose, by name:

- ``L40S`` hangs (the timeout cancels it), ``L4`` kills its worker process,
- ``A100``'s kernel raises (the smoke reports a failed kernel call, exit 3),
- ``A10G`` runs without the stand-ins: CPU torch, no kernel library (exit 4 with the hint).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "smoke"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import paged_torch

from selector.fleet import entry
from selector.smoke import runner
from selector.smoke.environment import FlashAttentionImpl

HANGS, CRASHES, RAISES, NO_LIBRARIES = "L40S", "L4", "A100", "A10G"


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


def _raising(*_: Any, **__: Any) -> Any:
    raise RuntimeError("CUDA error: an illegal memory access was encountered (stand-in)")


class _Decode(paged_torch.DecodeWrapper):
    """With ``use_cuda_graph``, ``plan`` copies its arrays into the caller's fixed buffers,
    as FlashInfer does."""

    def __init__(self, workspace: Any, kv_layout: str = "NHD", **kwargs: Any) -> None:
        super().__init__(workspace, kv_layout)
        self._paged_kv_indptr_buf = kwargs.get("paged_kv_indptr_buffer")
        self._paged_kv_indices_buf = kwargs.get("paged_kv_indices_buffer")
        self._paged_kv_last_page_len_buf = kwargs.get("paged_kv_last_page_len_buffer")

    def plan(self, indptr: Any, indices: Any, last: Any, *args: Any, **kwargs: Any) -> None:
        for buffer, values in ((self._paged_kv_indptr_buf, indptr),
                               (self._paged_kv_indices_buf, indices),
                               (self._paged_kv_last_page_len_buf, last)):
            if buffer is not None:
                buffer[: len(values)].copy_(values)
        super().plan(indptr, indices, last, *args, **kwargs)

    def run(self, q: Any, cache: Any, *, out: Any) -> Any:
        return _recorded(super().run)(q, cache, out=out)


class _Prefill(paged_torch.PrefillWrapper):
    def run(self, q: Any, cache: Any, *, out: Any) -> Any:
        return _recorded(super().run)(q, cache, out=out)


class FakeFlashInfer:
    BatchDecodeWithPagedKVCacheWrapper = _Decode
    BatchPrefillWithPagedKVCacheWrapper = _Prefill


@contextmanager
def cpu_stand_in(device: str) -> Iterator[None]:
    """The smoke runner sees a 'GPU' (the CPU) and the stand-in kernels, then is restored
    (a Ray worker process runs many tasks)."""
    call = _raising if device == RAISES else _recorded(paged_torch.flash_attn_varlen_paged)
    fake_fa = FlashAttentionImpl(3, "paged_torch", "test-double", "0", call)

    def libraries(plans: Any, options: Any, notify: Any) -> Any:
        del plans, options
        notify("loading the stand-in kernels")
        return runner._Libraries(flash_attention=fake_fa, flashinfer=FakeFlashInfer)

    saved = runner.import_torch_cuda, runner._load_libraries
    runner.import_torch_cuda = lambda: CpuTorch(device)  # type: ignore[assignment]
    runner._load_libraries = libraries  # type: ignore[assignment]
    try:
        yield
    finally:
        runner.import_torch_cuda, runner._load_libraries = saved


def smoke_on_cpu(request: dict[str, Any]) -> dict[str, Any]:
    """The fleet's smoke entry on a CPU node, misbehaving by device type (module doc)."""
    device = str(request["device"])
    if device == HANGS:
        time.sleep(3600)
    if device == CRASHES:
        os._exit(1)
    if device == NO_LIBRARIES:
        return entry.smoke_on_this_node(request)
    with cpu_stand_in(device):
        return entry.smoke_on_this_node(request)


def bench_on_cpu(request: dict[str, Any]) -> dict[str, Any]:
    """The fleet's bench entry with the bench's CPU environment (tests/bench/cpu_env.py),
    which names the device it stands in for."""
    from cpu_env import cpu_environment

    environment = cpu_environment()
    info = environment.device_info.model_copy(update={
        "name": f"CPU stand-in for {request['device']}", "catalog_name": request["device"]})
    return entry.bench_on_this_node(request, environment=replace(environment, device_info=info))
