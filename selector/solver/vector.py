"""Run the generated evaluator over a whole batch at once, column-wise.

The compiled evaluator (:mod:`.compiled`) is straight-line Python: assignments,
``if``/``elif``, ``r.append(reason)``, ``r[:] = [reason]`` and ``order.append(name)``.
This module interprets its syntax tree over *columns* instead of values:

- a value column is dictionary-encoded: one byte per request (``codes``) indexing
  a short list of distinct values (``values``, at most 256);
- a condition is a byte-lane integer mask (byte ``i`` is 1 where request ``i``
  takes the branch), so ``and``/``or``/``not`` and branch nesting are a handful of
  big-integer operations for the whole batch;
- an expression reading one column is evaluated once per distinct value with
  Python itself, and re-encoded with ``bytes.translate``.

Python's own semantics are kept: ``and``/``or`` return operand values, a
conditional expression and an ``if`` evaluate only the taken branch (a value that
raises is carried as :data:`ERROR`, and a request whose taken path reads one is
marked *poisoned*: the caller evaluates it alone, the per-request way).
:class:`Unsupported` says the batch does not fit (a column of more than 256
distinct values, a statement outside the generated subset): the caller then falls
back to the per-request path for the whole batch.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["ERROR", "Column", "Const", "Program", "Run", "Unsupported", "Value"]


class Unsupported(Exception):
    """The batch cannot be evaluated column-wise (evaluate it request by request)."""


class _Error:
    def __repr__(self) -> str:
        return "ERROR"


ERROR: Any = _Error()
"""The value of an expression that raised for that request."""

_EXACT = frozenset({int, str, bool, type(None)})
_EQUALS = [bytes(i == j for j in range(256)) for i in range(256)]
"""Per code, the ``bytes.translate`` table that marks that code."""


def _key(value: Any) -> Any:
    """A key under which equal values behave identically (no -0.0/0.0, no 1/True merging)."""
    kind = type(value)
    if kind in _EXACT:
        return (kind, value)
    if kind is tuple and all(type(v) in _EXACT for v in value):
        return (tuple, tuple((type(v), v) for v in value))
    return (id, id(value))


class Const:
    """The same value for every request."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Column:
    """A dictionary-encoded column: ``values[codes[i]]`` is request ``i``'s value."""

    __slots__ = ("codes", "values")

    def __init__(self, codes: bytes, values: list[Any]) -> None:
        self.codes = codes
        self.values = values


Value = Column | Const
Mask = int


class Program:
    """The parsed evaluator: its statements and, per node, the locals it reads."""

    def __init__(self, source: str, namespace: Mapping[str, Any], input_names: Sequence[str]) -> None:
        function = ast.parse(source).body[0]
        assert isinstance(function, ast.FunctionDef)
        self.body = function.body
        self.namespace = namespace
        stored = {n.id for n in ast.walk(function)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.reads: dict[int, tuple[str, ...]] = {}
        self._functions: dict[tuple[int, tuple[str, ...]], Callable[..., Any]] = {}
        self._operators: dict[int, tuple[list[ast.expr], Callable[..., Any]]] = {}
        self.input_of = {"v_" + name.replace(".", "__"): name for name in input_names}
        for node in ast.walk(function):
            if isinstance(node, ast.expr):
                self.reads[id(node)] = tuple(sorted({
                    n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in stored}))
        try:
            _check_statements(function.body, set(), top=True)
            self.supported = True
        except Unsupported:  # (then every request goes the per-request way)
            self.supported = False
        returned = function.body[-1]
        if not (isinstance(returned, ast.Return) and isinstance(returned.value, ast.Tuple)
                and isinstance(returned.value.elts[0], ast.Dict)):
            raise Unsupported("the evaluator does not end in the expected return")
        self.result_lists: dict[str, str] = {}
        for key, value in zip(returned.value.elts[0].keys, returned.value.elts[0].values, strict=True):
            assert isinstance(key, ast.Constant) and isinstance(value, ast.Name)
            self.result_lists[value.id] = str(key.value)

    def operator(self, node: ast.expr) -> tuple[list[ast.expr], Callable[..., Any]]:
        """``node``'s direct operands and ``node`` as a function of their values."""
        found = self._operators.get(id(node))
        if found is None:
            operands: list[ast.expr] = []

            def hole(child: ast.expr) -> ast.expr:
                operands.append(child)
                return ast.Name(id=f"_arg{len(operands) - 1}", ctx=ast.Load())

            shell = copy.copy(node)
            for field, old in ast.iter_fields(node):
                if isinstance(old, ast.expr):
                    setattr(shell, field, hole(old))
                elif isinstance(old, list):
                    setattr(shell, field, [
                        hole(x) if isinstance(x, ast.expr)
                        else ast.keyword(arg=x.arg, value=hole(x.value)) if isinstance(x, ast.keyword)
                        else x for x in old])
            arguments = ast.arguments(posonlyargs=[], kwonlyargs=[], kw_defaults=[], defaults=[],
                                      args=[ast.arg(arg=f"_arg{i}") for i in range(len(operands))])
            tree = ast.fix_missing_locations(ast.Expression(body=ast.Lambda(args=arguments, body=shell)))
            found = (operands, eval(compile(tree, "<attn-select column>", "eval"), dict(self.namespace)))
            self._operators[id(node)] = found
        return found

    def function(self, node: ast.expr, names: tuple[str, ...]) -> Callable[..., Any]:
        """``node`` as a function of the locals ``names`` (compiled once)."""
        key = (id(node), names)
        found = self._functions.get(key)
        if found is None:
            arguments = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names],
                                      kwonlyargs=[], kw_defaults=[], defaults=[])
            tree = ast.fix_missing_locations(ast.Expression(body=ast.Lambda(args=arguments, body=node)))
            found = eval(compile(tree, "<attn-select column>", "eval"), dict(self.namespace))
            self._functions[key] = found
        return found


