"""The ``vllm serve`` flag table of an engine (``serve-flags.yaml`` of its profile,
inherited along the ``extends`` chain): how many words each flag takes, the short
aliases, what vLLM dropped, and each release's own parser flags."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from selector.catalog import Catalog, CatalogError

__all__ = ["SERVE_FLAGS_FILE", "FlagSpec", "RemovedVariable", "ServeFlags", "release_flags",
           "serve_flags"]

SERVE_FLAGS_FILE = "serve-flags.yaml"
_MAPPINGS = ("aliases", "flags", "removed_environment", "optimization_levels", "dtypes",
             "engine_flags")

Takes = Literal["switch", "value", "list"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FlagSpec(_Frozen):
    """One flag attn-select knows."""

    takes: Takes
    """``switch``: no value; ``value``: one word; ``list``: the following words."""
    note: str = ""
    """Why a flag that does not change backend selection is worth a note (AS104)."""
    removed: str = ""
    """For a flag vLLM no longer accepts: what replaces it (SU004)."""


class RemovedVariable(_Frozen):
    """An environment variable vLLM no longer reads."""

    level: Literal["info", "warning", "error"]
    use: str
    """The flag to use instead (``{value}``: the variable's value); empty for none."""


class PassedOver(_Frozen):
    fields: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()


class ServeFlags(_Frozen):
    """``serve-flags.yaml`` of one engine, inheritance applied."""

    aliases: dict[str, str] = {}
    flags: dict[str, FlagSpec] = {}
    removed_environment: dict[str, RemovedVariable] = {}
    attention_config_passed_over: PassedOver = PassedOver()
    optimization_levels: dict[int, str] = {}
    dtypes: dict[str, str] = {}
    engine_flags: dict[str, Literal[True]] = {}
    """The option strings of this release's own parser."""

    def takes(self, flag: str) -> Takes | None:
        spec = self.flags.get(flag)
        return spec.takes if spec is not None else None


_LOADED: dict[tuple[str, str], ServeFlags] = {}


def serve_flags(catalog: Catalog, engine: str | None = None) -> ServeFlags:
    """The flag table of ``engine`` (a version or range; default: the default engine)."""
    name = catalog.engine(engine).engine
    key = (str(catalog.engine_dirs[name]), name)
    table = _LOADED.get(key)
    if table is None:
        raw = catalog.inherited_document(name, SERVE_FLAGS_FILE, _MAPPINGS)
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
