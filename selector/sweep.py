"""Batch mode: flat configs in, one JSON verdict line per config out.

The output line has the oracle's shape, so the two can be diffed::

    {"backends": {NAME: [reason, ...]}, "selected": NAME | null, "error": text | null}

:func:`sweep_lines` reads and evaluates the configs a batch at a time: each line parsed
by pydantic's JSON parser (``json`` for a line it refuses), the configs of the usual shape
read column-wise (:meth:`FlatEvaluator.read_batch`), evaluated column-wise
(:mod:`selector.solver.batch`: each condition once per batch) and each backend's JSON
fragment built once per distinct reason list.
:func:`sweep_lines_per_config` is the reference it must equal line for line (one
compiled evaluator call per config; a property test compares the two).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from json.encoder import encode_basestring_ascii as _string  # json.dumps of a str
from operator import itemgetter
from typing import Any
from weakref import WeakKeyDictionary

from pydantic_core import from_json

from selector.catalog import Catalog, EngineData
from selector.errors import InputError
from selector.pipeline.flat import FlatEvaluator, FlatRequest
from selector.request import RequestColumns
from selector.solver import SelectionOutcome
from selector.solver.batch import BatchEvaluator, collection_paused, evaluator_for

__all__ = ["DEFAULT_BATCH_SIZE", "bad_input", "sweep_lines", "sweep_lines_per_config"]

DEFAULT_BATCH_SIZE = 16384
"""Configs evaluated together (larger: fewer fixed costs per config; smaller: less memory)."""

_Parsed = tuple[Any, FlatRequest]
"""(config id, the config read)."""


def _oracle_error(error: str | None) -> str | None:
    """vLLM raising something other than ValueError is marked as the oracle marks it; a
    ValueError's text is the oracle's without the type (``ValueError: Backend CUSTOM must
    be registered before use. ...``)."""
    if error is None:
        return None
    if error.startswith("ValueError: "):
        return error.removeprefix("ValueError: ")
    if not error.startswith(("No valid", "Selected backend")):
        return "EXCEPTION " + error
    return error


_BAD_INPUT = '"error": "bad input: '
"""How a verdict line of a line that is no config reads (a JSON string cannot hold it
unescaped, so no config id or reason can look like it)."""


def bad_input(line: str) -> str | None:
    """The message of a verdict line written for an input line that is no config
    (``line N: ...``); None for the verdict of a config."""
    start = line.find(_BAD_INPUT)
    if start < 0:
        return None
    message: str = json.loads(line)["error"]
    return message.removeprefix("bad input: ")


def _error_line(config_id: Any, message: str) -> str:
    payload: dict[str, Any] = {"backends": {}, "selected": None, "error": f"bad input: {message}"}
    if config_id is not None:
        payload = {"id": config_id, **payload}
    return json.dumps(payload)


_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_value(text: str) -> Any:
    """``json.loads`` of a stripped line (its scanner called directly: the common case of
    one whole value; anything else goes through ``json.loads`` for its exact error)."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


_json_fast: Callable[[str], Any] = from_json
"""The batch path's JSON parser (pydantic's, in Rust): it gives what ``json.loads`` gives for
every text both accept, and refuses what ``json.loads`` refuses (the reference then reads
the line, for its exact message; ``tests/property/test_flat_batch_props.py``)."""

_NOT_READ = object()


def _parsed(lines: Iterable[str], evaluator: FlatEvaluator) -> Iterator[_Parsed | str]:
    """Per non-empty line, the parsed config, or the finished output line of bad input."""
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        config_id = None
        try:
            config = _json_value(text)
            if isinstance(config, dict):
                config_id = config.get("id")
            request = evaluator.request(config)
        except json.JSONDecodeError as exc:
            yield _error_line(None, f"line {number}: not JSON ({exc.msg})")
            continue
        except InputError as exc:
            yield _error_line(config_id, f"line {number}: {exc.render().split(': ', 1)[1]}")
            continue
        yield config_id, request


def _chunks(lines: Iterable[str], size: int) -> Iterator[list[tuple[int, str]]]:
    """The non-empty lines (stripped), ``size`` at a time, with their line numbers."""
    chunk: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if text:
            chunk.append((number, text))
            if len(chunk) >= size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