class Run:
    """One batch of ``count`` requests through a :class:`Program`."""

    def __init__(self, program: Program, count: int, inputs: Mapping[str, Value]) -> None:
        self.program = program
        self.count = count
        self.ones = int.from_bytes(b"\x01" * count, "little")
        self.fill = self.ones * 255
        self.env: dict[str, Value] = {}
        self.inputs = inputs
        self.poisoned: Mask = 0
        self.lists: dict[str, list[tuple[Mask, Value]]] = {}
        self._masks: dict[tuple[int, bytes], tuple[bytes, Mask]] = {}

    # -- masks -------------------------------------------------------------------------

    def _mask_of(self, codes: bytes, table: bytes) -> Mask:
        """Where ``table`` maps the code to 1 (conditions repeat across backends: each
        distinct one is computed once per batch)."""
        key = (id(codes), table)
        known = self._masks.get(key)
        if known is not None and known[0] is codes:  # (the same object, not a reused id)
            return known[1]
        mask = int.from_bytes(codes.translate(table), "little")
        self._masks[key] = (codes, mask)
        return mask

    def truth(self, value: Value) -> tuple[Mask, Mask]:
        """(where truthy, where ERROR)."""
        if isinstance(value, Const):
            if value.value is ERROR:
                return 0, self.ones
            return (self.ones if value.value else 0), 0
        values = value.values
        errors = 0
        if ERROR in values:
            table = bytes([1 if (v is not ERROR and v) else 0 for v in values]).ljust(256, b"\0")
            errors = self._mask_of(value.codes, bytes([v is ERROR for v in values]).ljust(256, b"\0"))
        else:
            table = bytes([1 if v else 0 for v in values]).ljust(256, b"\0")
        return self._mask_of(value.codes, table), errors

    def equals(self, column: Column, index: int) -> Mask:
        return self._mask_of(column.codes, _EQUALS[index])

    # -- columns -----------------------------------------------------------------------

    def column(self, value: Value) -> Column:
        if isinstance(value, Column):
            return value
        return Column(bytes(self.count), [value.value])

    def where(self, mask: Mask, then: Value, otherwise: Value) -> Value:
        """``then`` where ``mask``, else ``otherwise``."""
        if mask == 0:
            return otherwise
        if mask == self.ones:
            return then
        a, b = self.column(then), self.column(otherwise)
        values: list[Any] = []
        index: dict[Any, int] = {}
        tables = []
        for side in (a, b):
            table = bytearray(256)
            for code, value in enumerate(side.values):
                key = _key(value)
                position = index.get(key)
                if position is None:
                    position = index[key] = len(values)
                    values.append(value)
                table[code] = position
            tables.append(bytes(table))
        if len(values) > 256:
            raise Unsupported("more than 256 distinct values")
        picked = mask * 255
        merged = ((int.from_bytes(a.codes.translate(tables[0]), "little") & picked)
                  | (int.from_bytes(b.codes.translate(tables[1]), "little") & (self.fill ^ picked)))
        return Column(merged.to_bytes(self.count, "little"), values)

    def compact(self, codes: bytes, values: list[Any]) -> Column:
        """The column ``values[codes[i]]`` with equal values merged (keeps value lists short)."""
        index: dict[Any, int] = {}
        kept: list[Any] = []
        table = bytearray(range(256))
        for code, value in enumerate(values):
            key = _key(value)
            position = index.get(key)
            if position is None:
                position = index[key] = len(kept)
                kept.append(value)
            table[code] = position
        if len(kept) == len(values):
            return Column(codes, values)
        return Column(codes.translate(table), kept)

    def from_mask(self, mask: Mask, errors: Mask) -> Value:
        result: Value = Column(mask.to_bytes(self.count, "little"), [False, True])
        if errors:
            result = self.where(errors, Const(ERROR), result)
        return result

    def joint(self, parts: list[Value], active: Mask) -> tuple[bytes, list[tuple[Any, ...]]]:
        """One column of the tuples of ``parts`` (their product where it fits a byte; else
        the combinations that occur where ``active``, ERROR elsewhere)."""
        codes: int = 0
        size = 1
        combos: list[tuple[Any, ...]] = [()]
        for part in parts:
            column = self.column(part)
            width = len(column.values)
            if size * width > 256:
                return self._zip_joint(parts, active)
            codes = codes * width + int.from_bytes(column.codes, "little")
            combos = [(*c, v) for c in combos for v in column.values]
            size *= width
        return codes.to_bytes(self.count, "little"), combos

    def _zip_joint(self, parts: list[Value], active: Mask) -> tuple[bytes, list[tuple[Any, ...]]]:
        columns = [self.column(p) for p in parts]
        index: dict[tuple[int, ...] | None, int] = {}
        keys: list[tuple[int, ...] | None] = list(zip(*(c.codes for c in columns), strict=True))
        if active != self.ones:
            keys = [k if a else None for k, a in zip(keys, active.to_bytes(self.count, "little"),
                                                        strict=True)]
        for key in dict.fromkeys(keys):
            index[key] = len(index)
        if len(index) > 256:
            raise Unsupported("more than 256 distinct value combinations")
        codes = bytes(map(index.__getitem__, keys))
        combos = [(ERROR,) if key is None else tuple(c.values[i] for c, i in zip(columns, key, strict=True))
                  for key in index]
        return codes, combos

    # -- expressions -------------------------------------------------------------------

    def _apply(self, function: Callable[..., Any], arguments: tuple[Any, ...]) -> Any:
        if any(a is ERROR for a in arguments):
            return ERROR
        try:
            return function(*arguments)
        except Exception:
            return ERROR

    def value(self, node: ast.expr, active: Mask = -1) -> Value:
        """``node``'s value column (only rows in ``active`` need a meaningful value)."""
        names = self.program.reads[id(node)]
        env = self.env
        bound = [env[n] for n in names]
        columns = [i for i, v in enumerate(bound) if isinstance(v, Column)]
        if len(columns) <= 1:
            function = self.program.function(node, names)
            consts = [v.value if isinstance(v, Const) else None for v in bound]
            if not columns:
                return Const(self._apply(function, tuple(consts)))
            (position,) = columns
            column = bound[position]
            assert isinstance(column, Column)
            results = []
            for value in column.values:
                consts[position] = value
                results.append(self._apply(function, tuple(consts)))
            return self.compact(column.codes, results)
        if isinstance(node, ast.BoolOp):
            result = self.value(node.values[0], active)
            for operand in node.values[1:]:
                truthy, errors = self.truth(result)
                taken = (truthy if isinstance(node.op, ast.And) else self.ones ^ truthy) & ~errors
                result = self.where(taken, self.value(operand, active & taken), result)
            return result
        if isinstance(node, ast.IfExp):
            truthy, errors = self.truth(self.value(node.test, active))
            result = self.where(truthy, self.value(node.body, active & truthy),
                                self.value(node.orelse, active & (self.ones ^ truthy)))
            return self.where(errors, Const(ERROR), result) if errors else result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            truthy, errors = self.truth(self.value(node.operand, active))
            return self.from_mask(self.ones ^ truthy, errors)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool"
                and len(node.args) == 1 and not node.keywords):
            return self.from_mask(*self.condition(node.args[0], active))
        return self._generic(node, active)

    def _generic(self, node: ast.expr, active: Mask) -> Value:
        """A node over several columns: its direct operands evaluated column-wise, then
        the node itself once per distinct combination of their values."""
        operands, function = self.program.operator(node)
        codes, combos = self.joint([self.value(o, active) for o in operands], active & self.ones)
        return self.compact(codes, [self._apply(function, combo) for combo in combos])

    def condition(self, node: ast.expr, active: Mask = -1) -> tuple[Mask, Mask]:
        """(where ``node`` is truthy, where evaluating it raised); only rows in ``active``
        need a meaningful answer."""
        if len(self.program.reads[id(node)]) > 1:
            if isinstance(node, ast.BoolOp):
                truthy, errors = self.condition(node.values[0], active)
                conjunction = isinstance(node.op, ast.And)
                for operand in node.values[1:]:
                    reached = (truthy if conjunction else self.ones ^ truthy) & ~errors
                    more, more_errors = self.condition(operand, active & reached)
                    errors |= reached & more_errors
                    truthy = (truthy & more) if conjunction else (truthy | (reached & more))
                return truthy & ~errors, errors
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                truthy, errors = self.condition(node.operand, active)
                return self.ones ^ truthy, errors
            if isinstance(node, ast.IfExp):
                test, errors = self.condition(node.test, active)
                rest = self.ones ^ test
                then, then_errors = self.condition(node.body, active & test)
                otherwise, otherwise_errors = self.condition(node.orelse, active & rest)
                return ((test & then) | (rest & otherwise),
                        errors | (test & then_errors) | (rest & otherwise_errors))
        return self.truth(self.value(node, active))

    # -- statements --------------------------------------------------------------------

    def execute(self, statements: Sequence[ast.stmt], active: Mask) -> None:
        for statement in statements:
            if active == 0:
                return
            self._statement(statement, active)

    def _statement(self, statement: ast.stmt, active: Mask) -> None:
        program = self.program
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                name = target.id
                if name in program.input_of:
                    self.env[name] = self.inputs[program.input_of[name]]
                    return
                if isinstance(statement.value, ast.List) and not statement.value.elts:
                    if active != self.ones:
                        raise Unsupported("a list created under a condition")
                    self.lists[name] = []
                    self.env[name] = Const(None)
                    return
                value = self.value(statement.value, active)
                self._poison(active, value)
                if active == self.ones:
                    self.env[name] = value
                elif name in self.env:
                    self.env[name] = self.where(active, value, self.env[name])
                else:
                    raise Unsupported(f"{name} assigned under a condition first")
                return
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    and isinstance(target.slice, ast.Slice) and isinstance(statement.value, ast.List)
                    and target.value.id in self.lists):
                entries = self.lists[target.value.id]
                keep = self.ones ^ active
                entries[:] = [(mask & keep, value) for mask, value in entries]
                for element in statement.value.elts:
                    self._append(entries, element, active)
                return
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if (isinstance(call.func, ast.Attribute) and call.func.attr == "append"
                    and isinstance(call.func.value, ast.Name) and call.func.value.id in self.lists
                    and len(call.args) == 1):
                self._append(self.lists[call.func.value.id], call.args[0], active)
                return
        if isinstance(statement, ast.If):
            truthy, errors = self.condition(statement.test, active)
            self.poisoned |= active & errors
            self.execute(statement.body, active & truthy)
            self.execute(statement.orelse, active & (self.ones ^ truthy) & ~errors)
            return
        if isinstance(statement, (ast.Pass, ast.Return)):
            return
        raise Unsupported(ast.dump(statement)[:80])

    def _append(self, entries: list[tuple[Mask, Value]], node: ast.expr, active: Mask) -> None:
        value = self.value(node, active)
        self._poison(active, value)
        entries.append((active, value))

    def _poison(self, active: Mask, value: Value) -> None:
        self.poisoned |= active & self.truth(value)[1]


def _check_statements(statements: Sequence[ast.stmt], defined: set[str], *, top: bool) -> None:
    """Raise :class:`Unsupported` unless every statement is of the generated subset that
    :meth:`Run.execute` runs (checked once, not found out midway through a batch)."""
    for statement in statements:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                if isinstance(statement.value, ast.List) and not statement.value.elts and not top:
                    raise Unsupported("a list created under a condition")
                if not top and target.id not in defined:
                    raise Unsupported(f"{target.id} assigned under a condition first")
                defined.add(target.id)
                continue
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    and isinstance(target.slice, ast.Slice) and isinstance(statement.value, ast.List)):
                continue
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if (isinstance(call.func, ast.Attribute) and call.func.attr == "append"
                    and isinstance(call.func.value, ast.Name) and len(call.args) == 1):
                continue
        elif isinstance(statement, ast.If):
            _check_statements(statement.body, defined, top=False)
            _check_statements(statement.orelse, defined, top=False)
            continue
        elif isinstance(statement, (ast.Pass, ast.Return)):
            continue
        raise Unsupported(ast.dump(statement)[:80])
