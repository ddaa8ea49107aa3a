"""Flat selector configs through the stages (``sweep``, ``diff --matrix``): request facts
from each config, then the compiled profile's selection, one outcome per config.

:class:`FlatEvaluator` compiles the engine profile once; :meth:`FlatEvaluator.request`
reads a config (the only step that can fail on bad input), :meth:`FlatEvaluator.select`
evaluates it, :meth:`FlatEvaluator.read_batch` reads many at once (``sweep``) and
:meth:`FlatEvaluator.evaluate_batch` evaluates many at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selector.catalog import Catalog, EngineData
from selector.errors import InputError
from selector.inputs.flat import facts_from_flat, facts_from_flat_batch
from selector.request import RequestColumns, RequestFacts
from selector.solver import SelectionOutcome, select
from selector.solver.compiled import CompiledEngine, compiled_for

__all__ = ["FlatBatchRead", "FlatEvaluator", "FlatRequest"]


@dataclass(frozen=True, slots=True)
class FlatRequest:
    """One flat config read: its request facts and the backend it pins (None: automatic)."""

    facts: RequestFacts
    forced: str | None


@dataclass(frozen=True, slots=True)
class FlatBatchRead:
    """Flat configs read together (:meth:`FlatEvaluator.read_batch`): :attr:`columns` the
    request facts of those read column-wise, :attr:`forced` their pinned backends (each
    evaluated besides); per config (:attr:`rows`), its index in :attr:`columns`, or the
    config read alone, or the input error that refuses it."""

    columns: RequestColumns
    forced: list[str | None]
    rows: list[int | FlatRequest | InputError]


class FlatEvaluator:
    """Flat configs -> selection outcomes under one engine profile.

    ``backends``: the backends to report (default: the profile's reported set); every
    backend of automatic selection is evaluated besides. ``every``: evaluate every
    registered backend (the compiled evaluator of ``solve``).
    """

    def __init__(self, engine: EngineData, backends: tuple[str, ...] | None = None, *,
                 catalog: Catalog, every: bool = False) -> None:
        self.engine = engine
        self.catalog = catalog
        self.reported: tuple[str, ...] = tuple(backends or engine.profile.reported_backends)
        self.evaluated: tuple[str, ...] = tuple(
            dict.fromkeys([*engine.auto_backends(), *self.reported]))
        self.compiled: CompiledEngine = (
            compiled_for(engine, catalog=catalog) if every
            else compiled_for(engine, self.evaluated, catalog=catalog))
        self._every = every

    def request(self, config: Mapping[str, Any], *, auto: bool = False) -> FlatRequest:
        """Read one flat config (raises :class:`InputError` naming the field); ``auto``:
        ignore the backend it pins (automatic selection)."""
        facts, forced = facts_from_flat(config, self.engine.profile)
        if auto:
            return FlatRequest(facts, None)
        if forced is not None:
            forced = self.engine.backend(forced).name
        return FlatRequest(facts, forced)

    def read_batch(self, configs: Sequence[object]) -> FlatBatchRead:
        """:meth:`request` of every config, in order: the configs of the usual shape read
        column-wise, the others one at a time."""
        read = facts_from_flat_batch(configs, self.engine.profile, self._evaluated_backend)
        rows: list[int | FlatRequest | InputError] = []
        for config, index in zip(configs, read.rows, strict=True):
            if index is None:
                try:
                    rows.append(self.request(config))  # type: ignore[arg-type]  # (checked there)
                except InputError as error:
                    rows.append(error)
            else:
                rows.append(index)
        return FlatBatchRead(read.columns, read.forced, rows)

    def _evaluated_backend(self, name: str) -> str:
        """The backend's name; a backend not evaluated besides (rare) is read alone."""
        found = self.engine.backend(name).name
        if found not in self.evaluated:
            raise ValueError(found)
        return found

    def select(self, request: FlatRequest) -> tuple[SelectionOutcome, tuple[str, ...]]:
        """(the selection outcome, the backends to report for it: the pinned one included)."""
        forced = request.forced
        stated = request.facts.stated
        if self._every:
            outcome = select(self.compiled, {**self.compiled.defaults, **stated}, forced)
        elif forced is not None and forced not in self.evaluated:
            outcome = select(compiled_for(self.engine, (*self.evaluated, forced),
                                          catalog=self.catalog),
                             stated, forced)
        else:
            outcome = select(self.compiled, stated, forced)
        reported = self.reported
        names = reported if forced is None or forced in reported else (*reported, forced)
        return outcome, names

    def evaluate_batch(self, configs: Iterable[Mapping[str, Any]]
                       ) -> list[tuple[SelectionOutcome, tuple[str, ...]] | InputError]:
        """Every config's outcome (or the input error that stops it), in order: the entry
        for a column-wise or otherwise batched evaluator."""
        out: list[tuple[SelectionOutcome, tuple[str, ...]] | InputError] = []
        for config in configs:
            try:
                request = self.request(config)
            except InputError as error:
                out.append(error)
                continue
            out.append(self.select(request))
        return out
