"""Kernel timing for the bench: CUDA events per repeat, L2 flushed between repeats, the
launch optionally replayed from a CUDA graph, repeats until the median is stable.

* Each repeat is ``flush -> start event -> launch -> end event``; only the launch lies
  between the events, so the flush (a write larger than L2) never counts.
* The host must enqueue faster than the GPU drains, or the start event would fire before
  the kernel is queued and host time would leak in: every chunk of repeats is preceded by
  a GPU spin (``torch.cuda._sleep``) long enough for the host to enqueue the whole chunk.
* Repeats come in chunks until the median's notch interval is within ``target_ci`` of it
  (at least ``min_repeats``, at most ``max_repeats`` or ``max_seconds``).
* Clocks are taken as found (never fixed); the spread and outliers are reported instead.

torch is passed in by the caller (:class:`CudaClock`); this module never imports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from selector.bench.stats import summarize
from selector.bench.workload import BenchSettings

__all__ = ["Clock", "CudaClock", "TimedSamples", "time_samples"]

Launch = Callable[[], object]
CHUNK = 25
CYCLES_PER_US = 2000
"""Spin cycles per microsecond of head start (a ~2 GHz SM clock; a slower clock spins longer)."""
MAX_HEAD_START_US = 200_000.0


class Clock(Protocol):
    """Device timing primitives (CUDA events on a GPU; a fake in CPU tests)."""

    def event(self) -> Any: ...

    def elapsed_us(self, start: Any, end: Any) -> float: ...

    def synchronize(self) -> None: ...

    def head_start(self, microseconds: float) -> None: ...

    def capture(self, launch: Launch) -> Launch: ...


class CudaClock:
    """CUDA events, ``torch.cuda._sleep`` and CUDA-graph capture."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self._graphs: list[Any] = []

    def event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)

    def elapsed_us(self, start: Any, end: Any) -> float:
        return 1000.0 * float(start.elapsed_time(end))

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def head_start(self, microseconds: float) -> None:
        cycles = int(min(microseconds, MAX_HEAD_START_US) * CYCLES_PER_US)
        if cycles > 0:
            try:
                self.torch.cuda._sleep(cycles)
            except Exception:  # pragma: no cover - a build without _sleep: no head start
                return

    def capture(self, launch: Launch) -> Launch:
        """Capture ``launch`` in a CUDA graph (warmed on a side stream); return its replay."""
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            launch()
            launch()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            launch()
        torch.cuda.synchronize()
        self._graphs.append(graph)
        replay: Launch = graph.replay
        return replay

    def release(self) -> None:
        self._graphs.clear()


@dataclass
class TimedSamples:
    samples_us: list[float]
    mode: str
    host_us: float
    """Host time to enqueue one launch (what a plain loop without graphs would pay)."""
    notes: list[str] = field(default_factory=list)


def time_samples(clock: Clock, launch: Launch, *, settings: BenchSettings, graph: bool,
                 flush: Launch | None) -> TimedSamples:
    """Per-repeat device microseconds of ``launch`` (or its graph replay)."""
    notes: list[str] = []
    run = launch
    mode = "eager"
    if graph:
        try:
            run = clock.capture(launch)
            mode = "graph"
        except Exception as error:
            notes.append(f"CUDA-graph capture failed, timed eagerly: "
                         f"{type(error).__name__}: {error}"[:240])
            clock.synchronize()
    for _ in range(settings.warmup):
        run()
    clock.synchronize()
    started = time.perf_counter()
    run()
    host_us = (time.perf_counter() - started) * 1e6
    flush_us = 0.0
    if flush is not None:
        started = time.perf_counter()
        flush()
        flush_us = (time.perf_counter() - started) * 1e6
    clock.synchronize()
    samples: list[float] = []
    began = time.perf_counter()
    while len(samples) < settings.max_repeats:
        count = min(CHUNK, settings.max_repeats - len(samples))
        pairs = [(clock.event(), clock.event()) for _ in range(count)]
        clock.head_start(1.5 * count * (host_us + flush_us + 10.0) + 50.0)
        for start, end in pairs:
            if flush is not None:
                flush()
            start.record()
            run()
            end.record()
        clock.synchronize()
        samples.extend(clock.elapsed_us(start, end) for start, end in pairs)
        if len(samples) >= settings.min_repeats:
            if summarize(samples).stable(settings.target_ci):
                break
            if time.perf_counter() - began > settings.max_seconds:
                notes.append(f"stopped at the {settings.max_seconds:g} s budget before the "
                             f"median was within {settings.target_ci:.1%}")
                break
    return TimedSamples(samples, mode, host_us, notes)
