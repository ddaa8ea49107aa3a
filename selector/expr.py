"""The condition language of the capability data.

Every conditional fact in ``schemas/`` (a backend's head sizes, a combination
rule, a FlashAttention version step, a priority-list branch) is a short
expression over named request facts, for example::

    has_sink and cc < 90
    head_size % 8 == 0 and (head_size <= 256 or (head_size <= 512 and fa4_supported))
    kv_cache_dtype in ['fp8', 'fp8_e4m3'] and cc_major == 9

Grammar (lowest to highest precedence)::

    expr    := or_expr ('if' or_expr 'else' expr)?
    or_expr := and_expr ('or' and_expr)*                 -> any(...)
    and_expr:= not_expr ('and' not_expr)*                -> all(...)
    not_expr:= 'not' not_expr | compare                  -> not(...)
    compare := arith (('=='|'!='|'<'|'<='|'>'|'>='|'in'|'not in') arith)?
    arith   := term (('+'|'-') term)*
    term    := unary (('*'|'//'|'%') unary)*
    unary   := '-' unary | atom
    atom    := INT | STRING | 'true' | 'false' | 'null' | NAME | '[' items ']' | '(' expr ')'

The parser is a small recursive-descent parser: nothing is ever passed to
Python's ``eval`` as written by the data author.  A parsed expression can be
evaluated directly (used by ``explain``) or compiled to Python source (used by
the solver's hot path); both give the same answer, which a test checks.
``null`` compares equal only to ``null``; ordering comparisons and arithmetic
with ``null`` are false / ``null`` instead of raising.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Union

__all__ = [
    "BinOp",
    "BoolOp",
    "Compare",
    "Conditional",
    "Expr",
    "ExprSyntaxError",
    "ListLit",
    "Literal",
    "Name",
    "Not",
    "Value",
    "evaluate",
    "is_boolean",
    "may_be_null",
    "names_in",
    "parse",
    "render",
    "to_python",
]

Value = Union[int, float, str, bool, None, tuple["Value", ...]]


class ExprSyntaxError(ValueError):
    """An expression in a data file does not parse."""


@dataclass(frozen=True)
class Literal:
    value: Value


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class ListLit:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Compare:
    op: str  # == != < <= > >= in "not in"
    left: Expr
    right: Expr


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * // %
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Conditional:
    condition: Expr
    then: Expr
    otherwise: Expr


Expr = Union[Literal, Name, ListLit, Not, BoolOp, Compare, BinOp, Conditional]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<int>\d+)
      | (?P<str>'[^']*'|"[^"]*")
      | (?P<op>==|!=|<=|>=|//|[<>%+\-*()\[\],])
      | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null", "if", "else"}


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ExprSyntaxError(f"unexpected character at {pos}: {text[pos:pos + 10]!r}")
        pos = match.end()
        kind = match.lastgroup
        assert kind is not None
        value = match.group(kind)
        if kind == "name" and value in _KEYWORDS:
            kind = "kw"
        tokens.append((kind, value))
    tokens.append(("end", ""))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos]

    def take(self) -> tuple[str, str]:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def accept(self, value: str) -> bool:
        if self.peek()[1] == value and self.peek()[0] in ("op", "kw"):
            self.pos += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.accept(value):
            raise ExprSyntaxError(f"expected {value!r} but found {self.peek()[1]!r} in {self.text!r}")

    def parse(self) -> Expr:
        expr = self.expr()
        if self.peek()[0] != "end":
            raise ExprSyntaxError(f"unexpected {self.peek()[1]!r} in {self.text!r}")
        return expr

    def expr(self) -> Expr:
        value = self.or_expr()
        if self.accept("if"):
            condition = self.or_expr()
            self.expect("else")
            otherwise = self.expr()
            return Conditional(condition, value, otherwise)
        return value

    def or_expr(self) -> Expr:
        operands = [self.and_expr()]
        while self.accept("or"):
            operands.append(self.and_expr())
        return operands[0] if len(operands) == 1 else BoolOp("or", tuple(operands))

    def and_expr(self) -> Expr:
        operands = [self.not_expr()]
        while self.accept("and"):
            operands.append(self.not_expr())
        return operands[0] if len(operands) == 1 else BoolOp("and", tuple(operands))

    def not_expr(self) -> Expr:
        if self.peek() == ("kw", "not"):
            self.take()
            return Not(self.not_expr())
        return self.compare()

    def compare(self) -> Expr:
        left = self.arith()
        kind, value = self.peek()
        if kind == "op" and value in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return Compare(value, left, self.arith())
        if (kind, value) == ("kw", "in"):
            self.take()
            return Compare("in", left, self.arith())
        if (kind, value) == ("kw", "not") and self.tokens[self.pos + 1] == ("kw", "in"):
            self.pos += 2
            return Compare("not in", left, self.arith())
        return left

    def arith(self) -> Expr:
        left = self.term()
        while self.peek()[0] == "op" and self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            left = BinOp(op, left, self.term())
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self.peek()[0] == "op" and self.peek()[1] in ("*", "//", "%"):
            op = self.take()[1]
            left = BinOp(op, left, self.unary())
        return left

    def unary(self) -> Expr:
        if self.accept("-"):
            operand = self.unary()
            if isinstance(operand, Literal) and isinstance(operand.value, int):
                return Literal(-operand.value)
            return BinOp("-", Literal(0), operand)
        return self.atom()

    def atom(self) -> Expr:
        kind, value = self.take()
        if kind == "int":
            return Literal(int(value))
        if kind == "str":
            return Literal(value[1:-1])
        if kind == "kw" and value in ("true", "false", "null"):
            return Literal({"true": True, "false": False, "null": None}[value])
        if kind == "name":
            return Name(value)
        if (kind, value) == ("op", "("):
            inner = self.expr()
            self.expect(")")
            return inner
        if (kind, value) == ("op", "["):
            items: list[Expr] = []
            if not self.accept("]"):
                items.append(self.expr())
                while self.accept(","):
                    items.append(self.expr())
                self.expect("]")
            return ListLit(tuple(items))
        raise ExprSyntaxError(f"unexpected {value or 'end of text'!r} in {self.text!r}")


def parse(text: str | bool) -> Expr:
    """Parse an expression (``True``/``False`` are accepted as constants)."""
    if isinstance(text, bool):
        return Literal(text)
    return _Parser(text).parse()


def names_in(expr: Expr) -> set[str]:
    """Every name an expression reads."""
    if isinstance(expr, Name):
        return {expr.name}
    if isinstance(expr, Literal):
        return set()
    if isinstance(expr, ListLit):
        return set().union(*(names_in(i) for i in expr.items)) if expr.items else set()
    if isinstance(expr, Not):
        return names_in(expr.operand)
    if isinstance(expr, BoolOp):
        return set().union(*(names_in(o) for o in expr.operands))
    if isinstance(expr, (Compare, BinOp)):
        return names_in(expr.left) | names_in(expr.right)
    return names_in(expr.condition) | names_in(expr.then) | names_in(expr.otherwise)


# --------------------------------------------------------------------------- evaluation


def _ordered(op: str, left: Value, right: Value) -> bool:
    if left is None or right is None or isinstance(left, tuple) or isinstance(right, tuple):
        return False
    try:
        if op == "<":
            return left < right  # type: ignore[operator]
        if op == "<=":
            return left <= right  # type: ignore[operator]
        if op == ">":
            return left > right  # type: ignore[operator]
        return left >= right  # type: ignore[operator]
    except TypeError:
        return False


def _arith(op: str, left: Value, right: Value) -> Value:
    if not isinstance(left, int) or not isinstance(right, int):
        return None
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if right == 0:
        return None
    if op == "//":
        return left // right
    return left % right


def _member(left: Value, right: Value) -> bool:
    return isinstance(right, tuple) and left in right


def evaluate(expr: Expr, env: Mapping[str, Value]) -> Value:
    """Evaluate an expression against named facts (the slow, explaining path)."""
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Name):
        return env[expr.name]
    if isinstance(expr, ListLit):
        return tuple(evaluate(i, env) for i in expr.items)
    if isinstance(expr, Not):
        return not evaluate(expr.operand, env)
    if isinstance(expr, BoolOp):
        if expr.op == "and":
            return all(evaluate(o, env) for o in expr.operands)
        return any(evaluate(o, env) for o in expr.operands)
    if isinstance(expr, Compare):
        left = evaluate(expr.left, env)
        right = evaluate(expr.right, env)
        if expr.op == "==":
            return left == right
        if expr.op == "!=":
            return left != right
        if expr.op == "in":
            return _member(left, right)
        if expr.op == "not in":
            return not _member(left, right)
        return _ordered(expr.op, left, right)
    if isinstance(expr, BinOp):
        return _arith(expr.op, evaluate(expr.left, env), evaluate(expr.right, env))
    if evaluate(expr.condition, env):
        return evaluate(expr.then, env)
    return evaluate(expr.otherwise, env)


# --------------------------------------------------------------------------- compilation


def _is_int_literal(expr: Expr) -> bool:
    return isinstance(expr, Literal) and isinstance(expr.value, int) and not isinstance(
        expr.value, bool
    )


def may_be_null(expr: Expr, nullable: Callable[[str], bool]) -> bool:
    """Whether ``expr`` can evaluate to null (``nullable`` answers for names)."""
    if isinstance(expr, Literal):
        return expr.value is None
    if isinstance(expr, Name):
        return nullable(expr.name)
    if isinstance(expr, (ListLit, Not, BoolOp, Compare)):
        return False
    if isinstance(expr, BinOp):
        if expr.op in ("//", "%") and not (_is_int_literal(expr.right) and expr.right.value != 0):  # type: ignore[union-attr]
            return True
        return may_be_null(expr.left, nullable) or may_be_null(expr.right, nullable)
    return may_be_null(expr.then, nullable) or may_be_null(expr.otherwise, nullable)


def is_boolean(expr: Expr) -> bool:
    """Whether ``expr`` always evaluates to a bool."""
    if isinstance(expr, (Not, Compare)):
        return True
    if isinstance(expr, Literal):
        return isinstance(expr.value, bool)
    if isinstance(expr, BoolOp):
        return all(is_boolean(o) for o in expr.operands)
    if isinstance(expr, Conditional):
        return is_boolean(expr.then) and is_boolean(expr.otherwise)
    return False


def to_python(expr: Expr, name_of: Callable[[str], str],
              nullable: Callable[[str], bool] = lambda _name: True,
              constant: Callable[[object], str] | None = None) -> str:
    """Python source for ``expr``; ``name_of`` maps a fact name to a local variable.

    Null-safety: ordering comparisons and arithmetic guard against ``None``
    exactly as :func:`evaluate` does (only where ``nullable`` says a value may be
    null), so both paths agree.  ``constant`` may hoist literal sets out of the
    generated code.  Boolean operators return operand values (Python semantics);
    callers wrap a fact's value in ``bool()`` where it must be a bool.
    """

    def value(e: Expr) -> str:
        """An operand whose value (not only its truth) matters."""
        text = go(e)
        return f"bool{text}" if isinstance(e, BoolOp) else text

    def go(e: Expr) -> str:
        if isinstance(e, Literal):
            return repr(e.value)
        if isinstance(e, Name):
            return name_of(e.name)
        if isinstance(e, ListLit):
            if all(isinstance(i, Literal) for i in e.items):
                values = frozenset(i.value for i in e.items if isinstance(i, Literal))
                return constant(values) if constant else repr(values)
            return "(" + "".join(value(i) + ", " for i in e.items) + ")"
        if isinstance(e, Not):
            return f"(not {go(e.operand)})"
        if isinstance(e, BoolOp):
            return "(" + f" {e.op} ".join(go(o) for o in e.operands) + ")"
        if isinstance(e, Compare):
            left, right = value(e.left), value(e.right)
            if e.op in ("==", "!=") and (right == "None" or left == "None"):
                op = "is" if e.op == "==" else "is not"
                return f"({left} {op} {right})"
            if e.op in ("==", "!=", "in", "not in"):
                return f"({left} {e.op} {right})"
            guards = [
                f"{side} is not None"
                for side, node in ((left, e.left), (right, e.right))
                if may_be_null(node, nullable)
            ]
            body = f"{left} {e.op} {right}"
            return "(" + " and ".join([*guards, body]) + ")"
        if isinstance(e, BinOp):
            left, right = value(e.left), value(e.right)
            guards = [
                f"{side} is not None"
                for side, node in ((left, e.left), (right, e.right))
                if may_be_null(node, nullable)
            ]
            if e.op in ("//", "%") and not _is_int_literal(e.right):
                guards.append(f"{right} != 0")
            body = f"{left} {e.op} {right}"
            if not guards:
                return f"({body})"
            return f"(({body}) if {' and '.join(guards)} else None)"
        return f"({value(e.then)} if {go(e.condition)} else {value(e.otherwise)})"

    return go(expr)


def render(expr: Expr) -> str:
    """Readable text of an expression (for ``explain`` and the docs)."""

    def go(e: Expr, parent: int = 0) -> str:
        if isinstance(e, Literal):
            if e.value is None:
                return "null"
            if isinstance(e.value, bool):
                return "true" if e.value else "false"
            return repr(e.value)
        if isinstance(e, Name):
            return e.name
        if isinstance(e, ListLit):
            return "[" + ", ".join(go(i) for i in e.items) + "]"
        if isinstance(e, Not):
            return "not " + go(e.operand, 3)
        if isinstance(e, BoolOp):
            level = 1 if e.op == "or" else 2
            text = f" {e.op} ".join(go(o, level) for o in e.operands)
            return f"({text})" if parent > level else text
        if isinstance(e, Compare):
            return f"{go(e.left, 4)} {e.op} {go(e.right, 4)}"
        if isinstance(e, BinOp):
            return f"{go(e.left, 5)} {e.op} {go(e.right, 5)}"
        text = f"{go(e.then, 1)} if {go(e.condition, 1)} else {go(e.otherwise, 1)}"
        return f"({text})" if parent > 0 else text

    return go(expr)
