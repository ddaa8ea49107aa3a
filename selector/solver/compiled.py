"""Compile an engine profile's data into one Python function (the hot path).

The generated function takes the request facts as a dict and returns, for every
backend of the profile, its reasons as ``(code, message)`` pairs in vLLM's
order, plus the priority list and the derived facts.  It is generated from the
parsed conditions only (:func:`selector.expr.to_python`), never from text the
data author wrote, and it is checked against the interpreter in the tests.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from selector import expr as E
from selector.catalog import Catalog, EngineData
from selector.schema.backend import BackendSpec, BlockSizeVariant
from selector.schema.engine import PriorityEntry
from selector.schema.types import MultipleOf

__all__ = [
    "CompiledEngine",
    "Reason",
    "capability_expressions",
    "compile_engine",
]

Reason = tuple[str, str]
"""(code, message)."""


def _parse(value: object) -> E.Expr:
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return E.Literal(value)
    assert isinstance(value, str)
    return E.parse(value)


def _membership(name: str, values: tuple[Any, ...] | None) -> E.Expr:
    if not values:
        return E.Literal(True)
    return E.Compare("in", E.Name(name), E.ListLit(tuple(E.Literal(v) for v in values)))


def _and(*parts: E.Expr) -> E.Expr:
    kept = [p for p in parts if p != E.Literal(True)]
    if not kept:
        return E.Literal(True)
    if len(kept) == 1:
        return kept[0]
    return E.BoolOp("and", tuple(kept))


def _sizes_accept(sizes: tuple[int | MultipleOf, ...], exact: bool = False) -> E.Expr:
    """``supports_block_size``: any declared base divides the block size."""
    if not sizes:
        return E.Literal(True)
    if exact:
        return _membership("block_size", tuple(s for s in sizes if isinstance(s, int)))
    bases = sorted({s.multiple_of if isinstance(s, MultipleOf) else s for s in sizes})
    if 1 in bases:
        return E.Literal(True)
    tests = tuple(
        E.Compare("==", E.BinOp("%", E.Name("block_size"), E.Literal(b)), E.Literal(0))
        for b in bases
    )
    return tests[0] if len(tests) == 1 else E.BoolOp("or", tests)


def _block_size_expr(variants: tuple[BlockSizeVariant, ...]) -> E.Expr:
    result: E.Expr = E.Literal(True)
    for variant in reversed(variants):
        accept = _sizes_accept(variant.sizes, variant.exact)
        result = accept if variant.when is True else E.Conditional(_parse(variant.when), accept, result)
    return E.BoolOp(
        "or", (E.Compare("==", E.Name("block_size"), E.Literal(None)), result)
    )


def capability_expressions(spec: BackendSpec) -> dict[str, E.Expr]:
    """The backend's answer to each ``cap.<name>`` a check reads."""
    caps: dict[str, E.Expr] = {
        "cap.head_size": _and(_membership("head_size", spec.head_sizes), _parse(spec.head_size_condition)),
        "cap.dtype": _membership("dtype", spec.dtypes),
        "cap.kv_cache_dtype": _and(
            E.BoolOp(
                "or",
                (
                    E.Compare("==", E.Name("kv_cache_dtype"), E.Literal(None)),
                    _membership("kv_cache_dtype", spec.kv_cache_dtypes),
                ),
            )
            if spec.kv_cache_dtypes
            else E.Literal(True),
            _parse(spec.kv_cache_dtype_condition),
        ),
        "cap.block_size": _block_size_expr(spec.kernel_block_sizes),
        "cap.compute_capability": _parse(spec.compute_capability),
        "cap.attn_type": _membership("attn_type", spec.attn_types),
    }
    for feature, value in spec.features.model_dump().items():
        caps[f"cap.{feature}"] = _parse(value)
    return caps


def _substitute(expr: E.Expr, caps: Mapping[str, E.Expr]) -> E.Expr:
    if isinstance(expr, E.Name):
        return caps.get(expr.name, expr)
    if isinstance(expr, E.Literal):
        return expr
    if isinstance(expr, E.ListLit):
        return E.ListLit(tuple(_substitute(i, caps) for i in expr.items))
    if isinstance(expr, E.Not):
        return E.Not(_substitute(expr.operand, caps))
    if isinstance(expr, E.BoolOp):
        return E.BoolOp(expr.op, tuple(_substitute(o, caps) for o in expr.operands))
    if isinstance(expr, E.Compare):
        return E.Compare(expr.op, _substitute(expr.left, caps), _substitute(expr.right, caps))
    if isinstance(expr, E.BinOp):
        return E.BinOp(expr.op, _substitute(expr.left, caps), _substitute(expr.right, caps))
    return E.Conditional(
        _substitute(expr.condition, caps),
        _substitute(expr.then, caps),
        _substitute(expr.otherwise, caps),
    )


