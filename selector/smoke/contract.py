"""The kernel call contract: how an engine version calls each attention kernel, as data.

``schemas/engines/<engine>/kernel-calls.yaml`` lists, per backend, every kernel call vLLM
makes (entry point, wrapper construction, ``plan()`` and ``run()`` arguments) with the
vLLM source line each argument comes from, and, per provider (the engine's own kernels
first, then standalone packages), how that provider takes the call. :func:`resolve_calls`
turns a :class:`~selector.smoke.plan.SmokePlan` and a batch into concrete calls: literal
values, plan quantities and the names of the tensors the step supplies. The smoke step
and the bench pass exactly these arguments; :func:`dry_run` prints them.

Pure Python: no torch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from selector.catalog import CatalogError, read_yaml
from selector.errors import CannotRunHereError
from selector.smoke.batch import BatchSpec
from selector.smoke.plan import SmokePlan

__all__ = [
    "CONDITIONS",
    "QUANTITIES",
    "ArgSpec",
    "BackendContract",
    "CallSpec",
    "Dtype",
    "KernelContract",
    "ProviderSpec",
    "ResolvedArg",
    "ResolvedCall",
    "TensorRef",
    "load_contract",
    "query_dtype",
    "resolve_arguments",
    "resolve_calls",
]


class ArgSpec(BaseModel):
    """One argument: a literal, a plan quantity or a named tensor, optionally conditional."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    value: Any = None
    from_: str | None = Field(default=None, alias="from")
    tensor: str | None = None
    when: str | None = None
    otherwise: ArgSpec | None = None
    source: str | None = None
    quote: str | None = None


class CallSpec(BaseModel):
    """One kernel call (or wrapper: construct, plan, run) of a backend."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str
    phase: Literal["decode", "prefill"] | None = None
    entry_point: str
    when: str | None = None
    source: str
    quote: str
    arguments: dict[str, ArgSpec] = Field(default_factory=dict)
    construct_: dict[str, ArgSpec] = Field(default_factory=dict, alias="construct")
    plan: dict[str, ArgSpec] = Field(default_factory=dict)
    run: dict[str, ArgSpec] = Field(default_factory=dict)

    def stage(self, name: str) -> dict[str, ArgSpec]:
        return {"construct": self.construct_, "plan": self.plan, "run": self.run,
                "arguments": self.arguments}[name]


class BackendContract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    library: str
    kv_cache_split: ArgSpec | None = None
    query_dtype: ArgSpec | None = None
    """The dtype the attention layer hands the kernel its query in (fp8 when quantized)."""
    notes: list[str] = Field(default_factory=list)
    calls: list[CallSpec]
    quantities: dict[str, ArgSpec] = Field(default_factory=dict)


class ProviderSpec(BaseModel):
    """How one library takes the engine's calls (see the comment above ``providers:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    backends: list[str]
    kind: Literal["module", "op_library", "backend_classes"]
    module: str | None = None
    distribution: str | None = None
    library_file: str | None = None
    namespace: str | None = None
    fa_versions: list[int] | None = None
    entry_points: dict[str, str]
    bind: dict[str, dict[str, str | list[str]]] = Field(default_factory=dict)
    fixed: dict[str, dict[str, Any]] = Field(default_factory=dict)
    same_as: dict[str, dict[str, str]] = Field(default_factory=dict)
    drops: dict[str, list[str]] = Field(default_factory=dict)
    defaults: dict[str, dict[str, ArgSpec]] = Field(default_factory=dict)
    """The entry point's Python defaults for arguments a vLLM call leaves out (an op has none)."""
    unsupported: dict[str, list[str]] = Field(default_factory=dict)
    force: dict[str, dict[str, Any]] = Field(default_factory=dict)
    positional: dict[str, list[str]] = Field(default_factory=dict)
    window_unbounded: int | None = -1
    cumulative_seqlens_k: bool = False
    min_block_multiple: int = 1
    compiles_on_first_use: bool = False
    """The library builds each kernel variant the first time it is called (a JIT compile:
    FlashInfer's modules, FA4's CuTe kernels), so a first run pays the compile."""
    compile_source: str | None = None
    cross_checks: list[str] = Field(default_factory=list)
    """``backend_classes``: backends another provider runs whose outputs vLLM's classes
    check beside it (same layers and data, compared with the reference and that provider)."""
    requires: dict[str, list[str]] = Field(default_factory=dict)
    """Per backend, modules that must be importable for this provider to take it (a
    compiled extension the backend's impl loads)."""
    stand_in_model: dict[str, dict[str, ArgSpec]] = Field(default_factory=dict)
    """``backend_classes``: the ``config.json`` of the model vLLM's config is built from, per
    plan kind (``attention``, ``mla``), each key a literal or a plan quantity."""
    source: str | None = None
    quote: str | None = None


