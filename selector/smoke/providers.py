"""Kernel providers: the libraries that can take a backend's calls, the engine's own first.

The kernel call contract lists, per backend, the providers in the order they are tried:
vLLM's own backend classes (builder and impl, :mod:`selector.smoke.backend_classes`) and
kernels when ``vllm`` is importable, vLLM's compiled extensions loaded by
path (``VLLM_KERNELS_DIR``), then standalone packages. A provider turns a call made with
vLLM's argument names into its own entry point's call, as the data says (``bind``,
``fixed``, ``drops``); compiled ops are bound by name from their schemas (FlashMLA's
unnamed op arguments by the position the data lists).

When the plan negotiated one FlashAttention version and only another one runs here,
the result says so: :attr:`ProviderChoice.substitution`, which the verdict reports as
SUBSTITUTED (never PASS).

torch is imported by the caller and passed in.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from selector.errors import CannotRunHereError
from selector.platforms import platform_module
from selector.smoke.contract import (
    Dtype,
    ProviderSpec,
    ResolvedCall,
    TensorRef,
    load_contract,
    resolve_calls,
)
from selector.smoke.environment import INSTALL_HINT, package_version
from selector.smoke.plan import SmokePlan

__all__ = [
    "KERNELS_DIR_VARIABLE",
    "Provider",
    "ProviderChoice",
    "backend_class_problem",
    "choose_provider",
    "cross_check_provider",
    "materialize",
    "platform_providers",
]

Torch: TypeAlias = Any
KERNELS_DIR_VARIABLE = "VLLM_KERNELS_DIR"
"""Folder holding vLLM's compiled attention extensions (``_vllm_fa3_C.abi3.so``...)."""


def materialize(arguments: dict[str, Any], tensors: dict[str, Any], torch: Torch
                ) -> dict[str, Any]:
    """Replace tensor names with the step's tensors and dtype names with torch dtypes."""
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if isinstance(value, TensorRef):
            if value.name not in tensors:
                raise KeyError(f"argument {name}: the step has no tensor {value.name!r}")
            out[name] = tensors[value.name]
        elif isinstance(value, Dtype):
            out[name] = getattr(torch, value.name)
        else:
            out[name] = value
    return out


@dataclass
class Provider:
    """A loaded provider: entry points taking vLLM's argument names."""

    spec: ProviderSpec
    label: str
    entries: dict[str, Callable[..., Any]]

    @property
    def fa_version(self) -> int | None:
        versions = self.spec.fa_versions
        return versions[0] if versions and len(versions) == 1 else None

    def call(self, entry_point: str, arguments: dict[str, Any]) -> Any:
        if entry_point not in self.entries:
            raise CannotRunHereError(f"{self.label} has no {entry_point}")
        return self.entries[entry_point](**arguments)


@dataclass
class ProviderChoice:
    provider: Provider
    substitution: str | None = None
    """Why the plan's negotiated kernel did not run (None: it did)."""
    skipped: list[str] = field(default_factory=list)


def _adapt(spec: ProviderSpec, entry_point: str, arguments: dict[str, Any],
           torch: Torch) -> dict[str, Any]:
    """vLLM's keyword arguments -> the provider entry point's, as the data says."""
    kwargs = dict(arguments)
    for name, default in spec.defaults.get(entry_point, {}).items():
        if kwargs.get(name) is None:
            kwargs[name] = default.value
    for name in spec.drops.get(entry_point, []):
        kwargs.pop(name, None)
    kwargs.update(spec.force.get(entry_point, {}))
    if spec.cumulative_seqlens_k and "seqused_k" in kwargs:
        used = kwargs.pop("seqused_k")
        cumulative = torch.zeros(used.shape[0] + 1, dtype=torch.int32, device=used.device)
        cumulative[1:] = torch.cumsum(used, 0)
        kwargs["cu_seqlens_k"] = cumulative
    renamed: dict[str, Any] = {}
    bind = spec.bind.get(entry_point, {})
    for name, given in kwargs.items():
        target = bind.get(name, name)
        value = given
        if name == "window_size" and spec.window_unbounded != -1 and given is not None:
            value = tuple(spec.window_unbounded if side == -1 else side for side in given)
        if isinstance(target, list):
            for part, item in zip(target, value, strict=True):
                renamed[part] = item
        else:
            renamed[target] = value
    for target, source in spec.same_as.get(entry_point, {}).items():
        renamed.setdefault(target, renamed.get(source))
    renamed.update(spec.fixed.get(entry_point, {}))
    return renamed


