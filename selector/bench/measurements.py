"""The measurements file ``attn-select bench`` writes and ``check --measurements`` reads.

Raw samples are kept (every repeat's microseconds), so statistics are recomputed on
load and a file from one GPU machine can be re-judged anywhere. Pure Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from selector.bench.roofline import Achieved, Ceilings, Geometry, Work, achieved
from selector.bench.stats import Summary, summarize
from selector.errors import InputError
from selector.util.inputfile import parse_json_text, read_text_file

__all__ = [
    "SCHEMA",
    "BenchResult",
    "CheckInfo",
    "DeploymentInfo",
    "DeviceInfo",
    "GeometryInfo",
    "GroupInfo",
    "Measurements",
    "PeakMeasurement",
    "load_measurements",
]

SCHEMA = "attn-select-bench/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PeakMeasurement(_Model):
    """A ceiling measured on the card: a device copy or a bf16 GEMM."""

    what: str
    """e.g. ``device copy 2 x 1.0 GiB (read + write)`` or ``bf16 GEMM 8192^3``."""
    work: int
    """Bytes moved (copy) or FLOPs (GEMM) per repeat."""
    unit: Literal["TB/s", "TFLOP/s"]
    samples_us: list[float] = Field(min_length=1)

    @property
    def summary(self) -> Summary:
        return summarize(self.samples_us)

    @property
    def value(self) -> float:
        """The rate at the median time."""
        return self.work / (self.summary.median * 1e-6) / 1e12


class DeviceInfo(_Model):
    name: str
    capability: str = ""
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    catalog_name: str | None = None
    catalog_tbps: float | None = None
    catalog_tflops: float | None = None
    notes: list[str] = Field(default_factory=list)


class GeometryInfo(_Model):
    num_q_heads: int
    num_kv_heads: int
    head_size: int
    dtype: str
    kv_cache_dtype: str = "auto"
    sliding_window: int | None = None
    logits_soft_cap: float | None = None

    def geometry(self) -> Geometry:
        kv = None if self.kv_cache_dtype in ("auto", self.dtype) else self.kv_cache_dtype
        return Geometry(self.num_q_heads, self.num_kv_heads, self.head_size, self.dtype,
                        kv, self.sliding_window)


class GroupInfo(_Model):
    """One attention group of the deployment and what the solver said about it."""

    name: str
    layers: int = 1
    geometry: GeometryInfo
    selected: str | None
    """vLLM's choice for this group (the priority list's first valid backend, or the pin)."""
    valid: list[str] = Field(default_factory=list)
    unmeasured: dict[str, str] = Field(default_factory=dict)
    """Valid backends that were not run, and why (no kernel runner, library missing)."""


class DeploymentInfo(_Model):
    source: str
    engine: str
    device: str | None = None
    mode: str = "auto"
    """``auto`` (the priority list chooses) or ``explicit`` (a backend is pinned)."""
    groups: list[GroupInfo] = Field(min_length=1)


class CheckInfo(_Model):
    passed: bool
    max_abs: float | None = None
    max_rel: float | None = None
    detail: str = ""


class BenchResult(_Model):
    """One backend on one shape of one group: raw samples and what they achieved."""

    group: str
    backend: str
    implementation: str = ""
    plan: dict[str, Any] = Field(default_factory=dict)
    shape: dict[str, Any]
    timing_mode: Literal["graph", "eager"] = "eager"
    l2_flush: bool = True
    working_set_bytes: int | None = None
    samples_us: list[float] = Field(default_factory=list)
    builder_us: list[float] = Field(default_factory=list)
    """Wall time to build this step's metadata on the CPU and hand it to the kernel
    (FlashInfer: ``plan()``), per repeat."""
    work: dict[str, int] = Field(default_factory=dict)
    check: CheckInfo | None = None
    error: str | None = None
    notes: list[str] = Field(default_factory=list)

    @property
    def shape_name(self) -> str:
        return str(self.shape["name"])

    @property
    def ok(self) -> bool:
        """Measured, and the output matched the reference."""
        return (self.error is None and bool(self.samples_us)
                and (self.check is None or self.check.passed))

    @property
    def summary(self) -> Summary | None:
        return summarize(self.samples_us) if self.samples_us else None

    @property
    def builder_summary(self) -> Summary | None:
        return summarize(self.builder_us) if self.builder_us else None

    def work_model(self) -> Work:
        return Work(int(self.work.get("kv_bytes", 0)), int(self.work.get("qo_bytes", 0)),
                    int(self.work.get("flops", 0)))

    def achieved(self, ceilings: Ceilings) -> Achieved | None:
        summary = self.summary
        if summary is None or summary.median <= 0:
            return None
        return achieved(self.work_model(), summary.median, ceilings)


class Measurements(_Model):
    """Everything one ``attn-select bench`` run measured."""

    schema_: Literal["attn-select-bench/1"] = Field("attn-select-bench/1", alias="schema")
    tool_version: str = ""
    created: str = ""
    device: DeviceInfo
    software: dict[str, str] = Field(default_factory=dict)
    copy_peak: PeakMeasurement | None = None
    matmul_peak: PeakMeasurement | None = None
    deployment: DeploymentInfo
    workload: dict[str, Any] = Field(default_factory=dict)
    results: list[BenchResult] = Field(default_factory=list)
    stages: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @property
    def ceilings(self) -> Ceilings:
        return Ceilings(
            copy_tbps=self.copy_peak.value if self.copy_peak else None,
            matmul_tflops=self.matmul_peak.value if self.matmul_peak else None,
            catalog_tbps=self.device.catalog_tbps, catalog_tflops=self.device.catalog_tflops)

    @property
    def passed(self) -> bool:
        """Every attempted measurement ran and matched the reference."""
        return all(result.ok for result in self.results)

    def failures(self) -> list[str]:
        out = []
        for result in self.results:
            if result.ok:
                continue
            why = result.error or (result.check.detail if result.check else "") or "no samples"
            out.append(f"{result.group} {result.backend} {result.shape_name}: {why}")
        return out

    def shape_names(self) -> list[str]:
        return list(dict.fromkeys(result.shape_name for result in self.results))

    def backends(self) -> list[str]:
        return list(dict.fromkeys(result.backend for result in self.results))

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for item in loc:
        text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else item)
    return text


def parse_measurements(data: Any, *, source: str = "<measurements>") -> Measurements:
    if not isinstance(data, dict):
        raise InputError("expected a JSON object written by `attn-select bench`", file=source)
    schema = data.get("schema")
    if schema != SCHEMA:
        raise InputError(f"unsupported measurements schema {schema!r} (expected {SCHEMA!r})",
                         file=source, field="schema",
                         hint="write it with `attn-select bench CONFIG --output DIR`")
    try:
        return Measurements.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise InputError(message, file=source,
                         field=_location(tuple(first["loc"])) or None) from None


def load_measurements(path: Path) -> Measurements:
    """Read a measurements file (or a folder holding bench.json); every failure is an
    :class:`InputError` (exit 2)."""
    source = str(path)
    if path.is_dir() and (path / "bench.json").is_file():
        return load_measurements(path / "bench.json")
    text = read_text_file(path, what="a measurements file (bench.json)",
                          directory_hint="write one with `attn-select bench CONFIG --output DIR`")
    data = parse_json_text(text, source=source)
    return parse_measurements(data, source=source)
