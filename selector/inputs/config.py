"""User input -> a validated :class:`Deployment` -> request facts for the solver.

Every problem becomes an :class:`InputError` naming the file, the field (and its
line where the format allows) and a fix; nothing raises past this module.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from selector import kv  # KV options only for a model deployment: loaded on first use
from selector.catalog import DEFAULT_ENGINE_ENV, Catalog, EngineData, close_matches
from selector.errors import InputError
from selector.platforms import capability_int, platform_module
from selector.request import RequestFacts, deployment_request, single_layer_request
from selector.schema.device import Device
from selector.schema.request import Deployment, DeviceRef
from selector.schema.types import CudaGraphMode
from selector.util.inputfile import check_duplicate_keys, parse_json_text

if TYPE_CHECKING:
    from selector.kv import KVOptions
    from selector.models import ModelFacts

__all__ = [
    "LoadedDeployment",
    "ServeDefaults",
    "Target",
    "deployment_facts",
    "deployment_model",
    "deployment_whole_model",
    "device_names",
    "device_platform",
    "load_deployment",
    "parse_deployment",
    "resolve_device",
    "resolve_target",
]

_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class LoadedDeployment:
    """A parsed deployment with where it came from (for error locations)."""

    path: str
    text: str
    deployment: Deployment
    lines: dict[tuple[str, ...], int]
    """Field path -> line number (1-based), where known."""

    def line_of(self, path: tuple[str, ...]) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def _yaml_lines(node: Any, prefix: tuple[str, ...], out: dict[tuple[str, ...], int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                path = (*prefix, str(key.value))
                out[path] = key.start_mark.line + 1
                _yaml_lines(value, path, out)


def _toml_lines(text: str) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.match(r"^\[\s*([A-Za-z0-9_.\-\" ]+)\s*\]$", stripped)
        if header:
            table = tuple(p.strip().strip('"') for p in header.group(1).split("."))
            out.setdefault(table, number)
            continue
        key = re.match(r"^([A-Za-z0-9_\-\"]+(?:\s*\.\s*[A-Za-z0-9_\-\"]+)*)\s*=", stripped)
        if key:
            parts = tuple(p.strip().strip('"') for p in key.group(1).split("."))
            out.setdefault((*table, *parts), number)
    return out


def _parse_text(path: str, text: str) -> tuple[Any, dict[tuple[str, ...], int]]:
    suffix = Path(path).suffix.lower()
    if suffix == ".toml":
        if sys.version_info >= (3, 11):  # the TOML reader loads for a TOML file only
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        try:
            return tomllib.loads(text), _toml_lines(text)
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"not valid TOML: {exc}", file=path,
                             hint="check the TOML syntax") from None
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", file=path, line=exc.lineno,
                             hint="check the JSON syntax") from None
        lines: dict[tuple[str, ...], int] = {}
        try:
            # a JSON string holds no raw tab, so tabs are only indentation (which YAML refuses)
            node = yaml.compose(text.replace("\t", " "), Loader=yaml.SafeLoader)
        except (yaml.YAMLError, RecursionError):
            parse_json_text(text, source=path)  # a key given twice, without the YAML view
        else:
            check_duplicate_keys(node, source=path)
            _yaml_lines(node, (), lines)
        return data, lines
    try:
        data = yaml.safe_load(text)
        lines = {}
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        check_duplicate_keys(node, source=path)
        _yaml_lines(node, (), lines)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"not valid YAML: {getattr(exc, 'problem', None) or exc}", file=path,
            line=(mark.line + 1) if mark is not None else None, hint="check the YAML syntax",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not valid YAML: {exc}", file=path, hint="check the YAML syntax") from None
    return data, lines


def _field_names(model: Any, path: tuple[str | int, ...]) -> list[str]:
    current = model
    for part in path:
        if isinstance(part, int):
            return []
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        annotation = fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if hasattr(c, "model_fields")), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


_TYPE_WORDS = {"int_type": "a whole number", "float_type": "a number",
               "bool_type": "true or false", "string_type": "a string",
               "model_type": "a mapping of keys", "dict_type": "a mapping of keys",
               "list_type": "a list"}


def _written(value: Any) -> str:
    """How a value of the file reads, for "expected X, got Y"."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _type_hint(kind: str, value: Any) -> str:
    if kind in ("int_type", "float_type"):
        if isinstance(value, bool):
            return "write the number itself: true and false are not 1 and 0"
        if isinstance(value, str):
            return "write the number without quotes"
        return "write a whole number, e.g. 128" if kind == "int_type" else ""
    if kind == "bool_type":
        return "write true or false, without quotes"
    if kind == "string_type" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f'quote it: "{value}"'
    return ""


