"""Evaluate a batch of requests at once (the ``sweep`` hot path).

Two steps, both derived from the generated evaluator itself (:mod:`.compiled`; no
second copy of the rules):

1. *Value classes.*  The evaluator reads each input fact only through a few maximal
   sub-expressions that read that fact alone (``head_size in K_3``,
   ``(block_size % 16) == 0`` ...).  Values whose sub-expressions all give the same
   results are interchangeable, so each distinct value of the batch is mapped once
   to its class (500 head sizes become about 20 classes) and the batch's column of
   that fact to class codes of one byte.
2. *Column-wise run* (:mod:`.vector`).  The evaluator's statements run once for the
   whole batch: each condition once per distinct value (or combination) of what it
   reads, the branching as byte masks; every backend's reason list comes back as an
   id per request (lists are interned), decoded once per distinct bit pattern.

Selection (:func:`selector.solver.decide`) then runs once per distinct combination
of reason lists.  The outcome is exactly the per-request :func:`selector.solver.select`
(a property test checks it): the "No valid backend" text, the only part that quotes
request values the classes merge, is built per request; a request holding a value
whose equality does not imply identical behaviour (a float, a list ...) or whose
evaluation raises is evaluated alone, the per-request way.
"""

from __future__ import annotations

import ast
import gc
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import itemgetter
from typing import Any, Literal

from selector.catalog import Catalog, EngineData
from selector.request import RequestColumns
from selector.solver import (
    SelectionOutcome,
    decide,
    no_valid_hint,
    no_valid_message,
    no_valid_reasons,
    select,
)
from selector.solver.compiled import CompiledEngine, compiled_for
from selector.solver.vector import ERROR, Column, Const, Program, Run, Unsupported, Value

__all__ = ["BatchEvaluator", "collection_paused", "evaluate_batch", "evaluator_for"]

_SMALLEST_SPLIT = 256
"""A batch that does not fit the columns is halved down to this size, then run request by request."""

_EXACT_TYPES = frozenset({int, str, bool, type(None)})
"""Types whose equal values of one type behave identically (unlike -0.0 and 0.0)."""


def _quotes_request(outcome: SelectionOutcome, backend: str | None) -> bool:
    """Whether the outcome's error is vLLM's "No valid backend" text (the one text that
    quotes request values; an explicit choice or an exception reason never does)."""
    if backend is not None or outcome.selected is not None:
        return False
    reasons = outcome.reasons
    return not any(reasons[n] and reasons[n][0][0].startswith("EX") for n in outcome.order)


def _single_input_expressions(compiled: CompiledEngine) -> dict[str, list[ast.expr]]:
    """Per input fact, the maximal sub-expressions of the generated evaluator that read
    that fact and no other local (constants and builtins aside); a fact read nowhere maps
    to an empty list."""
    function = ast.parse(compiled.source).body[0]
    assert isinstance(function, ast.FunctionDef)
    stored = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local_names = stored | {a.arg for a in function.args.args}
    variable_of = {"v_" + name.replace(".", "__"): name for name in compiled.input_names}
    reads: dict[int, frozenset[str]] = {}

    def locals_of(node: ast.AST) -> frozenset[str]:
        found: set[str] = set()
        if isinstance(node, ast.Name) and node.id in local_names:
            found.add(node.id)
        for child in ast.iter_child_nodes(node):
            found |= locals_of(child)
        reads[id(node)] = frozenset(found)
        return reads[id(node)]

    locals_of(function)
    found: dict[str, list[ast.expr]] = {name: [] for name in compiled.input_names}
    reassigned: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in variable_of:
            reassigned.add(node.id)

    def visit(node: ast.AST, enclosing: frozenset[str] | None) -> None:
        own = reads[id(node)]
        if isinstance(node, ast.expr) and len(own) == 1 and own != enclosing:
            (variable,) = own
            if variable in variable_of:
                found[variable_of[variable]].append(node)
                return
        inner = own if isinstance(node, ast.expr) else None
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    for statement in function.body:
        if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and statement.targets[0].id in variable_of):
            continue  # ``v_x = f['x']``: the read itself
        visit(statement, None)
    stores = [n.id for n in ast.walk(function) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store) and n.id in variable_of]
    for variable in {v for v in stores if stores.count(v) > 1}:
        found[variable_of[variable]] = [ast.Name(id=variable, ctx=ast.Load())]  # never merged
    return found


