"""Compile only the FlashInfer kernel variants a plan runs (``schemas/flashinfer-jit.yaml``).

FlashInfer's batch-prefill JIT module (the one vLLM's tensor-core decode wrapper and its
prefill wrapper load) is built from one translation unit per (paged | ragged) x mask
mode, each explicitly instantiating the dispatched kernel template; a call runs one of
them. Before a step's first plan, :func:`compile_planned_variants` asks FlashInfer which
module each wrapper needs (with ``FLASHINFER_DISABLE_JIT`` set a plan raises
``MissingJITCacheError`` carrying the module's ``JitSpec``: FlashInfer's own sources and
flags), builds that spec with the instantiations the calls run, one per translation unit
(they compile side by side), and every other one as a stub returning
``cudaErrorNotSupported``; then links the library where FlashInfer's loader looks for
prebuilt (AOT) modules, so the wrappers' own ``plan()`` loads it: the entry points, host
code, arguments and kernels that run are FlashInfer's. Anything this module does not
recognize (another FlashInfer version, a unit it cannot read, an argument the data does
not model, a failed build) leaves the module to FlashInfer's whole build, with a note.

The selection (:func:`parse_unit`, :func:`select_units`) is pure Python; torch and
FlashInfer are passed in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from selector.catalog import read_yaml
from selector.util.resources import schemas_dir

__all__ = [
    "PREBUILT",
    "Call",
    "CallVariants",
    "Citation",
    "Instantiation",
    "KernelUnit",
    "MaskModeRule",
    "PrebuiltData",
    "ReducedModule",
    "Selection",
    "VariantData",
    "compile_planned_variants",
    "load_variant_data",
    "needed_variants",
    "parse_unit",
    "reduced_modules",
    "release_planned_variants",
    "select_units",
]

DISABLE_JIT_VARIABLE = "FLASHINFER_DISABLE_JIT"
STUB_RESULT = "cudaErrorNotSupported"
PREFIX = "attn_select_"


class MaskModeRule(BaseModel):
    """The mask mode a call runs: a literal, or the value of one of its ``plan()`` arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: str | None = None
    argument: str | None = None
    values: dict[str, str] = Field(default_factory=dict)
    source: str
    quote: str

    def mode(self, plan_arguments: Mapping[str, Any]) -> str | None:
        if self.value is not None:
            return self.value
        assert self.argument is not None
        given = plan_arguments.get(self.argument)
        return self.values.get(str(given).lower()) if isinstance(given, bool) else None


class CallVariants(BaseModel):
    """The kernel templates and mask mode one wrapper call runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kernels: list[str]
    source: str
    quote: str
    mask_mode: MaskModeRule
    whole_module_when_given: list[str] = Field(default_factory=list)


class Citation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    quote: str


class PrebuiltData(BaseModel):
    """Where FlashInfer's loader finds prebuilt modules: a package's folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str
    version_attribute: str
    folder_function: str
    library: str
    """A module's library in the folder, ``{name}`` its module name."""
    citations: list[Citation]


class VariantData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    flashinfer_version: str
    discovery: dict[str, str]
    prebuilt: PrebuiltData
    calls: dict[str, CallVariants]


@functools.cache
def load_variant_data() -> VariantData:
    return VariantData.model_validate(read_yaml(schemas_dir() / "flashinfer-jit.yaml"))


def needed_variants(data: VariantData, entry_point: str, plan_arguments: Mapping[str, Any]
                    ) -> frozenset[tuple[str, str]] | None:
    """``(kernel template, mask mode)`` pairs the call runs; None: not modelled (FlashInfer
    builds the whole module)."""
    call = data.calls.get(entry_point)
    if call is None or any(plan_arguments.get(name) is not None
                           for name in call.whole_module_when_given):
        return None
    mode = call.mask_mode.mode(plan_arguments)
    if mode is None:
        return None
    return frozenset((kernel, mode) for kernel in call.kernels)


@dataclass(frozen=True)
class Instantiation:
    """One ``template cudaError_t Kernel<...>(...);`` of a kernel translation unit."""

    kernel: str
    arguments: tuple[str, ...]
    """The template arguments, comments and spaces removed."""
    parameters: str
    text: str
    """The statement as FlashInfer wrote it (without the ``;``)."""

    @property
    def mask_mode(self) -> str | None:
        modes = [a for a in self.arguments if re.fullmatch(r"MaskMode::k\w+", a)]
        return modes[0] if len(modes) == 1 else None

    def stub(self, constants: Mapping[str, str]) -> str:
        """An explicit specialization with the same symbol that returns an error."""
        arguments = ", ".join(_inline(argument, constants) for argument in self.arguments)
        return (f"template <> cudaError_t {self.kernel}<{arguments}>({self.parameters}) "
                f"{{ return {STUB_RESULT}; }}")


