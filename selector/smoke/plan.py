"""What a smoke run executes: one :class:`SmokePlan` per attention group, plus options.

The solver turns its result into SmokePlans (one per attention group); users can also
write them by hand in a plans file for ``attn-select smoke-plan``::

    {"plans": [{"backend": "FLASHINFER", "kernel_block_size": 16, "kv_layout": "HND",
                "num_q_heads": 32, "num_kv_heads": 8, "head_size": 128,
                "dtype": "bfloat16", "cudagraph_mode": "FULL_DECODE_ONLY"}],
     "options": {"repeats": 20}}

Pure Python: no torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from selector.catalog import Catalog
from selector.errors import InputError
from selector.platforms import DEFAULT_PLATFORM
from selector.schema.types import CudaGraphMode

__all__ = [
    "FP8_KV_DTYPES",
    "FULL_GRAPH_MODES",
    "CudaGraphMode",
    "SmokeOptions",
    "SmokePlan",
    "SmokePlansFile",
    "bind_plan",
    "kernel_calls_file",
    "load_plans_file",
]

FULL_GRAPH_MODES: frozenset[str] = frozenset({"FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"})
"""Modes that capture the decode path in a full CUDA graph."""

_Positive = Annotated[int, Field(ge=1, strict=True)]
FP8_KV_DTYPES: frozenset[str] = frozenset({"fp8", "fp8_e4m3"})
"""KV-cache dtypes vLLM stores as float8_e4m3fn with per-tensor scales (smoke-tested)."""


def kernel_calls_file(engine: str, catalog: Catalog) -> str:
    """The kernel call contract file (``kernel-calls.yaml``) of ``engine`` in ``catalog``,
    inherited whole from the nearest profile of its chain that has one."""
    directories = catalog.engine_dirs
    if engine not in directories:
        # a plan's engine is the user's input (a deployment's is checked against the catalog)
        raise InputError(f"no engine profile for {engine}", field="engine",
                         hint="known: " + ", ".join(directories))
    path = catalog.engine_file(engine, "kernel-calls.yaml") or directories[engine] / "kernel-calls.yaml"
    return str(path)


class SmokePlan(BaseModel):
    """One attention group exactly as negotiated: backend, kernel geometry, graph mode, shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="group0", min_length=1,
                      description="label of the attention group, e.g. 'kv0/attn0 full'")
    backend: str = Field(min_length=1, description=(
        "the negotiated backend; the engine's kernel call contract says how it is called "
        "(FLASH_ATTN, FLASHINFER, FLASHMLA, FLASH_ATTN_MLA run here)"))
    engine: str = Field(pattern=r"^[a-z][a-z0-9_-]*==\d+(\.\d+)*$",
                        description="the engine version whose kernel calls are reproduced "
                        "(a plans file's default: the engine a command uses when none is named)")
    kernel_calls: str = Field(min_length=1, exclude=True, repr=False,
                              description="the engine's kernel call contract file, resolved "
                              "from the catalog when the plan is made (:func:`bind_plan`); "
                              "not part of the plan's JSON")
    platform: str = Field(default=DEFAULT_PLATFORM, pattern=r"^[a-z][a-z0-9_]*$",
                          description="the platform of the plan's GPU (schemas/platforms.yaml)")
    capability: Annotated[int, Field(ge=10, le=200, strict=True)] = Field(
        default=90, description="compute capability of the plan's GPU, major*10+minor")
    fa_version: Literal[2, 3, 4] | None = Field(
        default=None, description="FlashAttention version the plan negotiated (FLASH_ATTN only)")
    kernel_block_size: Annotated[int, Field(ge=1, le=65536, strict=True)] = Field(
        description="tokens per kernel page; a hybrid model's attention pages can exceed "
                    "4096 (vLLM aligns them to the Mamba state's page size)")
    kv_layout: Literal["NHD", "HND"] = "NHD"
    cudagraph_mode: CudaGraphMode = "NONE"
    num_q_heads: _Positive
    num_kv_heads: _Positive
    head_size: Annotated[int, Field(ge=8, le=1024, strict=True)]
    dtype: Literal["bfloat16", "float16"] = "bfloat16"
    kv_cache_dtype: str = Field(
        default="auto", description="'auto' (the model dtype), or fp8 / fp8_e4m3 "
        "(float8_e4m3fn storage, per-tensor scales); others are not smoke-tested")
    q_scale: Annotated[float, Field(gt=0)] = 1.0
    k_scale: Annotated[float, Field(gt=0)] = Field(
        default=1.0, description="per-tensor K scale (layer._k_scale): stored = K / k_scale")
    v_scale: Annotated[float, Field(gt=0)] = 1.0
    has_sinks: bool = Field(default=False, description="the layer has attention sinks (gpt-oss)")
    kv_lora_rank: _Positive | None = Field(default=None, description="MLA latent size")
    qk_rope_head_dim: Annotated[int, Field(ge=0, strict=True)] | None = Field(
        default=None, description="MLA rope part (0 for a rope-free, NoPE model)")
    softmax_scale: Annotated[float, Field(gt=0)] | None = Field(
        default=None, description="softmax scale (default head_size ** -0.5)")
    sliding_window: Annotated[int, Field(ge=1, strict=True)] | None = Field(
        default=None, description="tokens a query sees, itself included (vLLM semantics)")
    logits_soft_cap: Annotated[float, Field(gt=0)] | None = None
    reorder_batch_threshold: _Positive = 1
    layer_names: list[str] = Field(default_factory=list,
                                   description="layers that share this group's metadata")

    @model_validator(mode="after")
    def _consistent(self) -> SmokePlan:
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(f"num_q_heads {self.num_q_heads} is not a multiple of "
                             f"num_kv_heads {self.num_kv_heads}")
        if self.head_size % 8:
            raise ValueError(f"head_size {self.head_size} is not a multiple of 8")
        if self.fa_version is not None and self.backend not in ("FLASH_ATTN", "FLASH_ATTN_MLA"):
            raise ValueError("fa_version applies to the FLASH_ATTN backends only")
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise ValueError("an MLA plan gives both kv_lora_rank and qk_rope_head_dim")
        if self.kv_lora_rank is not None and self.qk_rope_head_dim is not None and \
                self.head_size != self.kv_lora_rank + self.qk_rope_head_dim:
            raise ValueError("an MLA plan's head_size is kv_lora_rank + qk_rope_head_dim")
        return self

    @property
    def uses_full_graph(self) -> bool:
        return self.cudagraph_mode in FULL_GRAPH_MODES

    @property
    def fp8_kv(self) -> bool:
        return self.kv_cache_dtype in FP8_KV_DTYPES

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def scale(self) -> float:
        """The softmax scale vLLM passes (``self.scale``)."""
        return self.softmax_scale if self.softmax_scale is not None else self.head_size ** -0.5

    def parity_key(self) -> tuple[Any, ...]:
        """Plans with equal keys see identical data, so their outputs must agree."""
        return (self.kernel_block_size, self.num_q_heads, self.num_kv_heads, self.head_size,
                self.dtype, self.fp8_kv, self.k_scale, self.v_scale, self.sliding_window,
                self.logits_soft_cap, self.has_sinks, self.kv_lora_rank, self.scale)


