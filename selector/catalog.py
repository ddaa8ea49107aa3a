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
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import yaml
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ValidationError

from selector import expr as expr_lang
from selector.errors import AttnSelectError, ExitCode, InputError
from selector.platforms import platform_module
from selector.schema.backend import PREFILL_CHECKPOINT_NAMES, BackendSpec, Features, WiredFor
from selector.schema.codes import ReasonCode, ReasonCodeRegistry, ToolCode
from selector.schema.defaults import EngineDefaults
from selector.schema.device import Device, DeviceCatalog, OtherPlatform
from selector.schema.engine import EngineProfile, PriorityEntry
from selector.schema.layouts import KVLayouts
from selector.schema.platform import PLATFORM_SECTIONS, PlatformCatalog, PlatformProfile, PlatformSpec
from selector.schema.types import KVLayout
from selector.util.resources import schemas_dir

if TYPE_CHECKING:  # packaging's requirement parser loads only for a range or an odd name
    from packaging.requirements import Requirement

__all__ = [
    "DEFAULTS_FILE",
    "DEFAULT_ENGINE_ENV",
    "ENGINE_FILES",
    "INSTALLED_VLLM_ENV",
    "MLA_PREFILL_FILE",
    "PLATFORMS_DIR",
    "PROFILE_FILE",
    "Catalog",
    "CatalogError",
    "EngineChoice",
    "EngineData",
    "FileRule",
    "RawEngine",
    "RegisteredCodes",
    "available_engines",
    "close_matches",
    "installed_vllm_version",
    "load_catalog",
    "load_engine",
    "merge_inherited",
    "patch_document",
    "read_yaml",
    "validation_message",
]

_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_Model = TypeVar("_Model", bound=BaseModel)


class CatalogError(AttnSelectError):
    """The shipped data is inconsistent (a bug in attn-select's data)."""

    exit_code = ExitCode.INTERNAL


DEFAULTS_FILE = "defaults.yaml"
"""vLLM's defaults of one release (:class:`~selector.schema.defaults.EngineDefaults`),
inherited whole."""

INSTALLED_VLLM_ENV = "ATTN_SELECT_INSTALLED_VLLM"
"""Overrides the detection of the installed vLLM: a version, or ``none`` for "not installed"."""

DEFAULT_ENGINE_ENV = "ATTN_SELECT_ENGINE"
"""The engine a command uses when ``--engine`` is not given (same forms as ``--engine``):
pins a CI job, or a test suite's snapshots, to one profile while newer ones are added."""


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


def read_yaml(path: Path) -> Any:
    with path.open("rb") as handle:
        return yaml.load(handle, Loader=_YAML_LOADER)


