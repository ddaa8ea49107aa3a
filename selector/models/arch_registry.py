"""Which architectures an engine version supports: vLLM's model registry,
extracted per engine profile into ``schemas/engines/<engine>/model_registry.json``
by ``tools/extract_model_registry.py``, and its own refusal wording."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from selector.models.families import family_for, unmapped_reason
from selector.models.presets import list_presets, preset_path

if TYPE_CHECKING:
    from selector.catalog import EngineData

__all__ = [
    "ArchitectureStatus",
    "ModelRegistry",
    "architecture_status",
    "load_model_registry",
    "model_rows",
    "pooling_architectures",
]

REGISTRY_FILE = "model_registry.json"
RUNNER_TYPES_FILE = "runner_types.json"
"""``{pooling: [...]}``: the architectures vLLM's ``--runner auto`` resolves to the
pooling runner (tools/runner_type_oracle.py)."""

StatusName = Literal["supported", "removed", "out_of_tree", "unknown"]


class ModelRegistry(BaseModel):
    """One engine's extracted ``registry.py``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vllm_version: str
    source: dict[str, object]
    tables: dict[str, dict[str, tuple[str, str]]]
    previously_supported: dict[str, str]
    out_of_tree: dict[str, str]
    messages: dict[str, str]

    def module_of(self, architecture: str) -> str | None:
        for table in self.tables.values():
            entry = table.get(architecture)
            if entry is not None:
                return entry[0]
        return None

    @property
    def supported(self) -> tuple[str, ...]:
        """Every architecture of every table, sorted (vLLM's ``get_supported_archs``)."""
        return tuple(sorted({arch for table in self.tables.values() for arch in table}))

    def table_of(self, architecture: str) -> str | None:
        for name, table in self.tables.items():
            if architecture in table:
                return name
        return None


@cache
def _load(path: Path) -> ModelRegistry:
    return ModelRegistry.model_validate(json.loads(path.read_text(encoding="utf-8")))


def load_model_registry(engine_dir: Path) -> ModelRegistry | None:
    """The registry extracted for the engine profile in ``engine_dir`` (None
    when the profile has none)."""
    path = engine_dir / REGISTRY_FILE
    return _load(path) if path.is_file() else None


def pooling_architectures(engine_dir: Path) -> frozenset[str] | None:
    """The architectures whose default runner is ``pooling`` in the engine profile in
    ``engine_dir`` (None when the profile has no recorded answer)."""
    path = engine_dir / RUNNER_TYPES_FILE
    return _pooling(path) if path.is_file() else None


@cache
def _pooling(path: Path) -> frozenset[str]:
    return frozenset(json.loads(path.read_text(encoding="utf-8"))["pooling"])


@dataclass(frozen=True)
class ArchitectureStatus:
    """What an engine says about an architecture, in vLLM's words."""

    architecture: str
    engine: str
    status: StatusName
    module: str | None = None
    family: str | None = None
    """The families.yaml family mapping it (None: read as generic attention)."""
    last_version: str | None = None
    """For a removed architecture: the last vLLM version that supported it."""
    message: str = ""
    """vLLM's own refusal text (empty when supported)."""

    @property
    def supported(self) -> bool:
        return self.status == "supported"

    @property
    def mapped(self) -> bool:
        return self.family is not None


def architecture_status(
    architectures: list[str] | tuple[str, ...], registry: ModelRegistry, engine: str
) -> ArchitectureStatus:
    """vLLM's ``_raise_for_unsupported`` order: the first supported architecture
    wins; else the first previously supported one; else an out-of-tree one; else
    every name is unknown."""
    for arch in architectures:
        module = registry.module_of(arch)
        if module is not None:
            family = family_for(arch)
            return ArchitectureStatus(
                arch, engine, "supported", module=module,
                family=family.name if family is not None else None,
            )
    messages = registry.messages
    for arch in architectures:
        if arch in registry.previously_supported:
            version = registry.previously_supported[arch]
            text = messages["previously_supported"].format(arch=arch, previous_version=version)
            return ArchitectureStatus(arch, engine, "removed", last_version=version, message=text)
        if arch in registry.out_of_tree:
            url = registry.out_of_tree[arch]
            text = messages["out_of_tree"].format(arch=arch, plugin_url=url)
            return ArchitectureStatus(arch, engine, "out_of_tree", message=text)
    template = messages["unsupported"]
    text = template.split(" Supported architectures:")[0].format(architectures=list(architectures))
    return ArchitectureStatus(architectures[0], engine, "unknown", message=text)


@cache
def _preset_architectures() -> dict[str, tuple[str, ...]]:
    """architecture -> the presets whose config.json names it."""
    out: dict[str, list[str]] = {}
    for name in list_presets():
        raw = json.loads(preset_path(name).read_text(encoding="utf-8"))
        for arch in raw.get("architectures") or ():
            out.setdefault(arch, []).append(name)
    return {arch: tuple(names) for arch, names in out.items()}


def model_rows(engine: EngineData) -> list[dict[str, Any]]:
    """One row per architecture the engine's vLLM supports (then the removed
    ones): its vLLM module and table, the layer family mapping it and the presets."""
    registry = load_model_registry(engine.directory)
    if registry is None:
        return []
    presets = _preset_architectures()
    rows: list[dict[str, Any]] = []
    for arch in registry.supported:
        family = family_for(arch)
        table = registry.table_of(arch)
        rows.append({
            "architecture": arch,
            "status": "supported",
            "module": registry.module_of(arch),
            "table": table,
            "family": family.name if family is not None else "-",
            "presets": ", ".join(presets.get(arch, ())),
            "unmapped_reason": (unmapped_reason(arch, table) or "not listed")
                               if family is None else "",
        })
    for arch, version in sorted(registry.previously_supported.items()):
        rows.append({
            "architecture": arch,
            "status": f"removed (last vllm=={version})",
            "module": None,
            "table": None,
            "family": "-",
            "presets": "",
            "unmapped_reason": "",
        })
    return rows
