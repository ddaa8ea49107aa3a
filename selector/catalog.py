"""Load and validate ``schemas/`` into an immutable :class:`Catalog`.

Cross-file checks run here: every backend belongs to the profile, every code a
rule names is registered, every name a condition reads is known, every
priority-list entry is a known backend, every message placeholder resolves.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import ValidationError

from selector import expr as expr_lang
from selector.errors import AttnSelectError, ExitCode, InputError
from selector.resources import schemas_dir
from selector.schema.backend import BackendSpec
from selector.schema.codes import ReasonCode, ReasonCodeRegistry
from selector.schema.device import Device, DeviceCatalog
from selector.schema.engine import EngineProfile, PriorityEntry

__all__ = [
    "Catalog",
    "CatalogError",
    "EngineChoice",
    "EngineData",
    "available_engines",
    "close_matches",
    "installed_vllm_version",
    "load_catalog",
    "load_engine",
]

_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CatalogError(AttnSelectError):
    """The shipped data is inconsistent (a bug in attn-select's data)."""

    exit_code = ExitCode.INTERNAL


INSTALLED_VLLM_ENV = "ATTN_SELECT_INSTALLED_VLLM"
"""Overrides the detection of the installed vLLM: a version, or ``none`` for "not installed"."""


@functools.cache
def installed_vllm_version() -> str | None:
    """The vLLM installed in this environment (package metadata; vLLM is never imported)."""
    override = os.environ.get(INSTALLED_VLLM_ENV)
    if override is not None:
        return None if override.strip().lower() in ("", "none") else override.strip()
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class EngineChoice:
    """The engine profile a command uses, and why."""

    name: str
    reason: str
    from_installed: bool = False


def close_matches(word: str, options: list[str] | tuple[str, ...]) -> str:
    """A "did you mean" suffix (empty if nothing is close)."""
    lowered = {o.lower(): o for o in options}
    hits = difflib.get_close_matches(word.lower(), list(lowered), n=3, cutoff=0.6)
    if hits:
        return "did you mean " + " or ".join(repr(lowered[h]) for h in hits) + "?"
    if len(options) <= 30:
        return "valid: " + ", ".join(options)
    return ""


def _read_yaml(path: Path) -> Any:
    with path.open("rb") as handle:
        return yaml.load(handle, Loader=_YAML_LOADER)


def _validation_message(path: Path, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    return f"{path}: " + "; ".join(parts)


@dataclass(frozen=True)
class EngineData:
    """One engine profile with its backends, validated and cross-checked."""

    profile: EngineProfile
    backends: dict[str, BackendSpec]
    directory: Path

    @property
    def engine(self) -> str:
        return self.profile.engine

    @property
    def version(self) -> Version:
        return Version(self.profile.engine.split("==", 1)[1])

    @property
    def family(self) -> str:
        return self.profile.engine.split("==", 1)[0]

    def backend(self, name: str) -> BackendSpec:
        try:
            return self.backends[name.upper()]
        except KeyError:
            raise InputError(
                f"unknown attention backend {name!r}",
                field="attention_backend",
                hint=close_matches(name.upper(), sorted(self.backends)),
            ) from None

    def auto_backends(self) -> list[str]:
        """Backends that appear in some priority list, in first-seen order."""
        seen: list[str] = []
        for branch in self.profile.priorities:
            for entry in branch.order:
                name = entry.backend if isinstance(entry, PriorityEntry) else entry
                if name not in seen:
                    seen.append(name)
        return seen


@dataclass(frozen=True)
class Catalog:
    """Every shipped fact: engine profiles (loaded on first use), reason codes, devices."""

    engine_dirs: dict[str, Path]
    """Engine name (``vllm==0.33.0``) -> its data folder."""
    codes: dict[str, ReasonCode]
    devices: tuple[Device, ...]
    _device_index: dict[str, Device] = field(repr=False)
    digest: str = field(default="", repr=False, compare=False)
    """Hash of the data files (set when loaded)."""
    _loaded: dict[str, EngineData] = field(default_factory=dict, repr=False, compare=False)

    @property
    def engine_names(self) -> list[str]:
        return sorted(self.engine_dirs, key=lambda n: Version(n.split("==", 1)[1]))

    @property
    def engines(self) -> dict[str, EngineData]:
        """Every profile, loaded (slower: prefer :meth:`engine`)."""
        return {name: self.engine(name) for name in self.engine_names}

    @property
    def default_engine(self) -> str:
        return self.engine_names[-1]

    def engine(self, requested: str | None = None) -> EngineData:
        """The profile for ``requested`` (an exact ``vllm==X``, ``vllm==0.29`` for the newest
        0.29.x, or a range); by default the installed vLLM's (see :meth:`choose`)."""
        return self._load(self._resolve(requested))

    def choose(self, requested: str | None = None) -> EngineChoice:
        """Which profile ``requested`` names and why (``None``: the vLLM installed in this
        environment if it has a profile, else the newest profile)."""
        if requested:
            name = self._resolve(requested)
            if name == requested.strip():
                return EngineChoice(name, f"--engine {requested.strip()}")
            return EngineChoice(name, f"the newest profile matching {requested.strip()!r}")
        installed = installed_vllm_version()
        newest = self.default_engine
        if installed is None:
            return EngineChoice(newest, "no vLLM is installed in this environment: the newest profile")
        exact = f"vllm=={installed}"
        if exact in self.engine_dirs:
            return EngineChoice(exact, f"vLLM {installed} is installed in this environment",
                                from_installed=True)
        series = self._series_match(installed)
        if series is not None:
            return EngineChoice(series, f"vLLM {installed} is installed in this environment and has "
                                f"no profile of its own: the newest profile of its minor series",
                                from_installed=True)
        return EngineChoice(newest, f"vLLM {installed} is installed in this environment but has no "
                            f"profile ({self._nearest_text(installed)}): the newest profile",
                            from_installed=True)

    def _series_match(self, version: str) -> str | None:
        try:
            wanted = Version(version)
        except InvalidVersion:
            return None
        same = [n for n in self.engine_names if n.startswith("vllm==")
                and Version(n.split("==", 1)[1]).release[:2] == wanted.release[:2]
                and Version(n.split("==", 1)[1]) <= wanted]
        return same[-1] if same else None

    def _nearest_text(self, version: str) -> str:
        """"nearest: vllm==A (older), vllm==B (newer)" for a release without a profile."""
        try:
            wanted = Version(version)
        except InvalidVersion:
            return "available: " + ", ".join(self.engine_names)
        names = [n for n in self.engine_names if n.startswith("vllm==")]
        older = [n for n in names if Version(n.split("==", 1)[1]) < wanted]
        newer = [n for n in names if Version(n.split("==", 1)[1]) > wanted]
        parts = ([f"{older[-1]} (older)"] if older else []) + ([f"{newer[0]} (newer)"] if newer else [])
        return "nearest: " + ", ".join(parts) if parts else "available: " + ", ".join(names)

    def _load(self, name: str) -> EngineData:
        loaded = self._loaded.get(name)
        if loaded is None:
            from selector.cache import cache_get, cache_put

            key = f"{self.digest}-{name}"
            cached = cache_get("engine", key) if self.digest else None
            if isinstance(cached, EngineData):
                loaded = cached
            else:
                loaded = _load_engine(self.engine_dirs[name], self.codes, self.engine_dirs)
                if self.digest:
                    cache_put("engine", key, loaded)
            self._loaded[name] = loaded
        return loaded

    def _resolve(self, requested: str | None) -> str:
        if not requested:
            return self.choose(None).name
        text = requested.strip()
        if text in self.engine_dirs:
            return text
        name, spec = re.match(r"^([A-Za-z_-]*)\s*(.*)$", text).groups()  # type: ignore[union-attr]
        family = (name or "vllm").lower()
        series = re.fullmatch(r"==\s*(\d+\.\d+)", spec.strip())
        if series:  # vllm==0.29: the newest 0.29.x
            spec = f"=={series.group(1)}.*"
        try:
            specifier = SpecifierSet(spec) if spec else SpecifierSet()
        except InvalidSpecifier:
            raise InputError(
                f"cannot read engine version {requested!r}",
                field="engine",
                hint="write e.g. vllm==0.33.0 or vllm>=0.30; available: "
                + ", ".join(self.engine_names),
            ) from None
        matches = [
            n for n in self.engine_names
            if n.split("==", 1)[0] == family and Version(n.split("==", 1)[1]) in specifier
        ]
        if not matches:
            exact = re.fullmatch(r"===?\s*([0-9][0-9.]*)(\.\*)?", spec.strip())
            nearest = self._nearest_text(exact.group(1)) if exact else ""
            raise InputError(
                f"no profile for engine {requested!r}",
                field="engine",
                hint=(nearest + "; " if nearest.startswith("nearest") else "")
                + "available: " + ", ".join(self.engine_names),
            )
        return matches[-1]

    def device(self, name: str) -> Device:
        key = _device_key(name)
        if key in self._device_index:
            return self._device_index[key]
        raise InputError(
            f"unknown device {name!r}",
            field="device",
            hint=close_matches(name, [d.name for d in self.devices])
            + " (or give the compute capability, e.g. device: {capability: '9.0'})",
        )

    def code(self, code: str) -> ReasonCode:
        return self.codes[code]


def _device_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower()).removeprefix("nvidia")


def _format_fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def _check_names(
    where: str, condition: str | bool | int | None, known: set[str], extra: set[str] = frozenset()  # type: ignore[assignment]
) -> None:
    if not isinstance(condition, str):
        return
    unknown = expr_lang.names_in(expr_lang.parse(condition)) - known - extra
    if unknown:
        raise CatalogError(f"{where}: unknown name(s) {sorted(unknown)} in {condition!r}")


_CAPABILITY_NAMES = {
    "cap.head_size", "cap.dtype", "cap.kv_cache_dtype", "cap.block_size",
    "cap.compute_capability", "cap.attn_type",
    "cap.mla", "cap.sparse", "cap.sink", "cap.mm_prefix", "cap.per_head_quant_scales",
    "cap.sliding_window", "cap.rswa", "cap.non_causal", "cap.non_causal_dcp",
    "cap.batch_invariance", "cap.kv_connector", "cap.pcp", "cap.dcp",
    "cap.device_cpu_query_lens_mismatch", "cap.alibi_sqrt",
}


def _merge_profile(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """A child profile over its parent: dict sections merge by key (``null``
    removes a key), ``facts`` merge by name (``remove: true`` drops one, a new fact
    goes after ``after:`` or at the end), every other key replaces the parent's."""
    merged = dict(parent)
    for key, value in child.items():
        if key in ("inputs", "environment", "messages") and isinstance(value, dict):
            section = dict(parent.get(key) or {})
            for name, spec in value.items():
                if spec is None:
                    section.pop(name, None)
                else:
                    section[name] = spec
            merged[key] = section
        elif key == "facts" and isinstance(value, list):
            facts = [dict(f) for f in parent.get("facts") or []]
            for raw_fact in value:
                fact = dict(raw_fact)
                names = [f.get("name") for f in facts]
                if fact.pop("remove", False):
                    if fact.get("name") in names:
                        facts.pop(names.index(fact["name"]))
                    continue
                after = fact.pop("after", None)
                if fact.get("name") in names:
                    facts[names.index(fact["name"])] = fact
                elif after in names:
                    facts.insert(names.index(after) + 1, fact)
                else:
                    facts.append(fact)
            merged["facts"] = facts
        elif key not in ("extends", "remove_backends"):
            merged[key] = value
    merged["engine"] = child["engine"]
    merged["extends"] = child.get("extends")
    return merged


def _deep_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = _deep_merge(base.get(key), value) if key in base else value
        return out
    return patch


def _raw_engine(
    directory: Path, by_engine: dict[str, Path]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The raw (unvalidated) profile and backend dicts of one engine, inheritance applied."""
    profile_path = directory / "profile.yaml"
    profile = _read_yaml(profile_path)
    if not isinstance(profile, dict):
        raise CatalogError(f"{profile_path}: not a mapping")
    backends: dict[str, dict[str, Any]] = {}
    parent_name = profile.get("extends")
    if parent_name:
        if parent_name not in by_engine:
            raise CatalogError(f"{profile_path}: extends unknown profile {parent_name!r}")
        parent_profile, parent_backends = _raw_engine(by_engine[parent_name], by_engine)
        profile = _merge_profile(parent_profile, profile)
        removed = set(_read_yaml(profile_path).get("remove_backends") or [])
        for name, spec in parent_backends.items():
            if name not in removed:
                backends[name] = {**spec, "engine": profile["engine"]}
    for path in sorted((directory / "backends").glob("*.yaml")):
        raw = _read_yaml(path)
        if not isinstance(raw, dict):
            raise CatalogError(f"{path}: not a mapping")
        if raw.pop("inherit", False):
            if path.stem not in backends:
                raise CatalogError(f"{path}: inherit: true but the parent has no {path.stem}")
            raw = _deep_merge(backends[path.stem], raw)
        backends[path.stem] = raw
    return profile, backends


def _load_engine(directory: Path, codes: dict[str, ReasonCode],
                 by_engine: dict[str, Path]) -> EngineData:
    profile_path = directory / "profile.yaml"
    raw_profile, raw_backends = _raw_engine(directory, by_engine)
    try:
        profile = EngineProfile.model_validate(raw_profile)
    except ValidationError as exc:
        raise CatalogError(_validation_message(profile_path, exc)) from None
    backends: dict[str, BackendSpec] = {}
    for name, raw in raw_backends.items():
        path = directory / "backends" / f"{name}.yaml"
        try:
            spec = BackendSpec.model_validate(raw)
        except ValidationError as exc:
            raise CatalogError(_validation_message(path, exc)) from None
        if spec.name != name:
            raise CatalogError(f"{path}: name {spec.name!r} does not match the file name")
        if spec.engine != profile.engine:
            raise CatalogError(f"{path}: engine {spec.engine!r} is not {profile.engine!r}")
        backends[spec.name] = spec
    data = EngineData(profile=profile, backends=backends, directory=directory)
    _cross_check(data, codes)
    return data


def _cross_check(data: EngineData, codes: dict[str, ReasonCode]) -> None:
    profile = data.profile
    known = set(profile.inputs) | set(profile.environment)
    for fact in profile.facts:
        for value in (fact.value, *(s.set for s in fact.steps), *(s.when for s in fact.steps)):
            _check_names(f"fact {fact.name}", value, known, {fact.name})
        known.add(fact.name)
    for check in profile.checks:
        if check.code not in codes:
            raise CatalogError(f"check code {check.code} is not registered")
        _check_names(f"check {check.code}", check.fails_when, known, _CAPABILITY_NAMES)
    for branch in profile.priorities:
        _check_names("priority branch", branch.when, known)
        for entry in branch.order:
            name = entry.backend if isinstance(entry, PriorityEntry) else entry
            if name not in data.backends:
                raise CatalogError(f"priority list names unknown backend {name!r}")
            if isinstance(entry, PriorityEntry):
                _check_names(f"priority entry {name}", entry.when, known)
    for name in profile.reported_backends:
        if name not in data.backends:
            raise CatalogError(f"reported_backends names unknown backend {name!r}")
    for spec in data.backends.values():
        where = f"backend {spec.name}"
        local = set(known)
        for fact in spec.facts:
            for value in (fact.value, *(s.set for s in fact.steps), *(s.when for s in fact.steps)):
                _check_names(f"{where} fact {fact.name}", value, local, {fact.name})
            local.add(fact.name)
        conditions: list[Any] = [
            spec.kv_cache_dtype_condition, spec.head_size_condition, spec.compute_capability,
            *(v.when for v in spec.kernel_block_sizes),
            *spec.features.model_dump().values(),
            *(r.when for r in spec.combination),
            *(r.when for r in spec.runtime.cudagraph_support),
            *(r.when for r in spec.runtime.reorder_batch_threshold),
            *(r.value for r in spec.runtime.reorder_batch_threshold),
            *(r.when for r in spec.runtime.kv_layouts),
        ]
        for condition in conditions:
            _check_names(where, condition, local)
        for rule in spec.combination:
            if rule.code not in codes:
                raise CatalogError(f"{where}: code {rule.code} is not registered")
            unknown = _format_fields(codes[rule.code].message) - local - {"backend_name"}
            if unknown:
                raise CatalogError(f"code {rule.code}: unknown placeholder(s) {sorted(unknown)}")


def available_engines(root: Path | None = None) -> list[str]:
    base = (root or schemas_dir()) / "engines"
    return sorted(p.name.replace("-", "==", 1) for p in base.iterdir() if p.is_dir())


@functools.cache
def load_catalog(root: Path | None = None) -> Catalog:
    """Load every data file once per process (cached, immutable; the validated
    result is also kept in the on-disk cache of :mod:`selector.cache`)."""
    from selector.cache import cache_get, cache_put, data_digest

    base = root or schemas_dir()
    digest = data_digest(base)
    cached = cache_get("catalog", digest)
    if isinstance(cached, Catalog):
        object.__setattr__(cached, "digest", digest)
        object.__setattr__(cached, "_loaded", {})
        return cached
    catalog = _load_catalog_files(base)
    object.__setattr__(catalog, "digest", digest)
    cache_put("catalog", digest, catalog)
    return catalog


def _load_catalog_files(base: Path) -> Catalog:
    codes_path = base / "reason-codes.yaml"
    try:
        registry = ReasonCodeRegistry.model_validate(_read_yaml(codes_path))
    except ValidationError as exc:
        raise CatalogError(_validation_message(codes_path, exc)) from None
    codes: dict[str, ReasonCode] = {}
    names: set[str] = set()
    for code in registry.codes:
        if code.code in codes or code.name in names:
            raise CatalogError(f"{codes_path}: duplicate code {code.code} / {code.name}")
        codes[code.code] = code
        names.add(code.name)
    devices_path = base / "devices.yaml"
    try:
        catalog = DeviceCatalog.model_validate(_read_yaml(devices_path))
    except ValidationError as exc:
        raise CatalogError(_validation_message(devices_path, exc)) from None
    index: dict[str, Device] = {}
    for device in catalog.devices:
        for alias in (device.name, *device.aliases):
            key = _device_key(alias)
            if key in index and index[key] is not device:
                raise CatalogError(f"{devices_path}: duplicate device name {alias!r}")
            index[key] = device
    by_engine: dict[str, Path] = {}
    for directory in sorted((base / "engines").iterdir()):
        profile_path = directory / "profile.yaml"
        if directory.is_dir() and profile_path.is_file():
            header = _read_yaml(profile_path)
            name = header.get("engine") if isinstance(header, dict) else None
            if not isinstance(name, str) or "==" not in name:
                raise CatalogError(f"{profile_path}: missing `engine: <name>==<version>`")
            by_engine[name] = directory
    return Catalog(engine_dirs=by_engine, codes=codes, devices=catalog.devices, _device_index=index)


def load_engine(requested: str | None = None) -> EngineData:
    return load_catalog().engine(requested)