@dataclass(frozen=True)
class KernelUnit:
    """A kernel translation unit: includes, then ``namespace flashinfer`` holding only
    ``constexpr auto`` constants and explicit instantiations."""

    preamble: str
    constants: tuple[tuple[str, str], ...]
    instantiations: tuple[Instantiation, ...]

    def render(self, instantiations: tuple[Instantiation, ...]) -> str:
        constants = "".join(f"constexpr auto {name} = {value};\n"
                            for name, value in self.constants)
        body = "".join(f"{item.text};\n\n" for item in instantiations)
        return f"{self.preamble}namespace flashinfer {{\n\n{constants}\n{body}}};  " \
               "// namespace flashinfer\n"


_UNIT = re.compile(r"\A(?P<preamble>.*?)^namespace flashinfer \{[ \t]*\n(?P<body>.*)"
                   r"^\};?[ \t]*(?://[^\n]*)?\s*\Z", re.DOTALL | re.MULTILINE)
_CONSTANT = re.compile(r"\Aconstexpr auto (?P<name>\w+) = (?P<value>[^;]+)\Z", re.DOTALL)
_STATEMENT = re.compile(r"\Atemplate cudaError_t (?P<kernel>\w+)\s*<(?P<arguments>.*)>\s*"
                        r"\((?P<parameters>[^()]*)\)\Z", re.DOTALL)
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def _split_arguments(text: str) -> tuple[str, ...] | None:
    parts: list[str] = []
    depth, current = 0, ""
    for char in _COMMENT.sub("", text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    cleaned = tuple(" ".join(part.split()) for part in parts)
    return None if depth or not all(cleaned) else cleaned


def _inline(argument: str, constants: Mapping[str, str]) -> str:
    for name, value in constants.items():
        argument = re.sub(rf"\b{re.escape(name)}\b", f"({value})", argument)
    return argument


def parse_unit(text: str) -> KernelUnit | None:
    """The unit's structure, or None when it is not a kernel unit this module can read (a
    host or binding unit, or any unit of another shape: it is compiled as it is)."""
    match = _UNIT.match(text)
    if match is None or "#" in match.group("body"):
        return None
    constants: list[tuple[str, str]] = []
    instantiations: list[Instantiation] = []
    for raw in match.group("body").split(";"):
        statement = raw.strip()
        if not statement:
            continue
        constant = _CONSTANT.match(statement)
        if constant is not None:
            constants.append((constant.group("name"), " ".join(constant.group("value").split())))
            continue
        found = _STATEMENT.match(statement)
        if found is None:
            return None
        arguments = _split_arguments(found.group("arguments"))
        if arguments is None:
            return None
        instantiations.append(Instantiation(
            found.group("kernel"), arguments, " ".join(found.group("parameters").split()),
            statement))
    if not instantiations:
        return None
    return KernelUnit(match.group("preamble"), tuple(constants), tuple(instantiations))


@dataclass(frozen=True)
class Selection:
    """A module's sources with only the needed instantiations compiled."""

    units: tuple[tuple[str, str], ...]
    """New translation units (file name, text): one per kept instantiation, then stubs."""
    kept_sources: tuple[str, ...]
    """FlashInfer's own sources compiled as they are (host code, binding)."""
    kept: tuple[Instantiation, ...]
    stubbed: tuple[Instantiation, ...]

    @property
    def tag(self) -> str:
        digest = hashlib.sha256("\n".join(item.text for item in self.kept).encode())
        return digest.hexdigest()[:10]


def select_units(sources: Mapping[str, str], needs: frozenset[tuple[str, str]]
                 ) -> Selection | None:
    """Split ``sources`` (file name -> text, FlashInfer's module) into the instantiations
    ``needs`` names, one per unit, and stubs for the rest; None when nothing would be left
    out, a need matches no instantiation, or a kernel unit's mask mode cannot be read."""
    kept_sources: list[str] = []
    kept: list[tuple[str, KernelUnit, Instantiation]] = []
    stubbed: list[tuple[KernelUnit, Instantiation]] = []
    for name, text in sources.items():
        unit = parse_unit(text)
        if unit is None:
            kept_sources.append(name)
            continue
        for item in unit.instantiations:
            mode = item.mask_mode
            if mode is None:
                return None
            if (item.kernel, mode) in needs:
                kept.append((name, unit, item))
            else:
                stubbed.append((unit, item))
    matched = {(item.kernel, item.mask_mode) for _, _, item in kept}
    if not stubbed or not kept or not any(need in matched for need in needs):
        return None
    units: list[tuple[str, str]] = []
    for index, (name, unit, item) in enumerate(kept):
        units.append((f"{PREFIX}{Path(name).stem}_{index}.cu", unit.render((item,))))
    by_preamble: dict[str, list[str]] = {}
    for unit, item in stubbed:
        by_preamble.setdefault(unit.preamble, []).append(item.stub(dict(unit.constants)))
    for index, (preamble, stubs) in enumerate(by_preamble.items()):
        text = (f"{preamble}// Instantiations of this module that the plan does not run: "
                f"each returns {STUB_RESULT} (attn-select, schemas/flashinfer-jit.yaml).\n"
                "namespace flashinfer {\n\n" + "\n\n".join(stubs) +
                "\n\n};  // namespace flashinfer\n")
        units.append((f"{PREFIX}stubs_{index}.cu", text))
    return Selection(tuple(units), tuple(kept_sources), tuple(i for _, _, i in kept),
                     tuple(i for _, i in stubbed))


def _write_if_different(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def _jit_disabled() -> Iterator[None]:
    before = os.environ.get(DISABLE_JIT_VARIABLE)
    os.environ[DISABLE_JIT_VARIABLE] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DISABLE_JIT_VARIABLE, None)
        else:
            os.environ[DISABLE_JIT_VARIABLE] = before


_LINKED: dict[str, Path] = {}
"""Module name -> the reduced library FlashInfer's loader finds for it (this process)."""
_ORIGINAL_AOT: list[Path | None] = []
"""FlashInfer's own AOT folder, before the first reduced module was linked."""
_LOCK = threading.Lock()


def _link_aot(jit_env: Any) -> None:
    """Point FlashInfer's AOT folder at one holding the reduced libraries (and the entries
    of its own AOT folder), named by what it holds."""
    if not _ORIGINAL_AOT:
        original = getattr(jit_env, "FLASHINFER_AOT_DIR", None)
        _ORIGINAL_AOT.append(Path(original) if original is not None else None)
    key = hashlib.sha256(repr(sorted((n, str(p)) for n, p in _LINKED.items())).encode())
    root = Path(jit_env.FLASHINFER_WORKSPACE_DIR) / "attn-select-aot" / key.hexdigest()[:12]
    root.mkdir(parents=True, exist_ok=True)
    original = _ORIGINAL_AOT[0]
    if original is not None and original.is_dir():
        for entry in original.iterdir():
            if not (root / entry.name).exists():
                (root / entry.name).symlink_to(entry)
    for name, library in _LINKED.items():
        folder = root / name
        folder.mkdir(exist_ok=True)
        target = folder / f"{name}.so"
        if not target.exists():
            target.symlink_to(library)
    jit_env.FLASHINFER_AOT_DIR = root


def _module_needed(flashinfer: Any, jit: Any, entry_point: str, construct: dict[str, Any],
                   plan: dict[str, Any]) -> Any:
    """The JitSpec a wrapper's plan() would build, asked of FlashInfer with a wrapper of the
    same construction (None: it builds nothing: the module is prebuilt or loaded already,
    or the plan failed for another reason, which the wrapper's own plan will raise)."""
    probe = getattr(flashinfer, entry_point)(**construct)
    with _jit_disabled():
        try:
            probe.plan(**plan)
        except jit.MissingJITCacheError as error:
            return error.spec
        except Exception:  # raised again by the wrapper's own plan()
            return None
    return None


def _load_problem(spec: Any, library: Path) -> str | None:
    """Why FlashInfer could not load the prebuilt ``library`` here (None: it loads), by
    its own loader (``JitSpec.load``): a library built on another machine's image may
    need system libraries this one lacks."""
    load = getattr(spec, "load", None)
    if load is None:
        return None
    try:
        load(library)
    except Exception as error:  # the module is compiled here instead
        return f"it does not load: {_first_line(error, 400)}"
    return None


def _other_prebuilt(jit_env: Any, name: str) -> list[str]:
    """Reduced modules of ``name`` the AOT folder holds (selections of other plans)."""
    folder = getattr(jit_env, "FLASHINFER_AOT_DIR", None)
    if folder is None or not Path(folder).is_dir():
        return []
    return sorted(entry.name.removeprefix(f"{name}_{PREFIX}")
                  for entry in Path(folder).glob(f"{name}_{PREFIX}*"))


def _first_line(error: BaseException, limit: int = 160) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:limit] if text else ''}"