class SmokeOptions(BaseModel):
    """How hard to check and measure; the defaults give a verdict in seconds on a warm cache."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    repeats: Annotated[int, Field(ge=1, le=10_000)] = 20
    warmup: Annotated[int, Field(ge=0, le=1000)] = 3
    layers: Annotated[int, Field(ge=1, le=64)] = 2
    """Layers per group: metadata is planned once and run for each layer."""
    graph_replays: Annotated[int, Field(ge=1, le=100)] = 2
    flashinfer_prefill_backend: Literal["auto", "fa2", "fa3"] = "auto"
    strict_fa_version: bool = False
    """Refuse to run another FlashAttention version than the plan's (else run it and say so)."""
    persistent_kernel_cache: bool = True
    """Let FA4 keep compiled kernels on disk, so a second smoke run does not recompile."""
    measure: bool = True


class SmokePlansFile(BaseModel):
    """A plans file: the plans to run and, optionally, options."""

    model_config = ConfigDict(extra="forbid")

    plans: list[SmokePlan] = Field(min_length=1)
    options: SmokeOptions = Field(default_factory=SmokeOptions)


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for item in loc:
        text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else item)
    return text


def bind_plan(catalog: Catalog, /, **fields: Any) -> SmokePlan:
    """The plan of ``fields`` bound to ``catalog``: its ``engine`` (default: the engine a
    command uses when none is named, ``Catalog.choose``) and that engine's kernel call
    contract file. Raises :class:`pydantic.ValidationError` for a bad field."""
    return SmokePlan.model_validate(_bound(fields, catalog))


_UNRESOLVED = "<no engine profile>"
"""The contract file of a plan whose engine the catalog lacks: the loader refuses the
plan right after validation, naming its engine field."""


def _bound(fields: Mapping[str, Any], catalog: Catalog) -> dict[str, Any]:
    data = dict(fields)
    engine = data.setdefault("engine", catalog.choose(None).name)
    data["kernel_calls"] = kernel_calls_file(engine, catalog) \
        if isinstance(engine, str) and engine in catalog.engine_dirs else _UNRESOLVED
    return data


def load_plans_file(path: Path, catalog: Catalog) -> SmokePlansFile:
    """Read a plans file (an object with ``plans``, or a bare list of plans), each plan
    bound to ``catalog`` (:func:`bind_plan`)."""
    source = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("file not found", file=source) from None
    except json.JSONDecodeError as error:
        raise InputError(f"invalid JSON: {error.msg} (column {error.colno})", file=source,
                         line=error.lineno) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise InputError(f"cannot read: {error}", file=source) from None
    if isinstance(data, list):
        data = {"plans": data}
    if isinstance(data, dict) and isinstance(data.get("plans"), list):
        plans_data = data["plans"]
        for index, plan in enumerate(plans_data):
            if isinstance(plan, dict):
                if "kernel_calls" in plan:  # the catalog's to give, never the file's
                    raise InputError("unknown field", file=source,
                                     field=f"plans[{index}].kernel_calls")
                plans_data[index] = _bound(plan, catalog)
    try:
        plans = SmokePlansFile.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise InputError(message, file=source,
                         field=_location(tuple(first["loc"])) or None) from None

    known = catalog.engine_dirs
    for index, plan in enumerate(plans.plans):
        if plan.engine not in known:
            raise InputError(f"no engine profile for {plan.engine}", file=source,
                             field=f"plans[{index}].engine", hint="known: " + ", ".join(known))
    return plans