def _fold(expr: E.Expr) -> E.Expr:
    """Constant-fold boolean structure (e.g. ``has_sink and not True``)."""
    if isinstance(expr, E.Not):
        inner = _fold(expr.operand)
        if isinstance(inner, E.Literal) and isinstance(inner.value, bool):
            return E.Literal(not inner.value)
        return E.Not(inner)
    if isinstance(expr, E.BoolOp):
        parts = [_fold(o) for o in expr.operands]
        absorbing = expr.op == "or"
        kept: list[E.Expr] = []
        for part in parts:
            if isinstance(part, E.Literal) and isinstance(part.value, bool):
                if part.value == absorbing:
                    return E.Literal(absorbing)
                continue
            kept.append(part)
        if not kept:
            return E.Literal(not absorbing)
        return kept[0] if len(kept) == 1 else E.BoolOp(expr.op, tuple(kept))
    if isinstance(expr, E.Conditional):
        condition = _fold(expr.condition)
        if isinstance(condition, E.Literal) and isinstance(condition.value, bool):
            return _fold(expr.then if condition.value else expr.otherwise)
        return E.Conditional(condition, _fold(expr.then), _fold(expr.otherwise))
    return expr


@dataclass(frozen=True)
class CompiledEngine:
    """The compiled evaluator of one engine profile."""

    engine: EngineData
    source: str
    evaluate: Callable[[Mapping[str, Any]], tuple[dict[str, list[Reason]], list[str], dict[str, Any]]]
    input_names: tuple[str, ...]
    fact_names: tuple[str, ...]
    defaults: Mapping[str, Any]


def _var(name: str) -> str:
    return "v_" + name.replace(".", "__")


def compile_engine(engine: EngineData, catalog: Catalog,
                   backends: tuple[str, ...] | None = None) -> CompiledEngine:
    """Generate and compile the evaluator for ``engine`` (all of its backends by default;
    ``catalog`` states the reason codes' messages)."""
    profile = engine.profile
    names = backends or tuple(engine.backends)
    inputs = (*profile.inputs, *profile.environment)
    facts = tuple(f.name for f in profile.facts)
    constants: dict[str, Any] = {}
    set_names: dict[frozenset[Any], str] = {}

    def constant(values: object) -> str:
        assert isinstance(values, frozenset)
        if values not in set_names:
            set_names[values] = f"K_{len(set_names)}"
            constants[set_names[values]] = values
        return set_names[values]

    nullable_names = {n for n, spec in {**profile.inputs, **profile.environment}.items() if spec.nullable}

    def nullable(name: str) -> bool:
        return name in nullable_names or name not in known_names

    known_names = set(inputs)

    def py(expr: E.Expr, name_of: Callable[[str], str] = _var) -> str:
        return E.to_python(expr, name_of, nullable, constant)

    lines = ["def evaluate(f):"]
    for name in inputs:
        lines.append(f"    {_var(name)} = f[{name!r}]")
    for fact in profile.facts:
        value_expr = _parse(fact.value)
        boolean = E.is_boolean(value_expr) and all(E.is_boolean(_parse(st.set)) for st in fact.steps)
        wrap = "bool" if boolean and isinstance(value_expr, E.BoolOp) else ""
        lines.append(f"    {_var(fact.name)} = {wrap}{py(value_expr)}")
        for step in fact.steps:
            lines.append(f"    if {py(_parse(step.when))}:")
            step_expr = _parse(step.set)
            step_wrap = "bool" if isinstance(step_expr, E.BoolOp) else ""
            lines.append(f"        {_var(fact.name)} = {step_wrap}{py(step_expr)}")
        sets = [value_expr, *(_parse(st.set) for st in fact.steps)]
        if not any(E.may_be_null(x, nullable) for x in sets):
            known_names.add(fact.name)
        else:
            nullable_names.add(fact.name)
            known_names.add(fact.name)
    checks = [(c.code, E.parse(c.fails_when) if isinstance(c.fails_when, str) else E.Literal(c.fails_when))
              for c in profile.checks]

    def reason_ref(code: str, backend_name: str, name_of: Callable[[str], str]) -> str:
        message = catalog.code(code).message.replace("{backend_name}", backend_name)
        fields = sorted({f for _, f, _, _ in string.Formatter().parse(message) if f})
        key = f"R_{code}_{backend_name}"
        if not fields:
            constants[key] = (code, message)
            return key
        constants[f"T_{code}_{backend_name}"] = message
        args = ", ".join(f"{f}={name_of(f)}" for f in fields)
        return f"({code!r}, T_{code}_{backend_name}.format({args}))"

    shared: dict[str, str] = {}

    def local_names_used(expr: E.Expr, local: set[str]) -> bool:
        return bool(E.names_in(expr) & local)

    result_items = []
    for backend_name in names:
        spec = engine.backends[backend_name]
        defined: set[str] = set()

        def local_var(name: str, _b: str = backend_name, _l: set[str] = defined) -> str:
            return f"l_{_b}__{name}" if name in _l else _var(name)

        for fact in spec.facts:
            value_source = py(_parse(fact.value), local_var)  # may read the outer value
            defined.add(fact.name)
            lines.append(f"    {local_var(fact.name)} = {value_source}")
            for step in fact.steps:
                lines.append(f"    if {py(_parse(step.when), local_var)}:")
                lines.append(f"        {local_var(fact.name)} = {py(_parse(step.set), local_var)}")
        caps = capability_expressions(spec)
        var = f"r_{backend_name}"
        lines.append(f"    {var} = []")
        for code, fails in checks:
            folded = _fold(_substitute(fails, caps))
            if folded == E.Literal(False):
                continue
            condition = py(folded, local_var)
            if local_names_used(folded, defined):
                lines.append(f"    if {condition}:")
            else:
                if condition not in shared:
                    shared[condition] = f"c_{len(shared)}"
                    lines.append(f"    {shared[condition]} = {condition}")
                lines.append(f"    if {shared[condition]}:")
            lines.append(f"        {var}.append({reason_ref(code, backend_name, local_var)})")
        keyword = "if"
        for rule in spec.combination:
            rule_condition = _fold(_parse(rule.when))
            if rule_condition == E.Literal(False):
                continue
            lines.append(f"    {keyword} {py(rule_condition, local_var)}:")
            if rule.raises:
                lines.append(f"        {var}[:] = [{reason_ref(rule.code, backend_name, local_var)}]")
            else:
                lines.append(f"        {var}.append({reason_ref(rule.code, backend_name, local_var)})")
            keyword = "elif"
        result_items.append(f"{backend_name!r}: {var}")
    lines.append("    order = []")
    keyword = "if"
    for branch in profile.priorities:
        lines.append(f"    {keyword} {py(_parse(branch.when))}:")
        for entry in branch.order:
            if isinstance(entry, PriorityEntry):
                lines.append(f"        if {py(_parse(entry.when))}:")
                lines.append(f"            order.append({entry.backend!r})")
            else:
                lines.append(f"        order.append({entry!r})")
        lines.append("        pass")
        keyword = "elif"
    fact_items = ", ".join(f"{n!r}: {_var(n)}" for n in facts)
    lines.append(f"    return {{{', '.join(result_items)}}}, order, {{{fact_items}}}")
    source = "\n".join(lines) + "\n"
    namespace: dict[str, Any] = dict(constants)
    code_object = compile(source, f"<attn-select {engine.engine}>", "exec")
    exec(code_object, namespace)
    defaults = {name: spec.default for name, spec in {**profile.inputs, **profile.environment}.items()}
    return CompiledEngine(
        engine=engine,
        source=source,
        evaluate=namespace["evaluate"],
        input_names=tuple(inputs),
        fact_names=facts,
        defaults=defaults,
    )


