"""A CPU node for the fleet tests: torch on the CPU stands in for CUDA and the kernel
doubles of tests/smoke/paged_torch.py (vLLM's argument names) do the work, inside the real
smoke pipeline (:func:`selector.fleet.entry.smoke_on_this_node` -> ``run_smoke`` with a
CPU :class:`SmokeMachine`), CUDA-graph capture and replay included.

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "smoke"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import paged_torch

from selector.fleet import entry
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


def _raising(**_: Any) -> Any:
    raise RuntimeError("CUDA error: an illegal memory access was encountered (stand-in)")


class _Decode(paged_torch.DecodeWrapper):
    def run(self, *args: Any, **kwargs: Any) -> Any:
        return _recorded(super().run)(*args, **kwargs)


class _Prefill(paged_torch.PrefillWrapper):
    def run(self, *args: Any, **kwargs: Any) -> Any:
        return _recorded(super().run)(*args, **kwargs)


class FakeFlashInfer:
    """tests/smoke/paged_torch.py's FlashInfer doubles, recorded into a fake graph."""

    BatchDecodeWithPagedKVCacheWrapper = _Decode
    BatchPrefillWithPagedKVCacheWrapper = _Prefill


def _flash_attention(device: str) -> Provider:
    """paged_torch's FlashAttention double (vLLM's argument names), recorded into a fake
    graph; on the RAISES type its kernel raises like a crashing CUDA kernel."""
    double = paged_torch.FAKE_FA
    attention = _raising if device == RAISES else _recorded(paged_torch.flash_attn_varlen_func)
    return Provider(double.spec, f"{double.label} on the CPU",
                    {**double.entries, "flash_attn_varlen_func": attention})


def cpu_machine(device: str) -> SmokeMachine:
    """The smoke runner's machine for a CPU node standing in for ``device``: torch on the
    CPU with a fake CUDA namespace (graphs recorded and replayed), the kernel doubles."""
    choices = {"FLASH_ATTN": _flash_attention(device), "FLASHINFER": paged_torch.FAKE_FLASHINFER}
    return SmokeMachine(CpuTorch(device), torch.device("cpu"), f"CPU stand-in for {device}",
                        lambda plan: ProviderChoice(choices[plan.backend]),
                        flashinfer=FakeFlashInfer)


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
    """The fleet's bench entry on a CPU node: tests/bench/cpu_env.py's environment, named
    for the device it stands in for."""
    from cpu_env import cpu_environment

    device = str(request["device"])
    environment = cpu_environment()
    info = environment.device_info.model_copy(update={
        "name": f"CPU stand-in for {device}", "catalog_name": device})
    return entry.bench_on_this_node(request, environment=replace(environment, device_info=info))