Call = tuple[str, dict[str, Any], dict[str, Any]]
"""A wrapper call: entry point, materialized construct and plan() arguments."""


@dataclass(frozen=True)
class ReducedModule:
    """A FlashInfer module with only the planned instantiations: its reduced ``JitSpec``
    (FlashInfer's own, renamed ``<module>_attn_select_<tag>``, with the selected units)."""

    name: str
    """FlashInfer's module name (the one its loader looks up)."""
    spec: Any
    selection: Selection
    phases: tuple[str, ...]

    def prebuilt(self, jit_env: Any) -> Path | None:
        """The library FlashInfer's AOT folder holds under the reduced name (prebuilt,
        ``benchmarks/prebuild_flashinfer.py``), where ``JitSpec.aot_path`` looks
        (``schemas/flashinfer-jit.yaml`` ``prebuilt.library``)."""
        folder = getattr(jit_env, "FLASHINFER_AOT_DIR", None)
        if folder is None:
            return None
        library = Path(folder) / load_variant_data().prebuilt.library.format(name=self.spec.name)
        return library.resolve() if library.exists() else None

    def note(self, how: str) -> str:
        modes = ", ".join(sorted({item.mask_mode or "?" for item in self.selection.kept}))
        total = len(self.selection.kept) + len(self.selection.stubbed)
        return (f"FlashInfer JIT: {self.name}: {how} {len(self.selection.kept)} of {total} "
                f"kernel instantiations ({modes}: what {' and '.join(self.phases)} run), each "
                f"in its own unit; the other {len(self.selection.stubbed)} are stubs returning "
                f"{STUB_RESULT} (schemas/flashinfer-jit.yaml)")