def validation_message(path: Path, exc: ValidationError) -> str:
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
    mla_prefill: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """The MLA prefill selector's data (inheritance applied; validated by
    :func:`selector.solver.mla_prefill.load_mla_prefill`), or None when the engine has none."""
    mla_prefill_path: Path | None = field(default=None, repr=False, compare=False)
    """The newest file that shaped :attr:`mla_prefill`."""
    wired: dict[str, BackendSpec] = field(default_factory=dict, repr=False)
    """The backends vLLM gives a layer without selection, by ``wired_for`` (Mamba /
    GDN state, the sparse indexer); never among :attr:`backends`."""
    layout_aliases: dict[str, KVLayout] = field(default_factory=dict, repr=False, compare=False)
    """The legacy KV-cache layout names vLLM accepts (``kv-layouts.yaml``), given by the
    catalog that loaded this engine."""
    default_layout_preference: tuple[KVLayout, ...] = field(default=(), repr=False, compare=False)
    """The KV-cache layouts most preferred first when no backend declares a set
    (``kv-layouts.yaml``), given by the catalog that loaded this engine."""

    @property
    def engine(self) -> str:
        return self.profile.engine

    @property
    def platform(self) -> str:
        """The platform this engine was loaded for (``cuda``)."""
        return self.profile.platform

    @property
    def version(self) -> Version:
        return _pinned(self.profile.engine)[1]

    @property
    def family(self) -> str:
        return _pinned(self.profile.engine)[0]

    @property
    def label(self) -> str:
        """The engine as messages name it (``vLLM 0.33.0``)."""
        return f"{self.profile.product} {self.version}"

    def unknown_backend(self, name: str) -> str:
        """The refusal of a backend word this engine does not model: vLLM's own where the
        word is no member of the release's recorded ``AttentionBackendEnum``
        (``EngineArgs.create_engine_config``'s ``AttentionBackendEnum[value.upper()]``, a
        ValueError at start-up), else the tool's."""
        members = self.profile.attention_backend_enum
        template = self.profile.messages.unknown_backend
        if template and members and name.upper() not in members:
            return (f"{self.label} refuses it at start-up: ValueError: "
                    f"{template.format(name=name.upper(), members=', '.join(members))}")
        return f"unknown attention backend {name!r}"

    def backend(self, name: str) -> BackendSpec:
        try:
            return self.backends[name.upper()]
        except KeyError:
            raise InputError(
                self.unknown_backend(name),
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
    ignored_device_words: tuple[str, ...] = ()
    """Words dropped before matching a device name word by word (devices.yaml)."""
    other_platforms: tuple[OtherPlatform, ...] = ()
    """Accelerators the catalog does not hold, by name (devices.yaml)."""
    cli_codes: dict[str, ToolCode] = field(default_factory=dict)
    """Codes of attn-select's own findings (``cli_codes`` of reason-codes.yaml)."""
    argument_codes: dict[str, ToolCode] = field(default_factory=dict)
    """Codes of the notes about a command line (``argument_codes`` of reason-codes.yaml)."""
    layout_aliases: dict[str, KVLayout] = field(default_factory=dict)
    """Legacy KV-cache layout names -> ``KVCacheLayout`` members (``kv-layouts.yaml``)."""
    per_layer_layouts: dict[str, str] = field(default_factory=dict)
    """5-D KV-cache layout -> the per-layer ``NHD`` / ``HND`` view (``kv-layouts.yaml``)."""
    default_layout_preference: tuple[KVLayout, ...] = ()
    """The KV-cache layouts most preferred first when no backend declares a set (``kv-layouts.yaml``)."""
    platforms: tuple[PlatformSpec, ...] = ()
    """The platforms of ``schemas/platforms.yaml``, in the file's order (the first is the
    platform of a request that names none)."""
    digest: str = field(default="", repr=False, compare=False)
    """Hash of the data files (:func:`selector.util.cache.data_digest`; empty: not cached)."""
    _loaded: dict[str, EngineData] = field(default_factory=dict, repr=False, compare=False)
    """A memo of the engines loaded on first use (a loaded engine is never replaced)."""
    engine_parents: dict[str, str | None] = field(default_factory=dict)
    """Engine name -> the profile it ``extends`` (None: the base), from the profiles'
    headers: the chain every inherited file follows."""
    _documents: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False,
                                                             compare=False)
    """A memo of the merged documents (:meth:`merged_file`)."""
    _patched: dict[tuple[str, str], tuple[dict[str, Any], Path] | None] = field(
        default_factory=dict, repr=False, compare=False)
    """A memo of the patched documents (:meth:`patched_file`)."""
    _validated: dict[tuple[str, str, str], BaseModel] = field(
        default_factory=dict, repr=False, compare=False)
    """A memo of the validated patched documents (:meth:`patched_data`)."""

    @property
    def engine_names(self) -> list[str]:
        return sorted(self.engine_dirs, key=lambda n: _pinned(n)[1])

    @property
    def engines(self) -> dict[str, EngineData]:
        """Every profile, loaded (slower: prefer :meth:`engine`)."""
        return {name: self.engine(name) for name in self.engine_names}

    @property
    def default_engine(self) -> str:
        return self.engine_names[-1]

    @property
    def default_platform(self) -> str:
        """The platform of a request that names no device of another (the first of
        ``schemas/platforms.yaml``)."""
        return self.platforms[0].name

    def platform(self, name: str) -> PlatformSpec:
        """A platform of ``schemas/platforms.yaml`` by name."""
        for spec in self.platforms:
            if spec.name == name:
                return spec
        raise InputError(f"unknown platform {name!r}", field="platform",
                         hint=close_matches(name, [p.name for p in self.platforms]))

    def engine(self, requested: str | None = None, platform: str | None = None) -> EngineData:
        """The profile for ``requested`` (an exact ``vllm==X``, ``vllm==0.29`` for the newest
        0.29.x, or a range; by default the installed vLLM's, see :meth:`choose`) on
        ``platform`` (default: :attr:`default_platform`): the profile with that platform's
        sections and only the backends of that platform."""
        return self._load(self._resolve(requested), platform or self.default_platform)

    def release(self, requested: str | None = None) -> str:
        """The profile name ``requested`` resolves to (``vllm==0.29`` -> the newest 0.29.x;
        None: the default, see :meth:`choose`), without loading it."""
        return self._resolve(requested)

    def release_version(self, name: str) -> tuple[str, Version]:
        """A profile name's (family, version), without loading it."""
        return _pinned(name)

    def engine_of(self, engine: str | EngineData | None) -> EngineData:
        """``engine`` when it is a loaded engine already (a resolved target's, for its
        platform); else :meth:`engine` of the name (the default platform)."""
        return engine if isinstance(engine, EngineData) else self.engine(engine)

    def choose(self, requested: str | None = None) -> EngineChoice:
        """Which profile ``requested`` names and why (``None``: the vLLM installed in this
        environment if it has a profile, else the newest profile)."""
        if requested:
            name = self._resolve(requested)
            if name == requested.strip():
                return EngineChoice(name, f"--engine {requested.strip()}")
            return EngineChoice(name, f"the newest profile matching {requested.strip()!r}")
        pinned = os.environ.get(DEFAULT_ENGINE_ENV, "").strip()
        if pinned:
            try:
                name = self._resolve(pinned)
            except InputError as exc:
                raise InputError(f"{DEFAULT_ENGINE_ENV}: {exc.message}", field=DEFAULT_ENGINE_ENV,
                                 hint=exc.hint) from None
            return EngineChoice(name, f"{DEFAULT_ENGINE_ENV}={pinned}")
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
        same = [n for n in self.engine_names if _pinned(n)[0] == "vllm"
                and _pinned(n)[1].release[:2] == wanted.release[:2] and _pinned(n)[1] <= wanted]
        return same[-1] if same else None

    def _nearest_text(self, version: str) -> str:
        """"nearest: vllm==A (older), vllm==B (newer)" for a release without a profile."""
        try:
            wanted = Version(version)
        except InvalidVersion:
            return "available: " + ", ".join(self.engine_names)
        names = [n for n in self.engine_names if _pinned(n)[0] == "vllm"]
        older = [n for n in names if _pinned(n)[1] < wanted]
        newer = [n for n in names if _pinned(n)[1] > wanted]
        parts = ([f"{older[-1]} (older)"] if older else []) + ([f"{newer[0]} (newer)"] if newer else [])
        return "nearest: " + ", ".join(parts) if parts else "available: " + ", ".join(names)

    def _load(self, name: str, platform: str) -> EngineData:
        memo = f"{name}@{platform}"
        loaded = self._loaded.get(memo)
        if loaded is None:
            from selector.util.cache import cache_get, cache_put

            self.platform(platform)  # a known platform
            key = f"{self.digest}-{name}-{platform}"
            cached = cache_get("engine", key) if self.digest else None
            if isinstance(cached, EngineData):
                loaded = cached
            else:
                loaded = _load_engine(self.engine_dirs[name], self.codes, self.engine_dirs,
                                      platform, tuple(p.name for p in self.platforms))
                if self.digest:
                    cache_put("engine", key, loaded)
            loaded = replace(loaded, layout_aliases=dict(self.layout_aliases),
                             default_layout_preference=self.default_layout_preference)
            self._loaded[memo] = loaded
        return loaded

    def _resolve(self, requested: str | None) -> str:
        if not requested:
            return self.choose(None).name
        text = requested.strip()
        if text in self.engine_dirs:
            return text
        requirement = _engine_requirement(text)
        if requirement is None:
            raise InputError(
                f"cannot read engine version {requested!r}",
                field="engine",
                hint=f"write e.g. {self.default_engine} or vllm>=0.30; available: "
                + ", ".join(self.engine_names),
            )
        family, specifier = requirement.name.lower(), requirement.specifier
        specs = list(specifier)
        if len(specs) == 1 and specs[0].operator == "==" \
                and re.fullmatch(r"\d+\.\d+", specs[0].version):  # vllm==0.29: the newest 0.29.x
            from packaging.specifiers import SpecifierSet

            specifier = SpecifierSet(f"=={specs[0].version}.*")
        matches = [
            n for n in self.engine_names
            if _pinned(n)[0] == family and _pinned(n)[1] in specifier
        ]
        if not matches:
            exact = specs[0].version.removesuffix(".*") if len(specs) == 1 \
                and specs[0].operator in ("==", "===") else ""
            nearest = self._nearest_text(exact) if re.fullmatch(r"[0-9][0-9.]*", exact) else ""
            raise InputError(
                f"no profile for engine {requested!r}",
                field="engine",
                hint=(nearest + "; " if nearest.startswith("nearest") else "")
                + "available: " + ", ".join(self.engine_names),
            )
        return matches[-1]

    def _chain(self, requested: str | EngineData | None) -> list[str]:
        """The engine and the profiles it extends, newest first."""
        name: str | None = requested.engine if isinstance(requested, EngineData) \
            else self._resolve(requested)
        chain: list[str] = []
        while name is not None:
            chain.append(name)
            name = self.engine_parents.get(name)
        return chain

    def engine_file(self, requested: str | EngineData | None, filename: str) -> Path | None:
        """``filename`` of the engine by its rule in :data:`ENGINE_FILES`: a file
        inherited whole (``startup.yaml``, ``kernel-calls.yaml``, ...) from the engine's
        folder or else the nearest older profile of its chain that has one; a release's
        own recorded file (``model_registry.json``) from its folder alone. None when
        there is none."""
        rule = ENGINE_FILES.get(filename, FileRule("whole"))
        chain = self._chain(requested)
        for name in chain[:1] if rule.kind == "own" else chain:
            path = self.engine_dirs[name] / filename
            if path.is_file():
                return path
        return None

    def patched_file(self, requested: str | EngineData | None,
                     filename: str) -> tuple[dict[str, Any], Path] | None:
        """``filename`` of the engine by the ``patch`` rule: the engine's own file, where it
        says ``inherit: true`` applied as a patch over the nearest older profile's
        (:func:`patch_document`), else whole; none of its own: the older profile's. Returns
        the document and the file read last; None when no profile of the chain has one.
        Read once."""
        rule = ENGINE_FILES[filename]
        if rule.kind != "patch":
            raise CatalogError(f"{filename} is inherited {rule.kind}, not patched")
        chain = self._chain(requested)
        key = (chain[0], "patch:" + filename)
        if key in self._patched:
            return self._patched[key]
        found: tuple[dict[str, Any], Path] | None = None
        for name in reversed(chain):
            path = self.engine_dirs[name] / filename
            if not path.is_file():
                continue
            own = read_yaml(path)
            if not isinstance(own, dict):
                raise CatalogError(f"{path}: not a mapping")
            if own.get("inherit", False):
                if found is None:
                    raise CatalogError(f"{path}: inherit: true but no older profile has "
                                       f"{filename}")
                found = (patch_document(found[0], own), path)
            else:
                found = (own, path)
        self._patched[key] = found
        return found

    def patched_data(self, requested: str | EngineData | None, filename: str,
                     model: type[_Model]) -> _Model | None:
        """:meth:`patched_file` validated as ``model`` (a :class:`CatalogError` naming the
        file read last when it does not validate); None when the chain has no such file.
        Validated once per engine and file."""
        found = self.patched_file(requested, filename)
        if found is None:
            return None
        key = (self._chain(requested)[0], filename, model.__qualname__)
        cached = self._validated.get(key)
        if cached is None:
            try:
                cached = model.model_validate(found[0])
            except ValidationError as exc:
                raise CatalogError(f"{found[1]}: {exc}") from None
            self._validated[key] = cached
        assert isinstance(cached, model)
        return cached

    def merged_file(self, requested: str | EngineData | None, filename: str) -> dict[str, Any]:
        """``filename`` of every profile of the engine's chain, oldest first, each merged
        over the one before by the one rule (:func:`_merge_document`, the mapping
        sections of :data:`ENGINE_FILES`); ``{}`` when none has it. Read once."""
        rule = ENGINE_FILES[filename]
        if rule.kind != "merge":
            raise CatalogError(f"{filename} is inherited {rule.kind}, not merged")
        chain = self._chain(requested)
        key = (chain[0], filename)
        document = self._documents.get(key)
        if document is None:
            document = {}
            for name in reversed(chain):
                document = merge_inherited(document, self.engine_dirs[name] / filename,
                                           rule.mappings)
            self._documents[key] = document
        return document

    def engine_defaults(self, requested: str | None = None) -> EngineDefaults:
        """vLLM's defaults of the engine's release (``defaults.yaml``, inherited whole):
        every default a report uses that the user did not give."""
        path = self.engine_file(requested, DEFAULTS_FILE)
        if path is None:
            raise CatalogError(f"{self._resolve(requested)}: no {DEFAULTS_FILE} in its profile "
                               "folder or a profile it extends")
        return _engine_defaults(path)

    def device(self, name: str) -> Device:
        """A device by name, alias or ``nvidia-smi`` name (case and punctuation do not
        matter); otherwise the device whose name's words all appear as whole words in
        ``name`` (``NVIDIA H100 80GB HBM3`` -> H100, ``NVIDIA H100 NVL`` -> H100 NVL: the
        most words win)."""
        key = _device_key(name)
        if key in self._device_index:
            return self._device_index[key]
        found = self._device_by_words(name)
        if found is not None:
            return found
        other = next((o for o in self.other_platforms
                      if re.fullmatch(o.pattern, name.strip(), flags=re.IGNORECASE)), None)
        if other is not None:
            raise InputError(f"unknown device {name!r}: not in the catalog ({other.reason})",
                             field="device",
                             hint="attn-select checks vLLM's CUDA backends; `attn-select list "
                                  "devices` lists the GPUs it knows")
        family = self._same_family(name)
        raise InputError(
            f"unknown device {name!r}",
            field="device",
            hint=(close_matches(name, family) if family else
                  "valid: " + ", ".join(d.name for d in self.devices))
            + " (or give the compute capability, e.g. device: {capability: '9.0'})",
        )

    def _same_family(self, name: str) -> list[str]:
        """The device names a "did you mean" may offer for ``name``: those whose name or an
        alias begins with the same letters (``H1000`` -> the H-series; ``MI300X`` -> none,
        not ``B300``); every name when ``name`` begins with no letter."""
        def letters(text: str) -> str:
            match = re.match(r"[a-z]+", text.lower().replace(" ", ""))
            return match.group(0) if match else ""

        wanted = letters(name)
        if not wanted:
            return [d.name for d in self.devices]
        return [d.name for d in self.devices
                if any(letters(alias) == wanted for alias in (d.name, *d.aliases))]

    def _words(self, name: str) -> frozenset[str]:
        ignored = {w.lower() for w in self.ignored_device_words}
        return frozenset(w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and w not in ignored)

    def _device_by_words(self, name: str) -> Device | None:
        wanted = self._words(name)
        best: dict[int, set[str]] = {}
        by_name: dict[str, Device] = {}
        for device in self.devices:
            for alias in (device.name, *device.aliases):
                words = self._words(alias)
                if words and words <= wanted:
                    best.setdefault(len(words), set()).add(device.name)
                    by_name[device.name] = device
        if not best:
            return None
        names = best[max(best)]
        if len(names) > 1:
            raise InputError(f"device {name!r} is ambiguous: " + " or ".join(sorted(names)),
                             field="device", hint="give the catalog name (attn-select list devices)")
        return by_name[names.pop()]

    def code(self, code: str) -> ReasonCode:
        return self.codes[code]

    def field_of(self, code: str) -> tuple[str, ...] | None:
        """The deployment field a finding with ``code`` points at (None: not located)."""
        registered = self.codes.get(code) or self.cli_codes.get(code) \
            or self.argument_codes.get(code)
        return tuple(registered.field.split(".")) if registered and registered.field else None