def _first(result: Any) -> Any:
    return result[0] if isinstance(result, list | tuple) else result


def _module_entry(spec: ProviderSpec, entry_point: str, function: Callable[..., Any],
                  torch: Torch) -> Callable[..., Any]:
    def call(**arguments: Any) -> Any:
        return _first(function(**_adapt(spec, entry_point, arguments, torch)))
    return call


def _op_entry(spec: ProviderSpec, entry_point: str, op: Any, torch: Torch
              ) -> Callable[..., Any]:
    schema = op._schema
    arguments_ = list(schema.arguments)
    names = [argument.name for argument in arguments_]
    order = spec.positional.get(entry_point)
    if order is not None and len(order) != len(names):
        raise CannotRunHereError(
            f"{spec.id}.{entry_point}: the op takes {len(names)} arguments ({schema}), the "
            f"contract lists {len(order)}; this build does not match the engine version")

    def call(**arguments: Any) -> Any:
        kwargs = _adapt(spec, entry_point, arguments, torch)
        if order is not None:
            return _first(op(*[kwargs.pop(name, None) for name in order]))
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for argument in arguments_:
            name = argument.name
            if name in kwargs:
                value = kwargs.pop(name)
            elif argument.has_default_value():
                continue
            elif isinstance(argument.type, torch._C.OptionalType):
                value = None
            else:
                raise TypeError(f"{spec.id}.{entry_point}: no value for required op "
                                f"argument {name!r} ({schema})")
            if argument.kwarg_only:
                keywords[name] = value
            else:
                positional.append(value)
        if kwargs:
            raise TypeError(f"{spec.id}.{entry_point}: the op has no argument(s) "
                            f"{sorted(kwargs)} ({schema})")
        return _first(op(*positional, **keywords))
    return call


def backend_class_problem(backend: str) -> str | None:
    """Why the installed vLLM's class of ``backend`` cannot run through the smoke's
    backend-classes step (None: it can)."""
    vllm = importlib.import_module("vllm")
    registry = importlib.import_module("vllm.v1.attention.backends.registry")
    enum = registry.AttentionBackendEnum
    if backend not in enum.__members__:
        return f"vLLM {vllm.__version__} has no attention backend {backend}"
    cls = enum[backend].get_class()
    if not hasattr(cls, "get_kv_cache_shape"):
        return (f"vLLM {vllm.__version__}'s {cls.__name__} has no get_kv_cache_shape (the "
                "release's runner views one flat buffer per layer, "
                "vllm/v1/kv_cache_interface.py create_kv_cache_views), which the smoke does "
                "not build; it runs the backend classes of the releases whose backends state "
                "their KV cache shape")
    return None


def _load(spec: ProviderSpec, torch: Torch) -> Provider:
    if spec.kind == "backend_classes":
        assert spec.module is not None
        module = importlib.import_module(spec.module)
        return Provider(spec, f"vLLM {module.__version__} backend classes", {})
    if spec.kind == "module":
        assert spec.module is not None
        module = importlib.import_module(spec.module)
        entries = {name: _module_entry(spec, name, getattr(module, target), torch)
                   for name, target in spec.entry_points.items() if hasattr(module, target)}
        version = package_version(spec.distribution or spec.module)
        return Provider(spec, f"{spec.module} {version}", entries)
    folder = os.environ.get(KERNELS_DIR_VARIABLE)
    if not folder:
        raise CannotRunHereError(f"{KERNELS_DIR_VARIABLE} is not set")
    assert spec.library_file is not None and spec.namespace is not None
    path = Path(folder) / spec.library_file
    if not path.is_file():
        raise CannotRunHereError(f"{path} does not exist")
    namespace = getattr(torch.ops, spec.namespace)
    first = next(iter(spec.entry_points.values()))
    if not hasattr(namespace, first):
        torch.ops.load_library(str(path))
    entries = {name: _op_entry(spec, name, getattr(namespace, target).default, torch)
               for name, target in spec.entry_points.items()}
    versions = (path.parent / "VERSIONS").read_text(encoding="utf-8").split()[1] \
        if (path.parent / "VERSIONS").is_file() else "unknown build"
    return Provider(spec, f"{spec.namespace} ({versions}, {path})", entries)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _requirements_missing(spec: ProviderSpec, backend: str) -> list[str]:
    return [name for name in spec.requires.get(backend, []) if not _importable(name)]


