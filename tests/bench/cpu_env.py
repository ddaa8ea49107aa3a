"""A CPU stand-in for the GPU: torch on the CPU, wall-clock 'events', the kernel doubles
of tests/smoke/paged_torch.py (needs torch)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "smoke"))

import paged_torch

from selector.bench.measurements import DeviceInfo
from selector.bench.runner import BenchEnvironment

FAKE_FA = paged_torch.FAKE_FA


class WallEvent:
    def __init__(self) -> None:
        self.at = 0.0

    def record(self) -> None:
        self.at = time.perf_counter()


class WallClock:
    """Events are host timestamps; no head start; graphs cannot be captured."""

    def event(self) -> WallEvent:
        return WallEvent()

    def elapsed_us(self, start: WallEvent, end: WallEvent) -> float:
        return max((end.at - start.at) * 1e6, 1e-3)

    def synchronize(self) -> None:
        return None

    def head_start(self, microseconds: float) -> None:
        del microseconds

    def capture(self, launch: Any) -> Any:
        raise RuntimeError("no CUDA graphs on the CPU")


def cpu_environment(*, flashinfer: bool = True, flash_attention: bool = True
                    ) -> BenchEnvironment:
    skipped = {}
    if not flashinfer:
        skipped["FLASHINFER"] = "flashinfer-python is not installed (test)"
    if not flash_attention:
        skipped["FLASH_ATTN"] = "no FlashAttention (test)"
    return BenchEnvironment(
        torch=torch, device=torch.device("cpu"), clock=WallClock(),
        device_info=DeviceInfo(name="CPU test double", capability="0.0", l2_bytes=1 << 20,
                               catalog_name="H200", catalog_tbps=4.8, catalog_tflops=989.0),
        flash_attention=FAKE_FA if flash_attention else None,
        flashinfer=paged_torch.FakeFlashInfer if flashinfer else None,
        skipped=skipped, software={"torch": torch.__version__},
        flush_bytes=1 << 16, copy_bytes=1 << 20, gemm_size=64)
