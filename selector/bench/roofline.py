"""Roofline arithmetic: the work in one attention call and the fastest it can run.

* bytes: each request's K and V read once (decode is bound by this), plus the queries
  read and the outputs written once;
* FLOPs: two matmuls (QK^T, PV) of 2 FLOPs per multiply-add, per (query, visible key)
  pair, query head and head dimension; causal masking counts only visible pairs;
* floor: ``max(bytes / copy bandwidth, FLOPs / matmul peak)`` -- no kernel beats it.

The ceilings are *measured* on the card in the same run (a device-to-device copy, a
bf16 GEMM); the catalog's datasheet figures are shown beside them, never used silently
in their place. Copy bandwidth counts bytes read plus bytes written.
Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Ceilings",
    "Geometry",
    "Work",
    "achieved",
    "copy_bytes",
    "gemm_flops",
    "shape_work",
    "visible_pairs",
]

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1,
               "fp8_e5m2": 1}


@dataclass(frozen=True)
class Geometry:
    """An attention layer's shape (per tensor-parallel rank)."""

    num_q_heads: int
    num_kv_heads: int
    head_size: int
    dtype: str = "bfloat16"
    kv_dtype: str | None = None
    """The KV cache's dtype when it differs from the model's (fp8)."""
    sliding_window: int | None = None

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token over all KV heads."""
        return 2 * self.num_kv_heads * self.head_size * DTYPE_BYTES[self.kv_dtype or self.dtype]


def visible_pairs(context_len: int, query_len: int, sliding_window: int | None = None) -> int:
    """(query, key) pairs a causal (optionally windowed) mask lets through for one request.

    Query ``i`` sits at position ``p = context_len + i`` and sees ``min(p + 1, window)``
    keys (closed form; equal to summing over the queries).
    """
    first, last = context_len + 1, context_len + query_len  # visible keys of first/last query
    if sliding_window is None or last <= sliding_window:
        return (first + last) * query_len // 2
    if first >= sliding_window:
        return sliding_window * query_len
    ramp = sliding_window - first  # queries that still see fewer than the window
    return (first + sliding_window - 1) * ramp // 2 + sliding_window * (query_len - ramp)


def _seen_keys(context_len: int, query_len: int, sliding_window: int | None) -> int:
    """Distinct cached keys the call must read for one request."""
    seq = context_len + query_len
    if sliding_window is None:
        return seq
    return min(seq, sliding_window + query_len - 1)


@dataclass(frozen=True)
class Work:
    """What one call over a batch must do at least."""

    kv_bytes: int
    qo_bytes: int
    flops: int

    @property
    def bytes(self) -> int:
        return self.kv_bytes + self.qo_bytes

    def to_json(self) -> dict[str, Any]:
        return {"kv_bytes": self.kv_bytes, "qo_bytes": self.qo_bytes, "flops": self.flops}


def shape_work(requests: Sequence[tuple[int, int]], geometry: Geometry) -> Work:
    """Work of one attention call over ``(context_len, query_len)`` requests."""
    window = geometry.sliding_window
    keys = sum(_seen_keys(context, query, window) for context, query in requests)
    pairs = sum(visible_pairs(context, query, window) for context, query in requests)
    tokens = sum(query for _, query in requests)
    qo = 2 * tokens * geometry.num_q_heads * geometry.head_size * geometry.dtype_bytes
    return Work(kv_bytes=keys * geometry.kv_bytes_per_token, qo_bytes=qo,
                flops=4 * pairs * geometry.num_q_heads * geometry.head_size)


def copy_bytes(elements: int, element_bytes: int) -> int:
    """Bytes a device copy of ``elements`` moves: read once plus written once."""
    return 2 * elements * element_bytes


def gemm_flops(m: int, n: int, k: int) -> int:
    return 2 * m * n * k


@dataclass(frozen=True)
class Ceilings:
    """The card's limits: measured in this run, and the catalog's datasheet figures."""

    copy_tbps: float | None
    matmul_tflops: float | None
    catalog_tbps: float | None = None
    catalog_tflops: float | None = None

    @property
    def bandwidth_tbps(self) -> float | None:
        """The bandwidth the roofline uses: measured, else the catalog's."""
        return self.copy_tbps or self.catalog_tbps

    @property
    def compute_tflops(self) -> float | None:
        return self.matmul_tflops or self.catalog_tflops

    @property
    def source(self) -> str:
        return "measured" if self.copy_tbps and self.matmul_tflops else "catalog"

    def floor_us(self, work: Work) -> float | None:
        """The fastest any kernel could do ``work`` (microseconds), None without ceilings."""
        bandwidth, compute = self.bandwidth_tbps, self.compute_tflops
        if not bandwidth or not compute:
            return None
        return max(work.bytes / (bandwidth * 1e12), work.flops / (compute * 1e12)) * 1e6

    def bound(self, work: Work) -> str | None:
        """``memory`` or ``compute``: which term sets the floor."""
        bandwidth, compute = self.bandwidth_tbps, self.compute_tflops
        if not bandwidth or not compute:
            return None
        memory = work.bytes / (bandwidth * 1e12)
        return "memory" if memory >= work.flops / (compute * 1e12) else "compute"

    def to_json(self) -> dict[str, Any]:
        return {"copy_tbps": self.copy_tbps, "matmul_tflops": self.matmul_tflops,
                "catalog_tbps": self.catalog_tbps, "catalog_tflops": self.catalog_tflops}


@dataclass(frozen=True)
class Achieved:
    """Rates a kernel reached and their fractions of the card's limits."""

    tbps: float
    """Bytes moved per second (KV read + Q read + O write), in TB/s."""
    kv_tbps: float
    """KV bytes read per second alone (the usual decode figure)."""
    tflops: float
    floor_us: float | None
    fraction_of_roofline: float | None
    """floor / measured time: 1.0 means the kernel runs at the limit."""
    fraction_of_bandwidth: float | None
    """All bytes moved per second over the card's copy bandwidth."""
    fraction_of_compute: float | None

    @property
    def kv_fraction_of_bandwidth(self) -> float | None:
        """KV bytes read per second over the copy bandwidth (the decode figure)."""
        if self.fraction_of_bandwidth is None or not self.tbps:
            return None
        return self.fraction_of_bandwidth * self.kv_tbps / self.tbps

    def to_json(self) -> dict[str, Any]:
        return {"tbps": self.tbps, "kv_tbps": self.kv_tbps, "tflops": self.tflops,
                "floor_us": self.floor_us, "fraction_of_roofline": self.fraction_of_roofline,
                "fraction_of_bandwidth": self.fraction_of_bandwidth,
                "kv_fraction_of_bandwidth": self.kv_fraction_of_bandwidth,
                "fraction_of_compute": self.fraction_of_compute}


def achieved(work: Work, median_us: float, ceilings: Ceilings) -> Achieved:
    """What a call that did ``work`` in ``median_us`` achieved against ``ceilings``."""
    if median_us <= 0:
        raise ValueError("time must be positive")
    seconds = median_us * 1e-6
    tbps = work.bytes / seconds / 1e12
    tflops = work.flops / seconds / 1e12
    floor = ceilings.floor_us(work)
    bandwidth, compute = ceilings.bandwidth_tbps, ceilings.compute_tflops
    return Achieved(
        tbps=tbps, kv_tbps=work.kv_bytes / seconds / 1e12, tflops=tflops, floor_us=floor,
        fraction_of_roofline=floor / median_us if floor is not None else None,
        fraction_of_bandwidth=tbps / bandwidth if bandwidth else None,
        fraction_of_compute=tflops / compute if compute else None)