def _describe_error(err: Any) -> tuple[str, str]:
    loc = tuple(err["loc"])
    kind = err["type"]
    parent = tuple(p for p in loc[:-1] if not isinstance(p, int))
    if kind == "extra_forbidden":
        name = str(loc[-1])
        options = _field_names(Deployment, _clean_path(parent))
        return "unknown key", close_matches(name, options) if options else ""
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        value = err.get("input")
        options = re.findall(r"'([^']*)'", str(expected))
        if isinstance(value, str) and value.strip() in re.findall(r"(?<!')\b\d+\b(?!')",
                                                                 str(expected)):
            return f"expected a number, got the string {value!r}", f"write {expected}, without quotes"
        hint = close_matches(str(value), options) if options else f"expected {expected}"
        return f"unknown value {value!r}", hint
    if kind in _TYPE_WORDS:
        return f"expected {_TYPE_WORDS[kind]}, got {_written(err.get('input'))}", \
            _type_hint(kind, err.get("input"))
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, "), ""
    return err["msg"], ""


_BRANCH = re.compile(r"^(str|int|float|bool|none|DeviceRef|MLADims|KVConnector)$|[\[(]")
"""A union branch or validator step of pydantic's error location, not a field."""


def _clean_path(loc: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(str(p) for p in loc if isinstance(p, (str, int)) and not _BRANCH.search(str(p)))


def _leading_errors(errors: list[Any]) -> list[Any]:
    """The problems to report, the one to lead with first: an unknown key before the
    missing field it is a typo of (which is then no problem of its own), and of a union's
    branches the one the value was written for (the deepest)."""
    paths = [_clean_path(tuple(e["loc"])) for e in errors]
    typo_of: set[tuple[str, ...]] = set()
    for err, path in zip(errors, paths, strict=True):
        if err["type"] == "extra_forbidden" and path:
            options = _field_names(Deployment, path[:-1])
            for hit in difflib.get_close_matches(path[-1], options, n=3, cutoff=0.6):
                typo_of.add((*path[:-1], hit))
    kept = []
    for index, (err, path) in enumerate(zip(errors, paths, strict=True)):
        if err["type"] == "missing" and path in typo_of:
            continue
        if err["type"].endswith("_type") and any(
                other[:len(path)] == path and len(other) > len(path)
                for j, other in enumerate(paths) if j != index):
            continue
        kept.append(err)
    kept.sort(key=lambda e: e["type"] != "extra_forbidden")
    return kept or errors


def _model_config_error(path: str, data: dict[str, Any],
                        lines: dict[tuple[str, ...], int]) -> InputError | None:
    """A Hugging Face ``config.json`` given where a deployment belongs: how to check it."""
    marks = [key for key in ("architectures", "model_type") if key in data]
    if not marks or {"device", "model", "layer"} & set(data):
        return None
    folder = Path(path).parent
    return InputError(
        f"this is a Hugging Face model config ({marks[0]!r}, no `device:`), not a deployment "
        "file", file=path, line=lines.get((marks[0],)),
        hint=f"check the model from a deployment file with `model: {Path(path).name}` and "
             f"`device: H100` next to it, or a serve line: attn-select check --device H100 "
             f"-- vllm serve {folder}")


def parse_deployment(path: str, text: str) -> LoadedDeployment:
    """Parse and validate one deployment file's text."""
    if not text.strip():
        raise InputError("the file is empty", file=path,
                         hint="a deployment needs at least `device:` (see examples/)")
    data, lines = _parse_text(path, text)
    if not isinstance(data, dict):
        raise InputError(f"the top level must be a mapping of keys, not {type(data).__name__}",
                         file=path, hint="start with e.g. `device: H100`")
    model_config = _model_config_error(path, data, lines)
    if model_config is not None:
        raise model_config
    try:
        deployment = Deployment.model_validate(data, strict=True)  # taken as written
    except ValidationError as exc:
        errors = _leading_errors(exc.errors())
        first = errors[0]
        clean = _clean_path(tuple(first["loc"]))
        message, hint = _describe_error(first)
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        field_path = ".".join(clean)
        line = None
        probe = tuple(clean)
        while probe:
            if probe in lines:
                line = lines[probe]
                break
            probe = probe[:-1]
        raise InputError(message + more, file=path, field=field_path or None, hint=hint or None,
                         line=line) from None
    if deployment.model is not None and "layer" in data:
        raise InputError("`layer:` and `model:` cannot be combined: with a model every layer's "
                         "facts come from its config.json, so this block would be ignored",
                         file=path, field="layer", line=lines.get(("layer",)),
                         hint="remove `layer:` (or remove `model:` to check one uniform layer)")
    return LoadedDeployment(path=path, text=text, deployment=deployment, lines=lines)


def load_deployment(path: str) -> LoadedDeployment:
    """Read a deployment file (YAML, TOML or JSON)."""
    file = Path(path)
    if not file.exists():
        raise InputError("no such file", file=path, hint="check the path")
    if not file.is_file():
        raise InputError("not a file", file=path)
    raw = file.read_bytes()
    if len(raw) > _MAX_BYTES:
        raise InputError(f"the file is too large ({len(raw)} bytes)", file=path,
                         hint="a deployment file is a few hundred bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=path,
                         hint="deployment files are YAML, TOML or JSON text") from None
    if "\x00" in text:
        raise InputError("the file contains binary data", file=path,
                         hint="deployment files are YAML, TOML or JSON text")
    return parse_deployment(path, text)


def resolve_device(deployment: Deployment, catalog: Catalog) -> tuple[Device | None, int, str]:
    """(catalog device or None, capability int, display name); the capability read by
    the device's platform module (:func:`device_platform` names the platform)."""
    device = deployment.device
    if isinstance(device, DeviceRef):
        module = platform_module(catalog.platform(device.platform or catalog.default_platform).name)
        cc = module.parse_capability(device.capability)
        return None, cc, device.name or module.arch_of(cc)
    entry = catalog.device(device)
    return entry, capability_int(entry), entry.name


def device_platform(deployment: Deployment, catalog: Catalog) -> str:
    """The platform of the deployment's device (a catalog device's ``platform:``, a
    device given by capability its ``platform`` or the default platform)."""
    device = deployment.device
    if isinstance(device, DeviceRef):
        return catalog.platform(device.platform or catalog.default_platform).name
    return catalog.device(device).platform


def device_names(device: Device) -> tuple[str, ...]:
    """The names a catalog device goes by (its name and aliases, the ``nvidia-smi`` name
    among them): what vLLM's device-name tests read."""
    return (device.name, *device.aliases)


@dataclass(frozen=True)
class ServeDefaults:
    """The batch limits and memory fraction ``vllm serve`` runs a model deployment with:
    the deployment's own values, else the engine's defaults for this device
    (``defaults.yaml``, :meth:`~selector.catalog.Catalog.engine_defaults`)."""

    max_num_batched_tokens: int
    max_num_seqs: int
    gpu_memory_utilization: float
    utilization_default: bool
    """``gpu_memory_utilization`` is the engine's default (the deployment gives none)."""
    cudagraph_capture_sizes: tuple[int, ...]
    """The CUDA-graph capture sizes vLLM computes from these limits (none without graphs)."""


@dataclass(frozen=True)
class Target:
    """What one deployment runs on, resolved once and read by every later stage: the
    engine release (``--engine`` > the file's ``engine:`` > ``$ATTN_SELECT_ENGINE`` >
    the installed vLLM > the newest profile), the device with its memory basis, and the
    engine's defaults the deployment does not override."""

    engine: EngineData
    """The engine release, loaded for the device's platform (:attr:`platform`)."""
    device: Device | None
    """The catalog device (None: a device given by capability)."""
    cc: int
    """The capability as profiles read it, by the platform's module (``9.0`` -> 90)."""
    device_name: str
    memory_bytes: int | None
    """The total memory vLLM sees on one GPU (what CUDA reports where known, else the
    nominal figure: :func:`selector.memory.device_total_memory`); None: unknown."""
    memory_source: str
    cudagraph_mode: CudaGraphMode
    """The deployment's, else the engine's default."""
    serve: ServeDefaults | None = None
    """A model deployment's batch limits (None for a single layer: no memory stage)."""

    @property
    def platform(self) -> str:
        """The platform the device belongs to (``cuda``): the engine was loaded for it."""
        return self.engine.platform


def _engine_of(loaded: LoadedDeployment, catalog: Catalog, engine: str | None,
               platform: str) -> EngineData:
    """The engine the deployment is checked with, loaded for ``platform``: ``engine`` (the
    command line's flag), else the file's ``engine:``, else the default
    (``$ATTN_SELECT_ENGINE`` ...), each error located where the engine was given; a
    release without the device's platform is the device's error."""
    name = _engine_name(loaded, catalog, engine)
    try:
        return catalog.engine(name, platform)
    except InputError as exc:
        raise InputError(exc.message, file=loaded.path, field="device", hint=exc.hint,
                         line=loaded.line_of(("device",))) from None


def _engine_name(loaded: LoadedDeployment, catalog: Catalog, engine: str | None) -> str:
    d = loaded.deployment
    if engine:
        try:
            return catalog.choose(engine).name
        except InputError as exc:
            raise InputError(exc.message, field="--engine", hint=exc.hint) from None
    if d.engine:
        try:
            return catalog.choose(d.engine).name
        except InputError as exc:
            raise InputError(exc.message, file=loaded.path, field="engine", hint=exc.hint,
                             line=loaded.line_of(("engine",))) from None
    try:
        return catalog.choose(None).name
    except InputError as exc:  # only $ATTN_SELECT_ENGINE can name no profile here
        raise InputError(exc.message.removeprefix(f"{DEFAULT_ENGINE_ENV}: "), file="environment",
                         field=DEFAULT_ENGINE_ENV,
                         hint=f"{exc.hint}; or give --engine, which wins over the environment"
                         if exc.hint else "give --engine, which wins over the environment"
                         ) from None


def _in_engine(message: str, engine: EngineData) -> str:
    """The tool's refusal names the engine it was checked against (vLLM's names its
    release already)."""
    return f"{message} in {engine.engine}" if message.startswith("unknown ") else message


def _check_against_engine(loaded: LoadedDeployment, catalog: Catalog, engine: EngineData) -> None:
    """The names the deployment gives (backends, the MLA prefill backend, environment
    facts) are the engine's; an error names the file, line and the engine."""
    d = loaded.deployment
    path = loaded.path
    names = [d.attention_backend, *d.attention_config.backend_per_kind.values()]
    known = set(engine.backends) | kv.model_driven_names(engine.engine, catalog)
    for name in names:
        if name is not None and name.upper() not in known:
            others = close_matches(name.upper(), sorted(known))
            raise InputError(
                _in_engine(engine.unknown_backend(name), engine), file=path,
                field="attention_backend", line=loaded.line_of(("attention_backend",)),
                hint=others or f"{engine.engine} has no such backend",
            )
    if d.attention_config.mla_prefill_backend is not None:
        from selector.solver.mla_prefill import prefill_backend_name  # lazy: only a pinned prefill

        try:
            prefill_backend_name(engine, d.attention_config.mla_prefill_backend, catalog)
        except InputError as exc:
            raise InputError(exc.message, file=path, field="attention_config.mla_prefill_backend",
                             hint=exc.hint, line=loaded.line_of(("attention_config", "mla_prefill_backend"))
                             ) from None
    known_env = {k.removeprefix("env_") for k in engine.profile.environment}
    for other in catalog.platforms:  # another platform's fact: no effect here (AS170), no error
        if other.name != engine.platform:
            try:
                known_env |= {k.removeprefix("env_") for k in
                              catalog.engine(engine.engine, other.name).profile.environment}
            except InputError:
                continue
    unknown_env = sorted(set(d.environment) - known_env)
    if unknown_env:
        options = [k.removeprefix("env_") for k in engine.profile.environment]
        raise InputError(f"unknown environment fact {unknown_env[0]!r}", file=path,
                         field=f"environment.{unknown_env[0]}",
                         line=loaded.line_of(("environment", unknown_env[0])),
                         hint=close_matches(unknown_env[0], options))


def resolve_target(loaded: LoadedDeployment, catalog: Catalog, engine: str | None = None
                   ) -> Target:
    """The deployment's :class:`Target`, validated against its engine (``engine``: the
    command line's ``--engine``, which wins over the file and the environment)."""
    d = loaded.deployment
    try:
        device, cc, device_name = resolve_device(d, catalog)
        platform = device.platform if device is not None else device_platform(d, catalog)
    except InputError as exc:
        raise InputError(exc.message, file=loaded.path, field="device", hint=exc.hint,
                         line=loaded.line_of(("device",))) from None
    engine_data = _engine_of(loaded, catalog, engine, platform)
    _check_against_engine(loaded, catalog, engine_data)
    defaults = catalog.engine_defaults(engine_data.engine)
    mode: CudaGraphMode = d.cudagraph_mode or defaults.cudagraph_mode.value
    if d.model is None:
        return Target(engine=engine_data, device=device, cc=cc, device_name=device_name,
                      memory_bytes=None, memory_source="", cudagraph_mode=mode)
    from selector.memory import device_total_memory  # lazy: a model deployment only

    nominal = device.memory_gib if device is not None else getattr(d.device, "memory_gib", None)
    total = device_total_memory(device_name, nominal, catalog.platform(platform).runtime)
    memory_bytes, memory_source = total if total is not None else (None, "")
    names = device_names(device) if device is not None else (device_name,)
    tokens, seqs = defaults.batch_defaults(names, memory_bytes,
                                           platform_module(platform).capability_text(cc))
    tokens = d.max_num_batched_tokens or tokens
    seqs = d.max_num_seqs or seqs
    # the uniform decode query of speculative decoding: 1 + num_speculative_tokens
    query = 1 + d.speculative.num_speculative_tokens
    sizes = defaults.cudagraph_capture.sizes(seqs, tokens, cc, query) if mode != "NONE" else ()
    serve = ServeDefaults(
        max_num_batched_tokens=tokens, max_num_seqs=seqs,
        gpu_memory_utilization=d.gpu_memory_utilization or defaults.gpu_memory_utilization.value,
        utilization_default=d.gpu_memory_utilization is None, cudagraph_capture_sizes=sizes)
    return Target(engine=engine_data, device=device, cc=cc, device_name=device_name,
                  memory_bytes=memory_bytes, memory_source=memory_source, cudagraph_mode=mode,
                  serve=serve)


def deployment_facts(loaded: LoadedDeployment, catalog: Catalog,
                     target: Target | None = None) -> RequestFacts:
    """The request facts the solver reads, derived from one single-layer deployment
    (``target``: its resolved :class:`Target`; resolved here when not given)."""
    d = loaded.deployment
    path = loaded.path
    target = target or resolve_target(loaded, catalog)
    engine, cc = target.engine, target.cc
    layer = d.layer
    tp = d.parallel.tensor_parallel_size
    if layer.num_heads % tp:
        raise InputError(
            f"num_heads {layer.num_heads} is not divisible by tensor_parallel_size {tp}",
            file=path, field="layer.num_heads", line=loaded.line_of(("layer", "num_heads")),
            hint="vLLM requires the attention heads to split evenly across tensor-parallel ranks",
        )
    q_heads = layer.num_heads // tp
    kv_total = layer.num_kv_heads or layer.num_heads
    if layer.num_heads % kv_total:
        raise InputError(
            f"num_heads {layer.num_heads} is not a multiple of num_kv_heads {kv_total}",
            file=path, field="layer.num_kv_heads", line=loaded.line_of(("layer", "num_kv_heads")),
            hint="grouped-query attention needs num_heads = k * num_kv_heads",
        )
    mla = layer.mla
    head_size = layer.head_size
    if mla is not None:
        mla_head = mla.kv_lora_rank + mla.qk_rope_head_dim
        if head_size is not None and head_size != mla_head:
            raise InputError(
                f"head_size {head_size} differs from kv_lora_rank + qk_rope_head_dim = {mla_head}",
                file=path, field="layer.head_size", line=loaded.line_of(("layer", "head_size")),
                hint="for MLA, leave head_size out (it is kv_lora_rank + qk_rope_head_dim)",
            )
        head_size = mla_head
    if head_size is None:
        raise InputError("missing head_size", file=path, field="layer.head_size",
                         line=loaded.line_of(("layer",)),
                         hint="give layer.head_size (e.g. 128), layer.mla dimensions, or a `model:`")
    known = set(engine.profile.inputs) | set(engine.profile.environment)
    return single_layer_request(d, cc, head_size=head_size, q_heads=q_heads, kv_total=kv_total,
                                vocabulary=known)


def deployment_whole_model(loaded: LoadedDeployment) -> ModelFacts:
    """The whole model (before tensor parallelism) a deployment's ``model:`` names, read
    once; an error names the config.json's line or the deployment's ``model:`` line."""
    from selector.models import load_model

    d = loaded.deployment
    path = loaded.path
    assert d.model is not None
    reference = d.model
    candidate = Path(path).parent / reference
    if ("/" in reference or reference.endswith(".json")) and candidate.exists():
        reference = str(candidate)
    try:
        return load_model(reference)
    except InputError as exc:
        in_config = exc.file is not None and exc.file != path
        raise InputError(exc.message, file=exc.file or path, field=exc.field or "model",
                         hint=exc.hint,
                         line=exc.line if in_config else loaded.line_of(("model",))) from None


def model_kinds(model: ModelFacts, engine: EngineData) -> frozenset[str]:
    """What vLLM's config knows of the model before any layer is built: ``pooling`` (the
    pooling runner ``--runner auto`` resolves for its first architecture the registry
    has, ``ModelConfig._get_default_runner_type``: the profile's ``runner_types.json``)
    and ``encoder_decoder`` (``model_config.is_encoder_decoder``)."""
    from selector.models.arch_registry import load_model_registry, pooling_architectures

    kinds = {"encoder_decoder"} if model.is_encoder_decoder else set()
    registry = load_model_registry(engine.directory)
    pooling = pooling_architectures(engine.directory)
    if registry is not None and pooling is not None:
        supported = set(registry.supported)
        first = next((a for a in model.architectures or (model.architecture,) if a in supported),
                     None)
        if first in pooling:
            kinds.add("pooling")
    return frozenset(kinds)


def deployment_model(loaded: LoadedDeployment, catalog: Catalog, target: Target | None = None,
                     model: ModelFacts | None = None
                     ) -> tuple[ModelFacts, RequestFacts, KVOptions]:
    """(model facts sharded per rank, deployment-level facts, KV options) of a deployment
    that names a ``model``. ``target``: its resolved :class:`Target` (resolved here when
    not given); ``model``: the whole model already read (e.g. with ``--hf-overrides``
    applied; read from ``model:`` when not given). The KV options carry the target's
    batch limits and memory fraction: the same figures the memory budget uses."""
    from selector.memory import default_max_model_len, raw_config, startup_profile
    from selector.models import shard_model

    d = loaded.deployment
    assert d.model is not None
    target = target or resolve_target(loaded, catalog)
    assert target.serve is not None
    engine, cc, serve = target.engine, target.cc, target.serve
    model = shard_model(model or deployment_whole_model(loaded), d.parallel.tensor_parallel_size)
    default = model.kv_cache_dtype_default
    if default is not None and default.applies(d.kv_cache_dtype, cc, engine.engine):
        # the model's verify_and_update_config (families.yaml kv_cache_dtype_default)
        d = d.model_copy(update={"kv_cache_dtype": default.dtype})
    max_model_len = d.max_model_len
    if max_model_len is None or max_model_len == "auto":  # the model's length (auto-fit
        # shortens it to the memory at start-up: selector/memory/startup.py)
        max_model_len = default_max_model_len(raw_config(model),
                                              startup_profile(catalog, engine.engine))
    # VllmConfig.__post_init__ changes the mode for the kind of model (defaults.yaml)
    kinds = model_kinds(model, engine)
    # (and, first, the architecture's own default when the deployment sets no mode)
    overrides = catalog.engine_defaults(engine.engine).cudagraph_model_overrides
    mode, override = overrides.apply(target.cudagraph_mode, kinds, architecture=model.architecture,
                                     user_set=d.cudagraph_mode is not None)
    arch_default = overrides.architecture_default(model.architecture)
    # the hook's compilation mode NONE: no VLLM_COMPILE, so splitting_ops stays empty
    # (vllm/config/compilation.py set_splitting_ops_for_v1) and attention is not a split
    # point: a FULL mode a backend cannot honour becomes FULL_DECODE_ONLY, not
    # FULL_AND_PIECEWISE (resolve_cudagraph_mode_and_sizes)
    compile_none = ({"vllm_compile": False, "attention_in_splitting_ops": False}
                    if arch_default is not None and arch_default.compilation_mode == "NONE"
                    else {})
    options = kv.KVOptions(
        kv_cache_dtype=d.kv_cache_dtype,
        block_size=d.block_size,
        enable_prefix_caching=d.enable_prefix_caching,
        num_speculative_tokens=d.speculative.num_speculative_tokens,
        cudagraph_mode=mode,
        cudagraph_override=override,
        connector_layout=d.kv_connector.preferred_layout if d.kv_connector else None,
        max_model_len=max_model_len,
        gpu_memory_utilization=serve.gpu_memory_utilization,
        device_memory_bytes=target.memory_bytes,
        reserved_bytes=int(d.reserved_memory_gib * 1024**3),
        max_num_batched_tokens=serve.max_num_batched_tokens,
        max_num_seqs=serve.max_num_seqs,
        **compile_none,
    )
    known = set(engine.profile.inputs) | set(engine.profile.environment)
    return model, deployment_request(d, cc, vocabulary=known, dtype=model.runtime_dtype), options
