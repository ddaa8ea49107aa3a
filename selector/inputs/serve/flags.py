"""The ``vllm serve`` flag table of an engine (``serve-flags.yaml`` of its profile,
inherited along the ``extends`` chain): how many words each flag takes, the short
aliases, what vLLM dropped, and each release's own parser flags."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from selector.catalog import ENGINE_FILES, Catalog, CatalogError, EngineData
from selector.schema.serve_flags import ServeFlags

__all__ = ["SERVE_FLAGS_FILE", "SERVE_FLAGS_MAPPINGS", "ServeFlags", "release_flags",
           "serve_flags"]

SERVE_FLAGS_FILE = "serve-flags.yaml"
SERVE_FLAGS_MAPPINGS = ENGINE_FILES[SERVE_FLAGS_FILE].mappings
"""The sections that merge key by key (``KEY: null`` removes one)."""

_TABLES: dict[tuple[str, str], ServeFlags] = {}


def _document(catalog: Catalog, name: str) -> dict[str, Any]:
    """``serve-flags.yaml`` of engine ``name`` merged over its parent's (the catalog's one
    loader: :meth:`~selector.catalog.Catalog.merged_file`)."""
    return catalog.merged_file(name, SERVE_FLAGS_FILE)


def serve_flags(catalog: Catalog, engine: str | EngineData | None = None) -> ServeFlags:
    """The flag table of ``engine`` (a version or range; default: the default engine)."""
    name = catalog.engine_of(engine).engine
    key = (str(catalog.engine_dirs[name]), name)
    table = _TABLES.get(key)
    if table is None:
        try:
            table = ServeFlags.model_validate(_document(catalog, name))
        except ValidationError as exc:
            raise CatalogError(f"{catalog.engine_dirs[name] / SERVE_FLAGS_FILE}: {exc}") from None
        if not table.frontend_flags:
            table = table.with_frontend_stand_in(_nearest_frontend(catalog, name))
        _TABLES[key] = table
    return table


def _nearest_frontend(catalog: Catalog, name: str) -> frozenset[str]:
    """The frontend flags of the oldest newer release of ``name``'s family that records
    them (none: empty)."""
    family = catalog.release_version(name)[0]
    newer = catalog.engine_names[catalog.engine_names.index(name) + 1:]
    for each in newer:
        if catalog.release_version(each)[0] == family:
            frontend = _document(catalog, each).get("frontend_flags") or {}
            if frontend:
                return frozenset(flag for flag, takes in frontend.items() if takes)
    return frozenset()


def release_flags(catalog: Catalog) -> dict[str, frozenset[str]]:
    """Every vLLM release's own parser flags: version (``0.29.0``) -> option strings,
    oldest first."""
    table: dict[str, frozenset[str]] = {}
    for name in catalog.engine_names:
        family, version = catalog.release_version(name)
        if family == "vllm":
            table[str(version)] = frozenset(_document(catalog, name).get("engine_flags") or ())
    return table