class RegisteredCodes(Mapping[str, tuple[str, str]]):
    """A read-only view of one section of attn-select's own codes in
    ``schemas/reason-codes.yaml``: code -> (name, summary), in the file's order.
    Read from the shipped catalog on first use."""

    def __init__(self, section: Literal["cli_codes", "argument_codes"]) -> None:
        self._section = section

    def _table(self) -> dict[str, ToolCode]:
        table: dict[str, ToolCode] = getattr(load_catalog(), self._section)
        return table

    def __getitem__(self, code: str) -> tuple[str, str]:
        registered = self._table()[code]
        return registered.name, registered.summary

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


_PINNED = re.compile(r"([A-Za-z](?:[A-Za-z0-9_-]*[A-Za-z0-9])?)==([0-9][0-9A-Za-z.+!-]*)")
"""``name==version`` as profiles write it (anything else goes to packaging's parser)."""


@functools.cache
@functools.lru_cache(maxsize=16)
def _engine_defaults(path: Path) -> EngineDefaults:
    try:
        return EngineDefaults.model_validate(read_yaml(path))
    except (OSError, yaml.YAMLError) as exc:
        raise CatalogError(f"{path}: {exc}") from None
    except ValidationError as exc:
        raise CatalogError(validation_message(path, exc)) from None