def cross_check_provider(plan: SmokePlan, primary: ProviderSpec) -> ProviderSpec | None:
    """vLLM's backend classes to run beside ``primary`` for ``plan`` (the contract's
    ``cross_checks``), when vLLM and the modules they need are importable here."""
    if primary.kind == "backend_classes":
        return None
    for spec in load_contract(plan.kernel_calls).providers:
        if spec.kind == "backend_classes" and plan.backend in spec.cross_checks and \
                spec.module and _importable(spec.module) and \
                not _requirements_missing(spec, plan.backend):
            try:
                if backend_class_problem(plan.backend):
                    return None
            except ImportError:
                return None
            return spec
    return None


def _unsupported(spec: ProviderSpec, calls: list[ResolvedCall]) -> list[str]:
    problems = []
    for call in calls:
        refused = spec.unsupported.get(call.entry_point, [])
        for stage in call.stages.values():
            problems += [name for name in refused if name in stage
                         and stage[name].value is not None]
    return problems


def platform_providers(plan: SmokePlan) -> list[ProviderSpec]:
    """The kernel providers of ``plan``'s backend that its platform's module tries, in
    order, from those the engine's contract lists (:mod:`selector.platforms`)."""
    listed = load_contract(plan.kernel_calls).providers_for(plan.backend)
    return platform_module(plan.platform).kernel_providers(plan.backend, listed)


def choose_provider(plan: SmokePlan, torch: Torch, *, strict: bool = False) -> ProviderChoice:
    """The first provider, in the contract's order, that can take ``plan``'s calls here.

    Providers of the negotiated FlashAttention version are tried before others; running
    another version is a substitution (refused when ``strict``).
    """
    specs = platform_providers(plan)
    exact = [s for s in specs if plan.fa_version is None or s.fa_versions is None
             or plan.fa_version in s.fa_versions]
    others = [s for s in specs if s not in exact]
    calls = resolve_calls(plan)
    skipped: list[str] = []
    for spec in exact + ([] if strict else others):
        missing = _requirements_missing(spec, plan.backend)
        if missing:
            skipped.append(f"{spec.id}: needs {', '.join(missing)}")
            continue
        refused = _unsupported(spec, calls)
        if refused:
            skipped.append(f"{spec.id}: cannot take {', '.join(refused)}")
            continue
        if plan.kernel_block_size % spec.min_block_multiple:
            skipped.append(f"{spec.id}: needs a page size that is a multiple of "
                           f"{spec.min_block_multiple}")
            continue
        try:
            problem = backend_class_problem(plan.backend) \
                if spec.kind == "backend_classes" else None
            if problem:
                raise CannotRunHereError(problem)
            provider = _load(spec, torch)
        except Exception as error:  # a broken install raises more than ImportError
            skipped.append(f"{spec.id}: {type(error).__name__}: {error}".splitlines()[0][:200])
            continue
        substitution = None
        if spec in others:
            ran = f"FA{provider.fa_version}" if provider.fa_version else provider.spec.id
            substitution = (f"the plan negotiated FA{plan.fa_version}, which cannot run here "
                            f"({'; '.join(skipped)}); ran {ran} ({provider.label}) instead")
        return ProviderChoice(provider, substitution, skipped)
    wanted = f"FA{plan.fa_version} " if plan.fa_version else ""
    raise CannotRunHereError(
        f"plan '{plan.name}' ({plan.backend}): no {wanted}kernel provider can run here: "
        f"{'; '.join(skipped) or 'none listed'}; install vLLM, set {KERNELS_DIR_VARIABLE} to "
        f"a folder with vLLM's compiled attention extensions, or {INSTALL_HINT}")
