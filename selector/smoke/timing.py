"""Kernel timing with CUDA events.

Each repeat is bracketed by its own pair of events, and all repeats are enqueued before
one synchronisation, so the host runs ahead of the GPU and host launch overhead does not
leak into the measured kernel time; the median is reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["EventTiming", "time_kernel", "time_loop"]


@dataclass(frozen=True)
class EventTiming:
    median_us: float
    min_us: float
    repeats: int


def time_kernel(torch: Any, launch: Callable[[], object], *, warmup: int,
                repeats: int) -> EventTiming:
    """Median and minimum per-launch GPU time of ``launch`` in microseconds."""
    for _ in range(warmup):
        launch()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        launch()
        end.record()
    torch.cuda.synchronize()
    times = [1000.0 * float(start.elapsed_time(end)) for start, end in zip(starts, ends,
                                                                            strict=True)]
    return EventTiming(statistics.median(times), min(times), repeats)


def time_loop(torch: Any, launch: Callable[[], object], *, warmup: int, repeats: int) -> float:
    """Plain loop between two events, divided by the count (microseconds per launch)."""
    for _ in range(warmup):
        launch()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        launch()
    end.record()
    torch.cuda.synchronize()
    return 1000.0 * float(start.elapsed_time(end)) / repeats
