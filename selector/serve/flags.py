"""The ``vllm serve`` flag table of an engine (``serve-flags.yaml`` of its profile,
inherited along the ``extends`` chain): how many words each flag takes, the short
aliases, what vLLM dropped, and each release's own parser flags."""

from __future__ import annotations

from pydantic import ValidationError

from selector.catalog import Catalog, CatalogError
from selector.schema.serve_flags import ServeFlags

__all__ = ["SERVE_FLAGS_FILE", "SERVE_FLAGS_MAPPINGS", "ServeFlags", "release_flags",
           "serve_flags"]

SERVE_FLAGS_FILE = "serve-flags.yaml"
SERVE_FLAGS_MAPPINGS = ("aliases", "flags", "removed_environment", "optimization_levels",
                        "dtypes", "engine_flags")
"""The sections that merge key by key (``KEY: null`` removes one)."""

_LOADED: dict[tuple[str, str], ServeFlags] = {}


def serve_flags(catalog: Catalog, engine: str | None = None) -> ServeFlags:
    """The flag table of ``engine`` (a version or range; default: the default engine)."""
    name = catalog.engine(engine).engine
    key = (str(catalog.engine_dirs[name]), name)
    table = _LOADED.get(key)
    if table is None:
        raw = catalog.inherited_document(name, SERVE_FLAGS_FILE, SERVE_FLAGS_MAPPINGS)
        try:
            table = ServeFlags.model_validate(raw)
        except ValidationError as exc:
            raise CatalogError(f"{catalog.engine_dirs[name] / SERVE_FLAGS_FILE}: {exc}") from None
        _LOADED[key] = table
    return table


def release_flags(catalog: Catalog) -> dict[str, frozenset[str]]:
    """Every vLLM release's own parser flags: version (``0.29.0``) -> option strings,
    oldest first."""
    table: dict[str, frozenset[str]] = {}
    for name in catalog.engine_names:
        data = catalog.engine(name)
        if data.family == "vllm":
            table[str(data.version)] = frozenset(serve_flags(catalog, name).engine_flags)
    return table