def _projections(compiled: CompiledEngine) -> dict[str, Callable[[Any], tuple[Any, ...]]]:
    """Per input fact that the evaluator reads, a function from a value to the results of
    every sub-expression that reads it (raising where one of them raises)."""
    namespace = compiled.evaluate.__globals__
    projections: dict[str, Callable[[Any], tuple[Any, ...]]] = {}
    for name, expressions in _single_input_expressions(compiled).items():
        if not expressions:
            continue
        variable = "v_" + name.replace(".", "__")
        body = ast.Tuple(elts=list(expressions), ctx=ast.Load())
        lam = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=variable)],
                                            kwonlyargs=[], kw_defaults=[], defaults=[]), body=body)
        tree = ast.fix_missing_locations(ast.Expression(body=lam))
        projections[name] = eval(compile(tree, f"<attn-select batch {name}>", "eval"), namespace)
    return projections


_LANES: dict[int, Literal["B", "H", "I", "Q"]] = {1: "B", 2: "H", 4: "I", 8: "Q"}
"""Bytes per request -> the ``memoryview.cast`` format reading one unsigned lane."""


def _lanes(groups: list[bytes]) -> Sequence[int] | None:
    """Per request, its bytes of ``groups`` (byte ``g`` from group ``g``) as one unsigned
    integer in native byte order; None when they need more than 8 bytes."""
    width = next((w for w in _LANES if w >= len(groups)), None)
    if width is None:
        return None
    if width == 1:
        return groups[0]
    buffer = bytearray(width * len(groups[0]))
    for group, column in enumerate(groups):
        buffer[group::width] = column
    return memoryview(buffer).cast(_LANES[width])