def _pinned(engine: str) -> tuple[str, Version]:
    """A profile's engine (``vllm==0.33.0``, a pinned PEP 508 requirement) -> (family,
    version)."""
    pinned = _PINNED.fullmatch(engine)
    if pinned is not None:  # the plain form, read without packaging's requirement parser
        try:
            return pinned[1], Version(pinned[2])
        except InvalidVersion:
            pass  # the requirement parser says what is wrong
    from packaging.requirements import Requirement

    requirement = Requirement(engine)
    (pin,) = requirement.specifier
    if pin.operator != "==":
        raise ValueError(f"{engine!r} is not pinned with ==")
    return requirement.name, Version(pin.version)


def _engine_requirement(text: str) -> Requirement | None:
    """``vllm>=0.30``, ``vllm==0.29.0``, ``==0.33.0`` (the family defaults to vllm) as a
    PEP 508 requirement; None when it is not one (extras, markers, URLs, a family name
    that is not a word)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(text if text[:1].isalpha() else "vllm" + text)
    except InvalidRequirement:
        return None
    if requirement.extras or requirement.marker or requirement.url \
            or not re.fullmatch(r"[A-Za-z_-]+", requirement.name):
        return None
    return requirement


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


_LAYER_BUILD_NAMES = {f"cap.{name}" for name in Features.model_fields} | {"backend"}
"""What a profile's ``layer_build`` check reads beside the request facts: the selected
backend's feature columns and its name (selector/memory/issues.py:layer_build_issues)."""


PROFILE_FILE = "profile.yaml"
"""The engine profile in ``schemas/engines/<engine>/``."""
MLA_PREFILL_FILE = "mla_prefill.yaml"
"""The engine's MLA prefill selector (optional; inherited like every other section)."""

@dataclass(frozen=True)
class FileRule:
    """How a file of an engine profile folder is inherited along the ``extends`` chain."""

    kind: Literal["merge", "patch", "whole", "own"]
    """``merge``: the child's file over the parent's merged document by the one rule
    (:func:`_merge_document`); ``patch``: a child file with ``inherit: true`` patches the
    parent's document as a backend file patches its parent's (:func:`patch_document`),
    one without it stands alone; ``whole``: the nearest file of the chain, unchanged;
    ``own``: the release's own file alone (a recorded answer is never inherited)."""
    mappings: tuple[str, ...] = ()
    """``merge``: the sections that merge key by key."""
    keyed: tuple[tuple[str, str], ...] = ()
    """``merge``: the lists that merge by their key (section, key)."""


