"""Robust statistics of timing samples (pure Python).

Kernel times are skewed (a rare preemption or clock change makes one repeat slow), so
the centre is the median, the spread the inter-quartile range, and the median's
uncertainty the boxplot-notch interval ``median +- 1.57 * IQR / sqrt(n)`` (McGill, Tukey
and Larsen 1978: about a 95% interval for comparing two medians). Outliers are flagged
with Tukey's fences (outside ``[Q1 - 1.5 IQR, Q3 + 1.5 IQR]``) and kept in the samples.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Summary", "differ", "noise_label", "summarize"]

NOTCH = 1.57
FENCE = 1.5


def noise_label(rel_iqr: float) -> str:
    """``low`` (IQR under 2% of the median), ``moderate`` (under 5%) or ``high``."""
    if rel_iqr < 0.02:
        return "low"
    if rel_iqr < 0.05:
        return "moderate"
    return "high"


@dataclass(frozen=True)
class Summary:
    """Centre, spread, uncertainty and outliers of one set of samples."""

    n: int
    median: float
    mean: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    stdev: float
    outliers: tuple[int, ...]
    """Indices (in the original order) of samples outside Tukey's fences."""

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_iqr(self) -> float:
        return self.iqr / self.median if self.median else 0.0

    @property
    def ci_half_width(self) -> float:
        """Half-width of the median's notch interval."""
        return NOTCH * self.iqr / math.sqrt(self.n)

    @property
    def rel_ci(self) -> float:
        return self.ci_half_width / self.median if self.median else 0.0

    @property
    def noise(self) -> str:
        return noise_label(self.rel_iqr)

    def stable(self, target_rel_ci: float) -> bool:
        """The median is known to within ``target_rel_ci`` of itself."""
        return self.rel_ci <= target_rel_ci

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "median": self.median, "mean": self.mean, "min": self.minimum,
                "max": self.maximum, "q1": self.q1, "q3": self.q3, "iqr": self.iqr,
                "rel_iqr": self.rel_iqr, "stdev": self.stdev, "ci_half_width": self.ci_half_width,
                "rel_ci": self.rel_ci, "noise": self.noise, "outliers": len(self.outliers)}


def summarize(samples: Sequence[float]) -> Summary:
    """Summary of ``samples`` (at least one, all finite)."""
    if not samples:
        raise ValueError("no samples")
    values = [float(value) for value in samples]
    if not all(math.isfinite(value) for value in values):
        raise ValueError("samples must be finite")
    ordered = sorted(values)
    n = len(ordered)
    mean = math.fsum(ordered) / n
    variance = math.fsum((value - mean) ** 2 for value in ordered) / (n - 1) if n > 1 else 0.0
    # quartiles by linear interpolation (R type 7, numpy's default)
    q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive") if n > 1 else ordered * 3
    low, high = q1 - FENCE * (q3 - q1), q3 + FENCE * (q3 - q1)
    outliers = tuple(index for index, value in enumerate(values) if value < low or value > high)
    return Summary(n=n, median=statistics.median(ordered), mean=mean, minimum=ordered[0],
                   maximum=ordered[-1], q1=q1, q3=q3, stdev=math.sqrt(variance),
                   outliers=outliers)


def differ(a: Summary, b: Summary, *, floor: float = 0.01) -> bool:
    """The medians differ by more than their notch intervals and ``floor`` of the larger.

    ``floor`` keeps a 0.3% difference between two very quiet kernels from counting:
    below about 1% clocks and placement on the card move results between runs.
    """
    gap = abs(a.median - b.median)
    return gap > a.ci_half_width + b.ci_half_width and gap > floor * max(a.median, b.median)