PREBUILT = "prebuilt kernels, as flashinfer-jit-cache ships them:"
"""How a note names a reduced module found prebuilt in FlashInfer's AOT folder."""


def reduced_modules(flashinfer: Any, calls: Mapping[str, Call],
                    later: Mapping[str, tuple[str, dict[str, Any]]] | None = None
                    ) -> tuple[list[ReducedModule], list[str]]:
    """The reduced modules the wrapper calls ``calls`` (by phase) need, their units
    written beside FlashInfer's generated sources, and notes for the modules left to
    FlashInfer's whole build (see :func:`compile_planned_variants`)."""
    with _LOCK:
        return _reduced_modules(flashinfer, calls, later)


def _reduced_modules(flashinfer: Any, calls: Mapping[str, Call],
                     later: Mapping[str, tuple[str, dict[str, Any]]] | None
                     ) -> tuple[list[ReducedModule], list[str]]:
    jit = getattr(flashinfer, "jit", None)
    if jit is None:
        return [], []  # a FlashInfer without a JIT (a test double): nothing is compiled
    data = load_variant_data()
    version = str(getattr(flashinfer, "__version__", "?"))
    if version != data.flashinfer_version:
        return [], [f"FlashInfer {version}: its whole JIT modules are compiled (which kernel "
                    f"variants a call runs was read from FlashInfer {data.flashinfer_version}, "
                    "schemas/flashinfer-jit.yaml)"]
    notes: list[str] = []
    specs: dict[str, Any] = {}
    needs: dict[str, set[tuple[str, str]] | None] = {}
    phases: dict[str, list[str]] = {}
    for phase, (entry_point, construct, plan) in calls.items():
        spec = _module_needed(flashinfer, jit, entry_point, construct, plan)
        if spec is None or Path(spec.jit_library_path).exists():
            continue  # prebuilt, loaded already, or in FlashInfer's own JIT cache
        call_needs = needed_variants(data, entry_point, plan)
        specs[spec.name] = spec
        phases.setdefault(spec.name, []).append(phase)
        known = needs.get(spec.name, set())
        needs[spec.name] = None if known is None or call_needs is None \
            else known | call_needs
    for entry_point, plan in (later or {}).values():
        later_needs = needed_variants(data, entry_point, plan)
        for name, known in needs.items():
            needs[name] = None if known is None or later_needs is None \
                else known | later_needs
    modules: list[ReducedModule] = []
    for name, spec in specs.items():
        wanted = needs[name]
        selection = None if wanted is None else select_units(
            {Path(path).name: Path(path).read_text(encoding="utf-8")
             for path in spec.sources}, frozenset(wanted))
        if selection is None:
            notes.append(f"FlashInfer JIT: {name} is compiled whole (what "
                         f"{' and '.join(phases[name])} run is not a selection "
                         "schemas/flashinfer-jit.yaml models)")
            continue
        folder = Path(spec.sources[0]).parent
        for file_name, text in selection.units:
            _write_if_different(folder / file_name, text)
        paths = [folder / file_name for file_name, _ in selection.units] + \
            [Path(path) for path in spec.sources if Path(path).name in selection.kept_sources]
        reduced = dataclasses.replace(spec, name=f"{name}_{PREFIX}{selection.tag}",
                                      sources=paths)
        modules.append(ReducedModule(name, reduced, selection, tuple(phases[name])))
    return modules, notes