ENGINE_FILES: dict[str, FileRule] = {
    "profile.yaml": FileRule("merge", ("inputs", "environment", "messages", "hybrid_alignment"),
                             (("facts", "name"), ("checks", "code"), ("layer_build", "code"),
                              ("priorities", "id"))),
    "platforms/<platform>.yaml": FileRule("merge", ("environment", "messages"),
                                          (("facts", "name"), ("priorities", "id"))),
    "mla_prefill.yaml": FileRule("merge", ("messages",),
                                 (("facts", "name"), ("checks", "code"), ("backends", "name"),
                                  ("priorities", "id"))),
    "serve-flags.yaml": FileRule("merge", ("aliases", "flags", "removed_environment",
                                           "optimization_levels", "dtypes", "engine_flags",
                                           "frontend_flags")),
    "startup.yaml": FileRule("whole"),
    "defaults.yaml": FileRule("whole"),
    "encoder.yaml": FileRule("patch"),
    "kernel-calls.yaml": FileRule("whole"),
    "model-driven.yaml": FileRule("whole"),
    "speculative.yaml": FileRule("patch"),
    "model-runner.yaml": FileRule("patch"),
    "model_registry.json": FileRule("own"),
    "runner_types.json": FileRule("own"),
}
"""Every data file of an engine profile folder and its inheritance rule: the one table
every loader follows (``backends/<NAME>.yaml`` patch the parent's backend with
``inherit: true``)."""

PLATFORMS_DIR = "platforms"
"""The folder of an engine profile with one file per platform (``platforms/cuda.yaml``)."""

_PROFILE_MAPPINGS = ENGINE_FILES["profile.yaml"].mappings
_PROFILE_KEYED = dict(ENGINE_FILES["profile.yaml"].keyed)
_PLATFORM_MAPPINGS = ENGINE_FILES["platforms/<platform>.yaml"].mappings
_PLATFORM_KEYED = dict(ENGINE_FILES["platforms/<platform>.yaml"].keyed)
PLATFORM_MLA_PREFILL = "mla_prefill"
"""The section of ``platforms/<name>.yaml`` that changes the MLA prefill selector on the
platform (merged over ``mla_prefill.yaml``)."""
_PREFILL_MAPPINGS = ENGINE_FILES["mla_prefill.yaml"].mappings
_PREFILL_KEYED = dict(ENGINE_FILES["mla_prefill.yaml"].keyed)
_CHILD_ONLY = ("extends", "remove_backends", "inherit")


def _merge_mapping(parent: Any, child: dict[str, Any], where: str) -> dict[str, Any]:
    """``child`` over ``parent`` key by key; ``null`` removes an inherited key; a new
    mapping value with ``after: <key>`` / ``before: <key>`` is placed there (order is
    what tables and reports show)."""
    if not any(isinstance(given, dict) and ("after" in given or "before" in given)
               for given in child.values()):  # nothing to place: a plain dict update
        merged = dict(parent or {})
        for name, given in child.items():
            if given is None and name not in merged:
                raise CatalogError(f"{where}: cannot remove key {name!r}: the parent has none")
            if given is None:
                del merged[name]
            else:
                merged[name] = dict(given) if isinstance(given, dict) else given
        return merged
    entries = [{"key": name, "value": value} for name, value in (parent or {}).items()]
    patch: list[dict[str, Any]] = []
    for name, given in child.items():
        if given is None:
            patch.append({"key": name, "remove": True})
            continue
        entry: dict[str, Any] = {"key": name}
        value = dict(given) if isinstance(given, dict) else given
        if isinstance(value, dict):
            for anchor in ("after", "before"):
                if anchor in value:
                    entry[anchor] = value.pop(anchor)
        entry["value"] = value
        patch.append(entry)
    return {e["key"]: e["value"] for e in _merge_keyed(entries, patch, "key", where)}


def _merge_keyed(parent: Any, child: list[Any], key: str, where: str) -> list[dict[str, Any]]:
    """A list of entries identified by ``key`` (facts by name, checks by code, priority
    branches by id), ``child`` over ``parent``: an entry whose key the parent has
    replaces it in place; ``remove: true`` drops it; a new entry goes after
    ``after: <key>``, before ``before: <key>`` or at the end; an inherited key with
    ``after`` / ``before`` moves the entry there (with new content, if it gives any)."""
    items = [dict(entry) for entry in parent or []]
    for raw in child:
        if not isinstance(raw, dict) or not isinstance(raw.get(key), str):
            raise CatalogError(f"{where}: every entry needs a `{key}` (got {raw!r})")
        entry = dict(raw)
        ident = entry[key]
        keys = [item.get(key) for item in items]
        after, before = entry.pop("after", None), entry.pop("before", None)
        if entry.pop("remove", False):
            if ident not in keys:
                raise CatalogError(f"{where}: cannot remove {key} {ident!r}: the parent has none")
            items.pop(keys.index(ident))
            continue
        if ident in keys and after is None and before is None:
            items[keys.index(ident)] = entry
            continue
        if ident in keys:
            moved = items.pop(keys.index(ident))
            keys.remove(ident)
            if set(entry) == {key}:
                entry = moved  # placed elsewhere, content inherited
        anchor = after if after is not None else before
        if anchor is None:
            items.append(entry)
        elif anchor not in keys:
            raise CatalogError(f"{where}: {key} {ident!r}: no entry {anchor!r} to place it "
                               f"{'after' if after is not None else 'before'}")
        else:
            items.insert(keys.index(anchor) + (1 if after is not None else 0), entry)
    return items


def _merge_document(parent: dict[str, Any], child: dict[str, Any], where: str,
                    mappings: tuple[str, ...], keyed: dict[str, str]) -> dict[str, Any]:
    """One inheritance rule for every data file of a child profile: mapping sections
    merge by key, keyed lists merge by their key, every other key replaces the parent's."""
    merged = dict(parent)
    for name, value in child.items():
        if name in _CHILD_ONLY:
            continue
        if name in mappings and isinstance(value, dict):
            merged[name] = _merge_mapping(parent.get(name), value, f"{where}: {name}")
        elif name in keyed and isinstance(value, list):
            merged[name] = _merge_keyed(parent.get(name), value, keyed[name], f"{where}: {name}")
        else:
            merged[name] = value
    return merged