_COMPILED: dict[tuple[int, tuple[str, ...] | None], tuple[EngineData, CompiledEngine]] = {}
"""The compiled evaluators of this process, by loaded engine (kept alive with it)."""


def compiled_for(engine: str | EngineData, backends: tuple[str, ...] | None = None,
                 platform: str | None = None, *,
                 catalog: Catalog) -> CompiledEngine:
    """The compiled evaluator of ``engine`` (a loaded engine, for its platform; or a
    release name: the shipped profile loaded for ``platform``, default the catalog's
    default platform), for all backends or only ``backends``: cached per process and,
    on disk under ``catalog``'s data digest."""
    import marshal

    from selector.util.cache import cache_get, cache_put

    if isinstance(engine, str):
        engine = catalog.engine(engine, platform)
    memo = (id(engine), backends)
    hit = _COMPILED.get(memo)
    if hit is not None and hit[0] is engine:
        return hit[1]
    digest = catalog.digest
    key = f"{digest}-{engine.engine}-{engine.platform}-{'-'.join(backends or ('ALL',))}"
    cached = cache_get("compiled", key) if digest else None
    if isinstance(cached, tuple) and len(cached) == 5:
        source, code_bytes, constants, inputs, facts = cached
        namespace: dict[str, Any] = dict(constants)
        exec(marshal.loads(code_bytes), namespace)
        defaults = {n: s.default for n, s in {**engine.profile.inputs, **engine.profile.environment}.items()}
        compiled = CompiledEngine(engine=engine, source=source, evaluate=namespace["evaluate"],
                                  input_names=inputs, fact_names=facts, defaults=defaults)
    else:
        compiled = compile_engine(engine, catalog, backends)
        if digest:
            constants = {k: v for k, v in compiled.evaluate.__globals__.items()
                         if k.startswith(("K_", "R_", "T_"))}
            code = compile(compiled.source, f"<attn-select {engine.engine}>", "exec")
            cache_put("compiled", key, (compiled.source, marshal.dumps(code), constants,
                                        compiled.input_names, compiled.fact_names))
    _COMPILED[memo] = (engine, compiled)
    return compiled