class KernelContract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str
    constants: dict[str, ArgSpec] = Field(default_factory=dict)
    backends: dict[str, BackendContract]
    providers: list[ProviderSpec]

    def backend(self, name: str) -> BackendContract:
        try:
            return self.backends[name]
        except KeyError:
            raise CannotRunHereError(
                f"the {self.engine} kernel call contract has no entry for {name}, so the smoke "
                f"check cannot call it as vLLM does (it covers {', '.join(self.backends)})"
            ) from None

    def providers_for(self, backend: str) -> list[ProviderSpec]:
        return [p for p in self.providers if backend in p.backends]

    def compiles_on_first_use(self, backend: str) -> bool:
        """Every provider of ``backend`` JIT-compiles its kernels on first use (no
        prebuilt kernel of it can run without a compile)."""
        providers = self.providers_for(backend)
        return bool(providers) and all(p.compiles_on_first_use for p in providers)


@functools.cache
def load_contract(path: str) -> KernelContract:
    """The kernel call contract in ``path`` (a plan's :attr:`~SmokePlan.kernel_calls`,
    :func:`~selector.smoke.plan.kernel_calls_file`), read once."""
    if not Path(path).is_file():
        raise CannotRunHereError(f"no kernel call contract ({path} is missing)")
    try:
        return KernelContract.model_validate(read_yaml(Path(path)))
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CatalogError(f"{path}: {where}: {first['msg']}") from None


@dataclass(frozen=True)
class Dtype:
    """A torch dtype by name (``torch.<name>`` at call time)."""

    name: str

    def __str__(self) -> str:
        return f"torch.{self.name}"

    def torch(self, torch: Any) -> Any:
        return getattr(torch, self.name)


@dataclass(frozen=True)
class TensorRef:
    """A device tensor the step supplies under this name."""

    name: str

    def __str__(self) -> str:
        return f"<tensor {self.name}>"


FP8_STORAGE = "float8_e4m3fn"


@dataclass(frozen=True)
class _Context:
    plan: SmokePlan
    batch: BatchSpec | None
    graph_capture: bool


def _window_left(plan: SmokePlan) -> int:
    return -1 if plan.sliding_window is None else plan.sliding_window - 1


def _batch_value(function: Callable[[BatchSpec], int]) -> Callable[[_Context], Any]:
    def read(context: _Context) -> Any:
        return None if context.batch is None else function(context.batch)
    return read


def _q_tokens_per_kv_head(context: _Context) -> int | None:
    """FlashMLA's ``num_q_tokens_per_head_k``: longest query x query heads (one KV head)."""
    if context.batch is None:
        return None
    return max(r.query_len for r in context.batch.requests) * context.plan.num_q_heads


QUANTITIES: dict[str, Callable[[_Context], Any]] = {
    "num_requests": _batch_value(lambda batch: len(batch.requests)),
    "max_query_len": _batch_value(lambda batch: max(r.query_len for r in batch.requests)),
    "max_seq_len": _batch_value(lambda batch: max(r.seq_len for r in batch.requests)),
    "num_q_heads": lambda c: c.plan.num_q_heads,
    "q_tokens_per_kv_head": _q_tokens_per_kv_head,
    "num_kv_heads": lambda c: c.plan.num_kv_heads,
    "q_width": lambda c: c.plan.num_q_heads * c.plan.head_size,
    "model_dtype_name": lambda c: c.plan.dtype,
    "head_size": lambda c: c.plan.head_size,
    "page_size": lambda c: c.plan.kernel_block_size,
    "kv_layout": lambda c: c.plan.kv_layout,
    "fa_version": lambda c: c.plan.fa_version,
    "fa_version_is_3": lambda c: c.plan.fa_version == 3,
    "scale": lambda c: c.plan.scale,
    "window_left": lambda c: _window_left(c.plan),
    "window_size": lambda c: [_window_left(c.plan), 0 if c.plan.sliding_window else -1],
    "logits_soft_cap": lambda c: c.plan.logits_soft_cap,
    "logits_soft_cap_or_zero": lambda c: c.plan.logits_soft_cap or 0.0,
    "model_dtype": lambda c: Dtype(c.plan.dtype),
    "kv_storage_dtype": lambda c: Dtype(FP8_STORAGE if c.plan.fp8_kv else c.plan.dtype),
    "q_scale": lambda c: c.plan.q_scale,
    "k_scale": lambda c: c.plan.k_scale,
    "v_scale": lambda c: c.plan.v_scale,
    "kv_lora_rank": lambda c: c.plan.kv_lora_rank,
    "qk_rope_head_dim": lambda c: c.plan.qk_rope_head_dim,
    "graph_capture": lambda c: c.graph_capture,
}
"""Plan quantities the contract's ``from:`` may name (values vLLM derives the same way)."""

