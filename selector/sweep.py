"""Batch mode: flat configs in, one JSON verdict line per config out.

The output line has the oracle's shape, so the two can be diffed::

    {"backends": {NAME: [reason, ...]}, "selected": NAME | null, "error": text | null}

:func:`sweep_lines` evaluates the configs a batch at a time
(:mod:`selector.solver.batch`: each condition once per batch, column-wise) and
builds each backend's JSON fragment once per distinct reason list.
:func:`sweep_lines_per_config` is the reference it must equal line for line (one
compiled evaluator call per config; a property test compares the two).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any

from selector.catalog import EngineData
from selector.errors import InputError
from selector.flat import facts_from_flat
from selector.solver import SelectionOutcome, select
from selector.solver.batch import BatchEvaluator, evaluator_for
from selector.solver.compiled import compiled_for

__all__ = ["DEFAULT_BATCH_SIZE", "sweep_lines", "sweep_lines_per_config"]

DEFAULT_BATCH_SIZE = 16384
"""Configs evaluated together (larger: fewer fixed costs per config; smaller: less memory)."""

_Parsed = tuple[Any, dict[str, Any], str | None]
"""(config id, request facts, explicitly requested backend)."""


def _oracle_error(error: str | None) -> str | None:
    """vLLM raising something other than ValueError is marked as the oracle marks it."""
    if error is not None and not error.startswith(("No valid", "Selected backend")):
        return "EXCEPTION " + error
    return error


def _error_line(config_id: Any, message: str) -> str:
    payload: dict[str, Any] = {"backends": {}, "selected": None, "error": f"bad input: {message}"}
    if config_id is not None:
        payload = {"id": config_id, **payload}
    return json.dumps(payload)


def _parsed(lines: Iterable[str], engine: EngineData) -> Iterator[_Parsed | str]:
    """Per non-empty line, the parsed config, or the finished output line of bad input."""
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        config_id = None
        try:
            config = json.loads(text)
            if isinstance(config, dict):
                config_id = config.get("id")
            facts, forced = facts_from_flat(config, engine.profile)
            if forced is not None:
                forced = engine.backend(forced).name
        except json.JSONDecodeError as exc:
            yield _error_line(None, f"line {number}: not JSON ({exc.msg})")
            continue
        except InputError as exc:
            yield _error_line(config_id, f"line {number}: {exc.render().split(': ', 1)[1]}")
            continue
        yield config_id, facts, forced


def _fragment(name: str, reasons: list[tuple[str, str]]) -> str:
    """One backend's ``"NAME": [messages]`` JSON fragment."""
    messages = [("EXCEPTION " + m) if c.startswith("EX") else m for c, m in reasons]
    return f"{json.dumps(name)}: {json.dumps(messages)}"


def _line(config_id: Any, backends: str, selected: str | None, error: str | None) -> str:
    dumps = json.dumps
    head = f'{{"id": {dumps(config_id)}, ' if config_id is not None else "{"
    return (head + '"backends": {' + backends + '}, "selected": '
            + dumps(selected) + ', "error": ' + dumps(_oracle_error(error)) + "}")


class _Fragments:
    """Fragments cached by content (for outcomes evaluated one at a time)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[object, ...], str] = {}

    def text(self, names: tuple[str, ...], outcome: SelectionOutcome) -> str:
        parts = []
        reasons = outcome.reasons
        for name in names:
            key = (name, *reasons[name])
            fragment = self._cache.get(key)
            if fragment is None:
                fragment = self._cache[key] = _fragment(name, reasons[name])
            parts.append(fragment)
        return ", ".join(parts)


def _evaluated(engine: EngineData, backends: tuple[str, ...] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the backends reported, the backends evaluated: auto-selectable ones first)."""
    reported = tuple(backends or engine.profile.reported_backends)
    return reported, tuple(dict.fromkeys([*engine.auto_backends(), *reported]))


def _names(reported: tuple[str, ...], forced: str | None) -> tuple[str, ...]:
    return reported if forced is None or forced in reported else (*reported, forced)


def sweep_lines_per_config(lines: Iterable[str], engine: EngineData,
                           backends: tuple[str, ...] | None = None) -> Iterator[str]:
    """:func:`sweep_lines`, one compiled evaluator call per config (the reference)."""
    reported, evaluated = _evaluated(engine, backends)
    compiled = compiled_for(engine.engine, evaluated)
    fragments = _Fragments()
    for item in _parsed(lines, engine):
        if isinstance(item, str):
            yield item
            continue
        config_id, facts, forced = item
        if forced is not None and forced not in evaluated:
            outcome = select(compiled_for(engine.engine, (*evaluated, forced)), facts, forced)
        else:
            outcome = select(compiled, facts, forced)
        yield _line(config_id, fragments.text(_names(reported, forced), outcome),
                    outcome.selected, outcome.error)


class _ListFragments(dict[int, str]):
    """Reason-list id (:class:`BatchEvaluator`) -> one backend's JSON fragment."""

    def __init__(self, name: str, evaluator: BatchEvaluator) -> None:
        super().__init__()
        self.name = name
        self.evaluator = evaluator

    def __missing__(self, list_id: int) -> str:
        found = self[list_id] = _fragment(self.name, self.evaluator.reasons_list(list_id))
        return found


def sweep_lines(lines: Iterable[str], engine: EngineData, backends: tuple[str, ...] | None = None,
                batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[str]:
    """Evaluate JSON Lines of flat configs; yields one output line per non-empty input line
    (``batch_size`` configs evaluated together)."""
    reported, evaluated = _evaluated(engine, backends)
    evaluator = evaluator_for(engine, evaluated)
    position = {name: i for i, name in enumerate(evaluator.backends)}
    by_id = [_ListFragments(name, evaluator) for name in evaluator.backends]
    reported_ids = itemgetter(*(position[name] for name in reported), 0)  # (0: always a tuple)
    reported_fragments = [by_id[position[name]] for name in reported]
    by_content = _Fragments()
    pending: list[tuple[Any, str | None, SelectionOutcome | None] | str] = []
    batch: list[dict[str, Any]] = []
    wanted: list[str | None] = []

    def flush() -> Iterator[str]:
        outcomes, keys = evaluator.evaluate_keyed(batch, wanted)
        done = zip(outcomes, keys, strict=True)
        for item in pending:
            if isinstance(item, str):
                yield item
                continue
            config_id, forced, outcome = item
            key = None
            if outcome is None:
                outcome, key = next(done)
            if key is None:
                text = by_content.text(_names(reported, forced), outcome)
            else:
                text = ", ".join(map(dict.__getitem__, reported_fragments, reported_ids(key)))
                if forced is not None and forced not in reported:
                    text += ", " + by_id[position[forced]][key[position[forced]]]
            yield _line(config_id, text, outcome.selected, outcome.error)
        pending.clear()
        batch.clear()
        wanted.clear()

    for item in _parsed(lines, engine):
        if isinstance(item, str):
            pending.append(item)
            continue
        config_id, facts, forced = item
        if forced is not None and forced not in evaluated:  # rare: evaluated on its own
            compiled = compiled_for(engine.engine, (*evaluated, forced))
            pending.append((config_id, forced, select(compiled, facts, forced)))
            continue
        pending.append((config_id, forced, None))
        batch.append(facts)
        wanted.append(forced)
        if len(batch) >= batch_size:
            yield from flush()
    yield from flush()