def compile_planned_variants(flashinfer: Any, calls: Mapping[str, Call],
                             later: Mapping[str, tuple[str, dict[str, Any]]] | None = None
                             ) -> list[str]:
    """Build, for the wrapper calls ``calls`` (by phase), only the kernel instantiations
    they run; returns notes for the report. Call before the wrappers' first ``plan()``.

    A reduced module FlashInfer's AOT folder holds already (a ``flashinfer_jit_cache``
    package, as ``benchmarks/prebuild_flashinfer.py`` writes one) is loaded as it is, with
    no compile; the others are built, side by side.

    A module is reduced once per process (FlashInfer keeps the loaded module per argument
    tuple: get_batch_prefill_module), so the calls ``later`` may make (a phase this step's
    batch lacks: entry point and its literal plan() arguments) add their variants to every
    module built here: one module may serve both wrappers (fa2 below SM90)."""
    with _LOCK:
        modules, notes = _reduced_modules(flashinfer, calls, later)
        if not modules:
            return notes
        jit_env = flashinfer.jit.env
        libraries: dict[str, Path] = {}
        builds: list[ReducedModule] = []
        unusable: dict[str, str] = {}
        for module in modules:
            prebuilt = module.prebuilt(jit_env)
            problem = None if prebuilt is None else _load_problem(module.spec, prebuilt)
            if prebuilt is not None and problem is None:
                libraries[module.name] = prebuilt
                continue
            builds.append(module)
            if problem is not None:
                unusable[module.name] = problem
            elif others := _other_prebuilt(jit_env, module.name):
                unusable[module.name] = f"it holds {', '.join(others)}, another selection"
        errors: dict[str, BaseException] = {}

        def build(module: ReducedModule) -> None:
            try:
                module.spec.build(verbose=False)
            except Exception as error:  # FlashInfer's own build of the whole module follows
                errors[module.name] = error

        threads = [threading.Thread(target=build, args=(module,), daemon=True,
                                    name=f"attn-select-flashinfer-jit-{index}")
                   for index, module in enumerate(builds)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for module in modules:
            if module.name in errors:
                notes.append(f"FlashInfer JIT: building only the planned variants of "
                             f"{module.name} failed ({_first_line(errors[module.name])}); "
                             "FlashInfer compiles its whole module")
                continue
            if module.name in libraries:
                _LINKED[module.name] = libraries[module.name]
                notes.append(module.note(PREBUILT))
            else:
                _LINKED[module.name] = Path(module.spec.jit_library_path)
                why = unusable.get(module.name)
                notes.append(module.note("compiled") + (
                    "" if why is None else f"; not the prebuilt module ({why})"))
        if len(errors) < len(modules):
            _link_aot(jit_env)
    return notes


def release_planned_variants(flashinfer: Any) -> None:
    """Undo :func:`compile_planned_variants` for this process's later FlashInfer users (a
    DCP check's ragged wrapper, a test session): FlashInfer's own AOT folder again, and the
    batch-prefill modules it has loaded forgotten (``get_batch_prefill_module`` is a
    ``functools.cache``), so the next plan builds or loads FlashInfer's whole module.
    Wrappers planned already keep the module they hold. Call when a run ends."""
    with _LOCK:
        if not _ORIGINAL_AOT:
            return
        original = _ORIGINAL_AOT[0]
        if original is not None:
            flashinfer.jit.env.FLASHINFER_AOT_DIR = original
        getter = getattr(getattr(flashinfer, "prefill", None), "get_batch_prefill_module", None)
        if getter is not None and callable(getattr(getter, "cache_clear", None)):
            getter.cache_clear()
        _LINKED.clear()
        _ORIGINAL_AOT.clear()