_Pending = tuple[Any, str | None, SelectionOutcome | None]
"""(config id, pinned backend, the outcome of a config evaluated alone or None: its outcome
comes from the batch)."""


def _read_chunk(chunk: list[tuple[int, str]], evaluator: FlatEvaluator
                ) -> tuple[list[_Pending | str], RequestColumns, list[str | None]]:
    """:func:`_parsed` of a chunk of lines, the configs read together
    (:meth:`FlatEvaluator.read_batch`), those read alone evaluated: per line its output line
    (bad input) or its config's entry, the request facts of the configs read column-wise
    (their outcomes come from the batch evaluator, in order) and their pinned backends."""
    out: list[_Pending | str] = []
    configs: list[Any] = []
    places: list[int] = []
    for number, text in chunk:
        try:
            config = _json_fast(text)
        except Exception:  # not JSON to the fast parser: read as the reference does
            config = _NOT_READ
        try:
            if config is _NOT_READ:
                config = _json_value(text)
        except json.JSONDecodeError as exc:
            out.append(_error_line(None, f"line {number}: not JSON ({exc.msg})"))
            continue
        configs.append(config)
        places.append(len(out))
        out.append("")  # (the config's place)
    read = evaluator.read_batch(configs)
    forced = read.forced
    rows = read.rows
    ids = [config.get("id") if type(config) is dict else None for config in configs]
    if len(forced) == len(rows):  # every config read column-wise, in order
        entries: list[_Pending | str] = list(zip(ids, forced, repeat(None)))
    else:
        entries = list(zip(ids, [forced[r] if type(r) is int else None for r in rows], repeat(None)))
        for index in [i for i, r in enumerate(rows) if type(r) is not int]:
            item = rows[index]
            if isinstance(item, InputError):
                number = chunk[places[index]][0]
                entries[index] = _error_line(
                    ids[index], f"line {number}: {item.render().split(': ', 1)[1]}")
            else:  # read alone (unusual input, or pinning a backend not evaluated besides)
                assert isinstance(item, FlatRequest)
                entries[index] = (ids[index], item.forced, evaluator.select(item)[0])
    if len(places) == len(out):  # every line JSON
        return entries, read.columns, forced
    for place, entry in zip(places, entries, strict=True):
        out[place] = entry
    return out, read.columns, forced


_MESSAGES: dict[tuple[str, str], str] = {}


def _message(reason: tuple[str, str]) -> str:
    """One reason as the oracle's JSON string (cached: reasons repeat)."""
    found = _MESSAGES.get(reason)
    if found is None:
        code, message = reason
        found = _string(("EXCEPTION " + message) if code.startswith("EX") else message)
        if len(_MESSAGES) < 100_000:
            _MESSAGES[reason] = found
    return found


def _fragment(name: str, reasons: list[tuple[str, str]]) -> str:
    """One backend's ``"NAME": [messages]`` JSON fragment (``json.dumps``'s layout)."""
    return f"{_string(name)}: [{', '.join(map(_message, reasons))}]"


def _head(config_id: Any) -> str:
    return f'{{"id": {json.dumps(config_id)}, "backends": {{' if config_id is not None else '{"backends": {'


_HEAD = _head(None)


def _tail(selected: str | None, error: str | None) -> str:
    error = _oracle_error(error)
    return (f'}}, "selected": {"null" if selected is None else _string(selected)}, '
            f'"error": {"null" if error is None else _string(error)}}}')


def _line(config_id: Any, backends: str, selected: str | None, error: str | None) -> str:
    return f"{_head(config_id)}{backends}{_tail(selected, error)}"


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


def _names(reported: tuple[str, ...], forced: str | None) -> tuple[str, ...]:
    """The backends a line reports: the reported ones, and a pinned one besides."""
    return reported if forced is None or forced in reported else (*reported, forced)