class _Decoder(dict[Any, int]):
    """A request's bit groups (8 appends a byte; a lane integer or a tuple of bytes) ->
    the interned id of the list those appends build."""

    def __init__(self, evaluator: BatchEvaluator, items: tuple[Any, ...]) -> None:
        super().__init__()
        self.evaluator = evaluator
        self.groups = [items[start:start + 8] for start in range(0, len(items), 8)]
        self.tables: list[dict[int, tuple[Any, ...]]] = [{} for _ in self.groups]
        width = next((w for w in _LANES if w >= len(self.groups)), 0)
        shifts = [8 * g for g in range(width)]
        self.shifts = shifts if sys.byteorder == "little" else shifts[::-1]

    def _picked(self, group: int, byte: int) -> tuple[Any, ...]:
        table = self.tables[group]
        found = table.get(byte)
        if found is None:
            items = self.groups[group]
            found = table[byte] = tuple(items[bit] for bit in range(len(items)) if byte >> bit & 1)
        return found

    def __missing__(self, key: int | tuple[int, ...]) -> int:
        groups = key if isinstance(key, tuple) else tuple(
            key >> shift & 255 for shift in self.shifts)[:len(self.groups)]
        chosen: tuple[Any, ...] = ()
        for group, byte in enumerate(groups):
            if byte:
                chosen += self._picked(group, byte)
        found = self[key] = self.evaluator._intern(chosen)
        return found


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (a batch allocates many small acyclic objects
    that survive it, which would trigger full collections midway)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class BatchEvaluator:
    """One compiled evaluator applied to batches; remembers value classes, reason lists
    and outcomes across batches (a sweep streams its input through one of these)."""

    def __init__(self, compiled: CompiledEngine, memo_limit: int = 200_000) -> None:
        self.compiled = compiled
        self.program = Program(compiled.source, compiled.evaluate.__globals__, compiled.input_names)
        self._projections = _projections(compiled)
        self._classes: dict[str, dict[Any, int]] = {name: {} for name in self._projections}
        self._signatures: dict[str, dict[tuple[Any, ...], int]] = {name: {} for name in self._projections}
        self._representatives: dict[str, list[Any]] = {name: [] for name in self._projections}
        self._backends = tuple(self.program.result_lists.items())
        self._interned: dict[tuple[Any, ...], int] = {}
        self._lists: list[Any] = []
        self._outcomes: dict[Any, tuple[SelectionOutcome, tuple[str, str] | None]] = {}
        """(list ids) or (list ids, explicitly requested backend) -> the outcome, and for a
        "No valid backend" error its reasons part (the rest quotes the request)."""
        self._decoders: dict[tuple[Any, ...], _Decoder] = {}
        self._memo_limit = memo_limit

    # -- input classes -----------------------------------------------------------------

    def _class_of(self, name: str, value: Any) -> int:
        """The class id of one (exactly typed, hashable) value of input ``name``."""
        try:
            results = self._projections[name](value)
            signature: tuple[Any, ...] = tuple((type(r), r) for r in results)
            if not all(type(r) in _EXACT_TYPES for r in results):
                signature = ("value", type(value), value)
        except Exception:  # the evaluator raises on it: keep the value apart
            signature = ("value", type(value), value)
        ids = self._signatures[name]
        found = ids.get(signature)
        if found is None:
            found = ids[signature] = len(ids)
            self._representatives[name].append(value)
        return found

    def _shared_column(self, name: str, value: Any, count: int) -> Column:
        """:meth:`_input_column` of a column holding ``value`` (exactly typed) ``count`` times."""
        classes = self._classes[name]
        class_id = classes.get(value)
        if class_id is None:
            class_id = classes[value] = self._class_of(name, value)
        return Column(bytes(count), [self._representatives[name][class_id]])

    def _input_column(self, name: str, column: Sequence[Any]) -> tuple[Column, int]:
        """The column of input ``name`` over its classes (each class by one representative
        value), and the mask of requests whose value is not exactly typed (evaluated alone)."""
        types = set(map(type, column))
        odd = 0
        if not types <= _EXACT_TYPES:
            odd = int.from_bytes(bytes(type(v) not in _EXACT_TYPES for v in column), "little")
            column = [v if type(v) in _EXACT_TYPES else None for v in column]
        keys: Sequence[Any] = list(zip(map(type, column), column, strict=True)) if len(types) > 1 else column
        classes = self._classes[name]
        local: dict[int, int] = {}
        codes: dict[Any, int] = {}
        for key in dict.fromkeys(keys):
            class_id = classes.get(key)
            if class_id is None:
                class_id = classes[key] = self._class_of(name, key[1] if len(types) > 1 else key)
            codes[key] = local.setdefault(class_id, len(local))
        if len(local) > 256:
            raise Unsupported(f"{name}: more than 256 classes in one batch")
        representatives = self._representatives[name]
        values = [representatives[c] for c in local]
        if len(local) == 1:  # one class (often one value) in the whole batch
            return Column(bytes(len(column)), values), odd
        return Column(bytes(map(codes.__getitem__, keys)), values), odd

    # -- the column-wise run -----------------------------------------------------------

    def _intern(self, reasons: tuple[Any, ...]) -> int:
        found = self._interned.get(reasons)
        if found is None:
            found = self._interned[reasons] = len(self._lists)
            self._lists.append(list(reasons))
        return found

    def _list_ids(self, run: Run, entries: list[tuple[int, Value]]) -> list[int]:
        """Per request, the interned id of the list that ``entries`` (masked appends) build."""
        flat: list[tuple[int, Any]] = []
        for mask, value in entries:
            if mask == 0:
                continue
            if isinstance(value, Const):
                flat.append((mask, value.value))
                continue
            for code, item in enumerate(value.values):
                part = mask & run.equals(value, code)
                if part:
                    flat.append((part, item))
        if not flat:
            return [self._intern(())] * run.count
        groups = []
        for start in range(0, len(flat), 8):
            code = 0
            for bit, (mask, _) in enumerate(flat[start:start + 8]):
                code |= mask << bit
            groups.append(code.to_bytes(run.count, "little"))
        items = tuple(item for _, item in flat)
        try:
            decoder = self._decoders.get(items)
        except TypeError:  # an item that cannot be a key: decode for this batch only
            decoder = _Decoder(self, items)
        if decoder is None:
            decoder = self._decoders[items] = _Decoder(self, items)
        lanes = _lanes(groups)
        keys: Any = zip(*groups, strict=True) if lanes is None else lanes
        return list(map(decoder.__getitem__, keys))

    def _columnwise(self, facts: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[int, ...]], int]:
        """Per request, the ids of its backends' reason lists and of its priority list,
        and the mask of requests to evaluate alone."""
        if not self.program.supported:
            raise Unsupported("the evaluator is not of the generated subset")
        count = len(facts)
        odd = 0
        inputs: dict[str, Value] = {}
        given = facts.columns if isinstance(facts, RequestColumns) else None
        shared = facts.shared if isinstance(facts, RequestColumns) else {}
        names = []
        for name in self._projections:
            value = shared.get(name, shared)  # (``shared`` itself: not shared)
            if value is shared or type(value) not in _EXACT_TYPES:
                names.append(name)
            else:
                inputs[name] = self._shared_column(name, value, count)
        table: Iterable[Sequence[Any]]
        if given is not None:  # already column-wise
            table = [given[n] if n in given else [shared[n]] * count for n in names]
        elif len(names) > 1:
            table = zip(*map(itemgetter(*names), facts), strict=True)
        else:
            table = [[f[name] for f in facts] for name in names]
        for name, values in zip(names, table, strict=True):
            column, unusual = self._input_column(name, values)
            inputs[name] = column
            odd |= unusual
        for name in self.program.input_of.values():
            inputs.setdefault(name, Const(ERROR))  # read by nothing (a read would poison)
        run = Run(self.program, count, inputs)
        run.execute(self.program.body, run.ones)
        columns = [self._list_ids(run, run.lists[variable]) for variable, _ in self._backends]
        columns.append(self._list_ids(run, run.lists["order"]))
        return list(zip(*columns, strict=True)), odd | run.poisoned

    # -- the batch ---------------------------------------------------------------------

    @property
    def backends(self) -> tuple[str, ...]:
        """The evaluated backends, in the order of :meth:`evaluate_keyed`'s keys."""
        return tuple(name for _, name in self._backends)

    def reasons_list(self, list_id: int) -> list[Any]:
        """The reason list (or priority list) of an id in :meth:`evaluate_keyed`'s keys."""
        return self._lists[list_id]  # type: ignore[no-any-return]

    def evaluate(self, facts: Sequence[Mapping[str, Any]],
                 forced: Sequence[str | None] | None = None) -> list[SelectionOutcome]:
        """:func:`selector.solver.select` of each request (``forced``: the explicitly
        requested backend of each, default none).  Requests with the same reason lists
        share them and their outcome (treat them as read-only); ``derived`` is empty."""
        return self.evaluate_keyed(facts, forced)[0]

    def evaluate_keyed(self, facts: Sequence[Mapping[str, Any]],
                       forced: Sequence[str | None] | None = None,
                       ) -> tuple[list[SelectionOutcome], list[tuple[int, ...] | None]]:
        """:meth:`evaluate`, and per request the ids of its reason lists (one per backend of
        :attr:`backends`, then the priority list; see :meth:`reasons_list`), or None for a
        request evaluated alone."""
        wanted: list[str | None] = list(forced) if forced is not None else [None] * len(facts)
        outcomes: list[SelectionOutcome] = []
        keys: list[tuple[int, ...] | None] = []
        with collection_paused():
            self._evaluate(facts, wanted, outcomes, keys)
        return outcomes, keys

    def _evaluate(self, facts: Sequence[Mapping[str, Any]], wanted: list[str | None],
                  results: list[SelectionOutcome], keyed: list[tuple[int, ...] | None]) -> None:
        count = len(facts)
        if not count:
            return
        compiled = self.compiled
        try:
            keys, alone = self._columnwise(facts)
        except (Unsupported, KeyError):
            if count <= _SMALLEST_SPLIT:
                results.extend(select(compiled, f, b) for f, b in zip(facts, wanted, strict=True))
                keyed.extend([None] * count)
                return
            half = count // 2  # fewer distinct values per half
            self._evaluate(facts[:half], wanted[:half], results, keyed)
            self._evaluate(facts[half:], wanted[half:], results, keyed)
            return
        engine = compiled.engine
        outcomes = self._outcomes
        known_outcome = outcomes.get
        lists = self._lists
        names = self.backends
        append = results.append
        single: Iterable[int] = alone.to_bytes(count, "little") if alone else repeat(0, count)
        request: Callable[[int], Mapping[str, Any]] = (
            facts.row if isinstance(facts, RequestColumns) else facts.__getitem__)
        start = len(keyed)
        keyed.extend(keys)
        for index, (backend, key, by_itself) in enumerate(zip(wanted, keys, single, strict=True)):
            if by_itself:  # evaluated alone, the per-request way
                append(select(compiled, request(index), backend))
                keyed[start + index] = None
                continue
            memo_key: Any = key if backend is None else (key, backend)
            known = known_outcome(memo_key)
            if known is None:
                reasons = dict(zip(names, map(lists.__getitem__, key), strict=False))
                outcome = decide(engine, reasons, lists[key[-1]], {}, request(index), backend)
                if len(outcomes) < self._memo_limit:
                    quoted = None
                    if _quotes_request(outcome, backend):
                        invalid = [(n, reasons[n]) for n in outcome.order]
                        quoted = (no_valid_reasons(engine, invalid), no_valid_hint(engine, invalid))
                    outcomes[memo_key] = (outcome, quoted)
                append(outcome)
                continue
            outcome, quoted = known
            if quoted is not None:  # the text quotes the request's own values: rebuilt for it
                outcome = SelectionOutcome(outcome.reasons, outcome.order, outcome.derived, None,
                                           no_valid_message(engine, request(index), *quoted))
            append(outcome)


_EVALUATORS: dict[tuple[str, str, tuple[str, ...] | None], BatchEvaluator] = {}


def evaluator_for(engine: EngineData, backends: tuple[str, ...] | None = None, *,
                  catalog: Catalog) -> BatchEvaluator:
    """The (per-process) batch evaluator of a profile of ``catalog``, all backends or
    ``backends``."""
    key = (engine.engine, engine.platform, backends)
    evaluator = _EVALUATORS.get(key)
    if evaluator is None:
        evaluator = _EVALUATORS[key] = BatchEvaluator(
            compiled_for(engine, backends, catalog=catalog))
    return evaluator


def evaluate_batch(engine: EngineData, facts: Sequence[Mapping[str, Any]],
                   forced: Sequence[str | None] | None = None,
                   backends: tuple[str, ...] | None = None, *,
                   catalog: Catalog) -> list[SelectionOutcome]:
    """:func:`selector.solver.select` for every request of ``facts`` at once (``forced``:
    each request's explicitly requested backend or None; ``backends``: the backends to
    evaluate, all of the profile's by default)."""
    return evaluator_for(engine, backends, catalog=catalog).evaluate(facts, forced)