def merge_inherited(parent: dict[str, Any], path: Path, mappings: tuple[str, ...]) -> dict[str, Any]:
    """``path`` (a profile's data file, if it has one) over its parent profile's merged
    document, by the one rule of every section (``mappings`` merge key by key)."""
    if not path.is_file():
        return parent
    own = read_yaml(path)
    if not isinstance(own, dict):
        raise CatalogError(f"{path}: not a mapping")
    return _merge_document(parent, own, str(path), mappings, {})


def patch_document(parent: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A data file with ``inherit: true`` over its parent's document, by the rule of a
    backend file: mappings merge key by key, any other value (lists included) replaces
    the parent's."""
    merged: dict[str, Any] = _deep_merge(parent, {k: v for k, v in patch.items() if k != "inherit"})
    return merged


def _deep_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = _deep_merge(base.get(key), value) if key in base else value
        return out
    return patch


@dataclass(frozen=True)
class RawEngine:
    """One engine's data files, inheritance applied, not yet validated."""

    profile: dict[str, Any]
    backends: dict[str, dict[str, Any]]
    mla_prefill: dict[str, Any] | None
    mla_prefill_path: Path | None
    """The newest file that shaped ``mla_prefill`` (for messages)."""
    platforms: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Platform name -> its sections (``platforms/<name>.yaml``, inheritance applied)."""
    platform_paths: dict[str, Path] = field(default_factory=dict)
    """Platform name -> the newest file that shaped its sections (for messages)."""


def _parent_of(profile_path: Path, profile: dict[str, Any], by_engine: dict[str, Path]) -> str | None:
    """The profile this one extends, which must exist and be older (same family)."""
    parent = profile.get("extends")
    if parent is None:
        return None
    if not isinstance(parent, str) or parent not in by_engine:
        raise CatalogError(f"{profile_path}: extends unknown profile {parent!r} "
                           f"(available: {', '.join(sorted(by_engine))})")
    child_family, child_version = _pinned(str(profile.get("engine", "")))
    family, version = _pinned(parent)
    if family != child_family or version >= child_version:
        raise CatalogError(f"{profile_path}: extends {parent!r}, which is not an older "
                           f"{child_family} profile (profiles chain forward: a new version "
                           "states what changed since an older one)")
    return parent


def _raw_engine(directory: Path, by_engine: dict[str, Path],
                platform_names: tuple[str, ...]) -> RawEngine:
    """The raw (unvalidated) data files of one engine, inheritance applied: the parent's
    profile, platform sections, backends and MLA prefill selector, then this folder's
    changes (one rule for every file: :func:`_merge_document`)."""
    profile_path = directory / PROFILE_FILE
    own = read_yaml(profile_path)
    if not isinstance(own, dict):
        raise CatalogError(f"{profile_path}: not a mapping")
    engine = own.get("engine")
    misplaced = [key for key in PLATFORM_SECTIONS if key in own]
    if misplaced:
        raise CatalogError(f"{profile_path}: {', '.join(misplaced)} belong to a platform: "
                           f"state them in {PLATFORMS_DIR}/<platform>.yaml of the engine folder "
                           f"(platforms: {', '.join(platform_names)})")
    parent_name = _parent_of(profile_path, own, by_engine)
    if parent_name is None:
        base = RawEngine(profile={}, backends={}, mla_prefill=None, mla_prefill_path=None)
        if "remove_backends" in own:
            raise CatalogError(f"{profile_path}: remove_backends needs `extends:`")
    else:
        base = _raw_engine(by_engine[parent_name], by_engine, platform_names)
    platforms = {name: {**doc, "engine": engine} for name, doc in base.platforms.items()}
    platform_paths = dict(base.platform_paths)
    for path in sorted((directory / PLATFORMS_DIR).glob("*.yaml")):
        raw_platform = read_yaml(path)
        if not isinstance(raw_platform, dict):
            raise CatalogError(f"{path}: not a mapping")
        if path.stem not in platform_names:
            raise CatalogError(f"{path}: no platform {path.stem!r} in platforms.yaml "
                               f"(platforms: {', '.join(platform_names)})")
        if raw_platform.get("platform") != path.stem or raw_platform.get("engine") != engine:
            raise CatalogError(f"{path}: states `engine: {engine}` and `platform: {path.stem}`")
        platforms[path.stem] = _merge_document(platforms.get(path.stem, {}), raw_platform,
                                               str(path), _PLATFORM_MAPPINGS, _PLATFORM_KEYED)
        platform_paths[path.stem] = path
    profile = _merge_document(base.profile, own, str(profile_path),
                              _PROFILE_MAPPINGS, _PROFILE_KEYED)
    profile["extends"] = parent_name
    removed = own.get("remove_backends") or []
    unknown = sorted(set(removed) - set(base.backends))
    if unknown:
        raise CatalogError(f"{profile_path}: remove_backends names {unknown}, which "
                           f"{parent_name} does not have")
    backends = {name: {**spec, "engine": engine}
                for name, spec in base.backends.items() if name not in removed}
    for path in sorted((directory / "backends").glob("*.yaml")):
        raw = read_yaml(path)
        if not isinstance(raw, dict):
            raise CatalogError(f"{path}: not a mapping")
        if raw.pop("inherit", False):
            if path.stem not in backends:
                raise CatalogError(f"{path}: inherit: true but the parent has no {path.stem}")
            raw = _deep_merge(backends[path.stem], raw)
        backends[path.stem] = raw
    prefill, prefill_path = base.mla_prefill, base.mla_prefill_path
    if prefill is not None:
        prefill = {**prefill, "engine": engine}
    own_prefill_path = directory / MLA_PREFILL_FILE
    if own_prefill_path.is_file():
        raw_prefill = read_yaml(own_prefill_path)
        if not isinstance(raw_prefill, dict):
            raise CatalogError(f"{own_prefill_path}: not a mapping")
        if raw_prefill.get("inherit", False):
            if prefill is None:
                raise CatalogError(f"{own_prefill_path}: inherit: true but {parent_name} "
                                   f"has no {MLA_PREFILL_FILE}")
            prefill = _merge_document(prefill, raw_prefill, str(own_prefill_path),
                                      _PREFILL_MAPPINGS, _PREFILL_KEYED)
        else:
            prefill = raw_prefill
        prefill_path = own_prefill_path
    return RawEngine(profile=profile, backends=dict(sorted(backends.items())),
                     mla_prefill=prefill, mla_prefill_path=prefill_path,
                     platforms=platforms, platform_paths=platform_paths)


def _platform_profile(raw: RawEngine, profile_path: Path, platform: str) -> dict[str, Any]:
    """The profile document for ``platform``: the platform's sections over the profile's,
    by the same one rule."""
    document = raw.platforms.get(platform)
    if document is None:
        raise InputError(f"{raw.profile.get('engine')} has no {platform} platform "
                         f"(no {PLATFORMS_DIR}/{platform}.yaml in its profile folder or a "
                         "profile it extends)", field="device",
                         hint="platforms of this engine: " + ", ".join(sorted(raw.platforms)))
    path = raw.platform_paths[platform]
    try:
        PlatformProfile.model_validate(document)
    except ValidationError as exc:
        raise CatalogError(validation_message(path, exc)) from None
    sections = {k: v for k, v in document.items()
                if k not in ("engine", "platform", PLATFORM_MLA_PREFILL)}
    merged = _merge_document(raw.profile, sections, str(path), _PROFILE_MAPPINGS, _PROFILE_KEYED)
    merged["platform"] = platform
    return merged


def _platform_mla_prefill(raw: RawEngine, platform: str) -> dict[str, Any] | None:
    """The MLA prefill selector on ``platform``: ``mla_prefill.yaml`` with the
    platform file's ``mla_prefill`` section over it, by that file's one rule (a platform
    whose vLLM class overrides ``get_mla_prefill_backend_cls`` states its own priority
    lists and the backends it sees differently)."""
    if raw.mla_prefill is None:
        return None
    section = (raw.platforms.get(platform) or {}).get(PLATFORM_MLA_PREFILL)
    if section is None:
        return raw.mla_prefill
    where = f"{raw.platform_paths[platform]}: {PLATFORM_MLA_PREFILL}"
    if not isinstance(section, dict):
        raise CatalogError(f"{where}: not a mapping")
    return _merge_document(raw.mla_prefill, section, where, _PREFILL_MAPPINGS, _PREFILL_KEYED)


def _load_engine(directory: Path, codes: dict[str, ReasonCode], by_engine: dict[str, Path],
                 platform: str, platform_names: tuple[str, ...]) -> EngineData:
    profile_path = directory / PROFILE_FILE
    raw = _raw_engine(directory, by_engine, platform_names)
    try:
        profile = EngineProfile.model_validate(_platform_profile(raw, profile_path, platform))
    except ValidationError as exc:
        raise CatalogError(validation_message(profile_path, exc)) from None
    backends: dict[str, BackendSpec] = {}
    wired: dict[str, BackendSpec] = {}
    for name, raw_backend in raw.backends.items():
        path = directory / "backends" / f"{name}.yaml"
        try:
            spec = BackendSpec.model_validate(raw_backend)
        except ValidationError as exc:
            raise CatalogError(validation_message(path, exc)) from None
        if spec.name != name:
            raise CatalogError(f"{path}: name {spec.name!r} does not match the file name")
        if spec.engine != profile.engine:
            raise CatalogError(f"{path}: engine {spec.engine!r} is not {profile.engine!r}")
        unknown_platforms = sorted(set(spec.platforms) - set(platform_names))
        if unknown_platforms:
            raise CatalogError(f"{path}: platforms names {unknown_platforms}, which "
                               f"platforms.yaml does not have ({', '.join(platform_names)})")
        if platform not in spec.platforms:
            continue
        kind = spec.wired_for
        if kind is None:
            backends[spec.name] = spec
            continue
        if kind in wired:
            raise CatalogError(f"{path}: {wired[kind].name} is also wired_for {kind}")
        wired[kind] = _check_wired(path, spec, platform)
    missing = sorted(set(typing.get_args(WiredFor)) - set(wired))
    if missing:
        raise CatalogError(f"{profile_path}: no backend of platform {platform} is wired_for "
                           f"{missing}")
    data = EngineData(profile=profile, backends=backends, directory=directory,
                      mla_prefill=_platform_mla_prefill(raw, platform),
                      mla_prefill_path=raw.mla_prefill_path, wired=wired)
    _cross_check(data, codes)
    return data


WIRED_NAMES = frozenset({"platform"})
"""The names a wired backend's rules may read (no request facts: the KV planner
evaluates them without any)."""


def _check_wired(path: Path, spec: BackendSpec, platform: str) -> BackendSpec:
    """A wired backend's rules are read without request facts: they may depend only on
    the platform (``when: "platform == 'cuda'"``); for the loaded platform exactly one
    kernel_block_sizes, cudagraph_support and reorder_batch_threshold rule applies each,
    with a plain value. Returns the backend with those rules alone, unconditional."""
    scope = {"platform": platform}
    sections: dict[str, tuple[Any, ...]] = {"kernel_block_sizes": spec.kernel_block_sizes,
                "cudagraph_support": spec.runtime.cudagraph_support,
                "reorder_batch_threshold": spec.runtime.reorder_batch_threshold}
    chosen: dict[str, Any] = {}
    for section, rules in sections.items():
        for rule in rules:
            _check_names(f"{path}: a wired backend's {section}", rule.when, set(WIRED_NAMES))
        applying = [rule for rule in rules
                    if rule.when is True or (isinstance(rule.when, str)
                    and expr_lang.evaluate(expr_lang.parse(rule.when), scope) is True)]
        if len(applying) != 1 or (section == "reorder_batch_threshold" \
                and isinstance(applying[0].value, str)):
            raise CatalogError(f"{path}: a wired backend (wired_for: {spec.wired_for}) states, "
                               f"for each platform, one kernel_block_sizes, cudagraph_support "
                               f"and reorder_batch_threshold rule each (conditions may read "
                               f"only {sorted(WIRED_NAMES)}), with plain values; on {platform} "
                               f"{len(applying)} {section} rule(s) apply")
        chosen[section] = (applying[0].model_copy(update={"when": True}),)
    spec = spec.model_copy(update={
        "kernel_block_sizes": chosen["kernel_block_sizes"],
        "runtime": spec.runtime.model_copy(update={
            "cudagraph_support": chosen["cudagraph_support"],
            "reorder_batch_threshold": chosen["reorder_batch_threshold"]})})
    if spec.prefill_checkpoint is not None:
        if spec.family != "state":
            raise CatalogError(f"{path}: prefill_checkpoint is a state backend's section")
        for rule in spec.prefill_checkpoint.rules:
            _check_names(f"{path}: prefill_checkpoint rule {rule.kernel}", rule.when,
                         set(PREFILL_CHECKPOINT_NAMES))
    return spec


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
    for build in profile.layer_build:
        if build.code not in codes:
            raise CatalogError(f"layer_build code {build.code} is not registered")
        _check_names(f"layer_build {build.code}", build.fails_when, known, _LAYER_BUILD_NAMES)
    for branch in profile.priorities:
        _check_names("priority branch", branch.when, known)
        for entry in branch.order:
            name = entry.backend if isinstance(entry, PriorityEntry) else entry
            if name not in data.backends:
                raise CatalogError(f"priority list names unknown backend {name!r}")
            if isinstance(entry, PriorityEntry):
                _check_names(f"priority entry {name}", entry.when, known)
    for suggestion in profile.suggestions:
        if suggestion.input not in profile.inputs:
            raise CatalogError(f"suggestion {suggestion.flag!r}: unknown input {suggestion.input!r}")
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
    result is also kept in the on-disk cache of :mod:`selector.util.cache`)."""
    from selector.util.cache import cache_get, cache_put, data_digest

    base = root or schemas_dir()
    digest = data_digest(base)
    cached = cache_get("catalog", digest)
    if isinstance(cached, Catalog) and cached.digest == digest and not cached._loaded:
        return cached
    catalog = _load_catalog_files(base, digest=digest)
    cache_put("catalog", digest, catalog)
    return catalog