CONDITIONS: dict[str, Callable[[_Context], bool]] = {
    "full_graph": lambda c: c.plan.uses_full_graph,
    "fp8_kv": lambda c: c.plan.fp8_kv,
    "has_sinks": lambda c: c.plan.has_sinks,
    "sm90_or_newer": lambda c: c.plan.capability >= 90,
    "graph_capture": lambda c: c.graph_capture,
}
"""Plan conditions the contract's ``when:`` may name (besides boolean quantities)."""


@dataclass(frozen=True)
class ResolvedArg:
    name: str
    value: Any
    source: str | None

    def to_json(self) -> Any:
        value = self.value
        if isinstance(value, Dtype | TensorRef):
            return str(value)
        return value


@dataclass
class ResolvedCall:
    """One call as it will be made: entry point and arguments per stage."""

    backend: str
    name: str
    phase: str | None
    entry_point: str
    source: str
    stages: dict[str, dict[str, ResolvedArg]] = field(default_factory=dict)
    """``arguments`` (a plain call) or ``construct`` / ``plan`` / ``run`` (a wrapper)."""

    def arguments(self, stage: str = "arguments") -> dict[str, Any]:
        return {name: arg.value for name, arg in self.stages.get(stage, {}).items()}

    def to_json(self) -> dict[str, Any]:
        return {"call": self.name, "phase": self.phase, "entry_point": self.entry_point,
                "source": self.source,
                **{stage: {name: arg.to_json() for name, arg in args.items()}
                   for stage, args in self.stages.items()}}


class _Resolver:
    def __init__(self, contract: KernelContract, backend: BackendContract,
                 context: _Context) -> None:
        self.contract, self.backend, self.context = contract, backend, context

    def quantity(self, name: str, where: str) -> Any:
        if name in self.backend.quantities:
            return self.arg(self.backend.quantities[name], where)
        if name in self.contract.constants:
            return self.arg(self.contract.constants[name], where)
        if name in QUANTITIES:
            return QUANTITIES[name](self.context)
        raise CatalogError(f"{self.contract.engine} kernel-calls.yaml: {where} names unknown "
                           f"quantity {name!r}")

    def condition(self, name: str, where: str) -> bool:
        if name in CONDITIONS:
            return CONDITIONS[name](self.context)
        return bool(self.quantity(name, where))

    def arg(self, spec: ArgSpec, where: str) -> Any:
        if spec.when is not None and not self.condition(spec.when, where):
            return None if spec.otherwise is None else self.arg(spec.otherwise, where)
        if spec.tensor is not None:
            return TensorRef(spec.tensor)
        if spec.from_ is not None:
            return self.quantity(spec.from_, where)
        return spec.value

    def stage(self, specs: Mapping[str, ArgSpec], where: str) -> dict[str, ResolvedArg]:
        return {name: ResolvedArg(name, self.arg(spec, f"{where}.{name}"), spec.source)
                for name, spec in specs.items()}


def query_dtype(plan: SmokePlan) -> Dtype:
    """The query dtype the backend's kernel receives (the layer may quantize it to fp8)."""
    contract = load_contract(plan.kernel_calls)
    backend = contract.backend(plan.backend)
    if backend.query_dtype is None:
        return Dtype(plan.dtype)
    resolver = _Resolver(contract, backend, _Context(plan, None, False))
    value = resolver.arg(backend.query_dtype, f"{plan.backend}.query_dtype")
    return value if isinstance(value, Dtype) else Dtype(plan.dtype)


def resolve_arguments(plan: SmokePlan, specs: Mapping[str, ArgSpec], where: str
                      ) -> dict[str, Any]:
    """Plain values of ``specs`` (literals and plan quantities) for ``plan``."""
    contract = load_contract(plan.kernel_calls)
    backend = contract.backend(plan.backend)
    resolver = _Resolver(contract, backend, _Context(plan, None, False))
    return {name: arg.value for name, arg in resolver.stage(specs, where).items()}


def resolve_calls(plan: SmokePlan, batch: BatchSpec | None = None, *,
                  graph_capture: bool = False) -> list[ResolvedCall]:
    """Every call the plan's backend makes for ``batch``, as its engine version makes it."""
    contract = load_contract(plan.kernel_calls)
    backend = contract.backend(plan.backend)
    resolver = _Resolver(contract, backend, _Context(plan, batch, graph_capture))
    calls = []
    for spec in backend.calls:
        where = f"{plan.backend}.{spec.name}"
        if spec.when is not None and not resolver.condition(spec.when, where):
            continue
        call = ResolvedCall(plan.backend, spec.name, spec.phase, spec.entry_point, spec.source)
        for stage in ("construct", "plan", "run", "arguments"):
            specs = spec.stage(stage)
            if specs:
                call.stages[stage] = resolver.stage(specs, f"{where}.{stage}")
        calls.append(call)
    return calls