def sweep_lines_per_config(lines: Iterable[str], engine: EngineData,
                           backends: tuple[str, ...] | None = None, *,
                           catalog: Catalog) -> Iterator[str]:
    """:func:`sweep_lines`, one compiled evaluator call per config (the reference)."""
    evaluator = FlatEvaluator(engine, backends, catalog=catalog)
    fragments = _Fragments()
    for item in _parsed(lines, evaluator):
        if isinstance(item, str):
            yield item
            continue
        config_id, request = item
        outcome, names = evaluator.select(request)
        yield _line(config_id, fragments.text(names, outcome), outcome.selected, outcome.error)


class _ListFragments(dict[int, str]):
    """Reason-list id (:class:`BatchEvaluator`) -> one backend's JSON fragment."""

    def __init__(self, name: str, evaluator: BatchEvaluator, separator: str) -> None:
        super().__init__()
        self.name = name
        self.evaluator = evaluator
        self.separator = separator

    def __missing__(self, list_id: int) -> str:
        found = self[list_id] = self.separator + _fragment(self.name, self.evaluator.reasons_list(list_id))
        return found


_LIST_FRAGMENTS: WeakKeyDictionary[BatchEvaluator, dict[str, list[_ListFragments]]] = WeakKeyDictionary()


def _fragments_of(evaluator: BatchEvaluator, separator: str) -> list[_ListFragments]:
    """Per backend of ``evaluator``, its fragments by list id (``separator`` first)."""
    kept = _LIST_FRAGMENTS.setdefault(evaluator, {})
    found = kept.get(separator)
    if found is None:
        found = kept[separator] = [_ListFragments(n, evaluator, separator) for n in evaluator.backends]
    return found


def sweep_lines(lines: Iterable[str], engine: EngineData, backends: tuple[str, ...] | None = None,
                batch_size: int = DEFAULT_BATCH_SIZE, *, catalog: Catalog) -> Iterator[str]:
    """Evaluate JSON Lines of flat configs; yields one output line per non-empty input line
    (``batch_size`` configs evaluated together)."""
    flat = FlatEvaluator(engine, backends, catalog=catalog)
    reported, evaluated = flat.reported, flat.evaluated
    evaluator = evaluator_for(engine, evaluated, catalog=catalog)
    position = {name: i for i, name in enumerate(evaluator.backends)}
    by_id = _fragments_of(evaluator, "")
    reported_fragments = [_fragments_of(evaluator, ", " if i else "")[position[name]]
                          for i, name in enumerate(reported)]
    reported_ids = itemgetter(*(position[name] for name in reported), 0)  # (0: always a tuple)
    by_content = _Fragments()

    tails: dict[str | None, str] = {}

    def lines_of(pending: list[_Pending | str], outcomes: list[SelectionOutcome],
                 keys: list[tuple[int, ...] | None]) -> list[str]:
        done = zip(outcomes, keys, strict=True)
        out: list[str] = []
        add = out.append
        join = "".join
        for item in pending:
            if isinstance(item, str):
                add(item)
                continue
            config_id, forced, outcome = item
            key = None
            if outcome is None:
                outcome, key = next(done)
            if key is None or (forced is not None and forced not in reported):
                names = _names(reported, forced)
                text = (by_content.text(names, outcome) if key is None else
                        ", ".join(by_id[position[name]][key[position[name]]] for name in names))
                add(_line(config_id, text, outcome.selected, outcome.error))
                continue
            error = outcome.error
            if error is None:
                tail = tails.get(outcome.selected)
                if tail is None:
                    tail = tails[outcome.selected] = _tail(outcome.selected, None)
            else:
                tail = _tail(outcome.selected, error)
            add(join([_HEAD if config_id is None else _head(config_id),
                      *map(dict.__getitem__, reported_fragments, reported_ids(key)), tail]))
        return out

    for chunk in _chunks(lines, batch_size):
        # the batch's facts are many small objects: they are freed (by reference counting)
        # before the cyclic collector runs again, so it never has to walk them
        with collection_paused():
            pending, columns, wanted = _read_chunk(chunk, flat)
            outcomes, keys = evaluator.evaluate_keyed(columns, wanted)
            columns = None  # type: ignore[assignment]  # (freed here)
            done = lines_of(pending, outcomes, keys)
            pending = outcomes = keys = None  # type: ignore[assignment]
        yield from done