def _load_catalog_files(base: Path, digest: str = "") -> Catalog:
    codes_path = base / "reason-codes.yaml"
    try:
        registry = ReasonCodeRegistry.model_validate(read_yaml(codes_path))
    except ValidationError as exc:
        raise CatalogError(validation_message(codes_path, exc)) from None
    codes: dict[str, ReasonCode] = {}
    cli_codes: dict[str, ToolCode] = {}
    argument_codes: dict[str, ToolCode] = {}
    names: set[str] = set()
    sections: tuple[tuple[dict[str, Any], tuple[ReasonCode | ToolCode, ...]], ...] = (
        (codes, registry.codes), (cli_codes, registry.cli_codes),
        (argument_codes, registry.argument_codes))
    for table, entries in sections:
        for code in entries:
            if code.code in codes or code.code in cli_codes or code.code in argument_codes \
                    or code.name in names:
                raise CatalogError(f"{codes_path}: duplicate code {code.code} / {code.name}")
            table[code.code] = code
            names.add(code.name)
    platforms_path = base / "platforms.yaml"
    try:
        platforms = PlatformCatalog.model_validate(read_yaml(platforms_path)).platforms
    except ValidationError as exc:
        raise CatalogError(validation_message(platforms_path, exc)) from None
    devices_path = base / "devices.yaml"
    try:
        catalog = DeviceCatalog.model_validate(read_yaml(devices_path))
    except ValidationError as exc:
        raise CatalogError(validation_message(devices_path, exc)) from None
    _check_devices(devices_path, catalog.devices, platforms)
    index: dict[str, Device] = {}
    for device in catalog.devices:
        for alias in (device.name, *device.aliases):
            key = _device_key(alias)
            if key in index and index[key] is not device:
                raise CatalogError(f"{devices_path}: duplicate device name {alias!r}")
            index[key] = device
    layouts_path = base / "kv-layouts.yaml"
    try:
        layouts = KVLayouts.model_validate(read_yaml(layouts_path))
    except ValidationError as exc:
        raise CatalogError(validation_message(layouts_path, exc)) from None
    by_engine: dict[str, Path] = {}
    parents: dict[str, str | None] = {}
    for directory in sorted((base / "engines").iterdir()):
        profile_path = directory / PROFILE_FILE
        if directory.is_dir() and profile_path.is_file():
            header = read_yaml(profile_path)
            name = header.get("engine") if isinstance(header, dict) else None
            try:
                _pinned(str(name))
            except ValueError:  # packaging's Invalid* errors are ValueErrors
                raise CatalogError(
                    f"{profile_path}: missing `engine: <name>==<version>`") from None
            by_engine[str(name)] = directory
            extends = header.get("extends") if isinstance(header, dict) else None
            parents[str(name)] = extends if isinstance(extends, str) else None
    return Catalog(engine_dirs=by_engine, codes=codes, devices=catalog.devices, _device_index=index,
                   ignored_device_words=catalog.ignored_words,
                   other_platforms=catalog.other_platforms, cli_codes=cli_codes,
                   argument_codes=argument_codes, layout_aliases=dict(layouts.aliases),
                   per_layer_layouts={k: str(v) for k, v in layouts.per_layer.items()},
                   default_layout_preference=layouts.default_preference,
                   platforms=platforms, engine_parents=parents, digest=digest)


def _check_devices(path: Path, devices: tuple[Device, ...],
                   platforms: tuple[PlatformSpec, ...]) -> None:
    """Every device names a platform of platforms.yaml, and its ``arch`` is the one its
    platform's module gives for its capability (``sm_90`` for CUDA 9.0)."""
    known = {p.name: p for p in platforms}
    for device in devices:
        if device.platform not in known:
            raise CatalogError(f"{path}: device {device.name}: unknown platform "
                               f"{device.platform!r} (platforms.yaml: {', '.join(known)})")
        problem = platform_module(device.platform).check_device(device)
        if problem:
            raise CatalogError(f"{path}: device {device.name}: {problem}")


def load_engine(requested: str | None = None) -> EngineData:
    return load_catalog().engine(requested)
