"""vLLM 0.25.1: the committed oracle answers (real vLLM code) must equal attn-select's.

Selection (every reason list, the selected backend, the error text) and the
``kv_cache`` reports the 0.25.1 oracle adds: ``get_kv_cache_shape`` (with the
default and with the configured KV-cache dtype), ``get_kv_cache_stride_order`` under
NHD and HND, ``get_supported_kernel_block_sizes``, ``get_required_kv_cache_layout``
and the process-wide layout after selection.  See tests/golden/oracle/README.md.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from selector import expr as E
from selector.catalog import load_catalog
from selector.inputs.flat import facts_from_flat
from selector.kv import kvshape
from selector.schema.backend import BackendSpec, split_shape
from selector.schema.types import MultipleOf
from selector.solver.compiled import compiled_for
from tests.golden.oracle_sweep import sweep_mismatches

ENGINE = "vllm==0.25.1"
GOLDEN = Path(__file__).parent / "oracle" / "vllm-0.25.1" / "all.jsonl.gz"


@pytest.fixture(scope="module")
def cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(GOLDEN.read_bytes()).decode().splitlines() if line.strip()]


def test_selection_agrees_exactly(cases: list[dict[str, Any]]) -> None:
    assert len(cases) >= 1000
    data = load_catalog().engine(ENGINE)
    mismatches = sweep_mismatches(cases, data)
    assert not mismatches, f"{len(mismatches)} differences, first: {mismatches[0]}"


def _kernel_block_sizes(spec: BackendSpec, scope: Mapping[str, Any]) -> list[object]:
    for variant in spec.kernel_block_sizes:
        if variant.when is True or E.evaluate(E.parse(str(variant.when)), scope):
            return [{"multiple_of": s.multiple_of} if isinstance(s, MultipleOf) else s
                    for s in variant.sizes]
    return []


def _shape(spec: BackendSpec, scope: Mapping[str, Any], call: Mapping[str, int],
           cache_dtype: str) -> object:
    shape = kvshape.kv_cache_shape(spec, scope, num_blocks=call["num_blocks"],
                                   block_size=call["block_size"],
                                   num_kv_heads=call["num_kv_heads"],
                                   head_size=call["head_size"], cache_dtype_str=cache_dtype)
    assert shape is not None, spec.name
    return shape.error if shape.error is not None else list(shape.values or ())


def kv_cache_differences(case: Mapping[str, Any]) -> list[tuple[str, str, object, object]]:
    """(backend, item, ours, theirs) for every kv_cache fact of one oracle line."""
    report = case.get("kv_cache")
    if not report:
        return []
    engine = load_catalog().engine(ENGINE)
    compiled = compiled_for(ENGINE, catalog=load_catalog())
    facts, _ = facts_from_flat(case["input"], engine.profile)
    full = {**compiled.defaults, **facts.stated}
    _, _, derived = compiled.evaluate(full)
    scope = {**full, **derived}
    call = report["call"]
    kv = case["input"].get("kv_cache_dtype", "auto")
    out: list[tuple[str, str, object, object]] = []

    def check(backend: str, item: str, ours: object, theirs: object) -> None:
        if ours != theirs:
            out.append((backend, item, ours, theirs))

    selected = case["selected"]
    expected_layout = "NHD"
    if selected in engine.backends:
        expected_layout = kvshape.required_layout(engine.backends[selected], scope) or "NHD"
    check("-", "layout", expected_layout, report["layout"])
    for name, entry in report["backends"].items():
        spec = engine.backends[name]
        geometry = spec.runtime.kv_cache
        assert geometry is not None, name
        check(name, "shape", _shape(spec, scope, call, geometry.cache_dtype_default),
              entry["kv_cache_shape"])
        if "kv_cache_shape_for_kv_cache_dtype" in entry:
            check(name, "shape for kv dtype", _shape(spec, scope, call, kv),
                  entry["kv_cache_shape_for_kv_cache_dtype"])
        for layout, theirs in entry["kv_cache_stride_order"].items():
            order = kvshape.stride_order(spec, layout)
            check(name, f"stride {layout}",
                  list(order) if order is not None else "NotImplementedError: ", theirs)
        check(name, "kernel block sizes", _kernel_block_sizes(spec, scope),
              entry["supported_kernel_block_sizes"])
        check(name, "required layout", kvshape.required_layout(spec, scope),
              entry["required_kv_cache_layout"])
    return out


def test_kv_cache_reports_agree_exactly(cases: list[dict[str, Any]]) -> None:
    with_report = [c for c in cases if c.get("kv_cache")]
    assert len(with_report) >= 900
    mismatches = [(c["input"], d) for c in with_report for d in kv_cache_differences(c)]
    assert not mismatches, f"{len(mismatches)} differences, first: {mismatches[0]}"


def test_every_profile_backend_has_kv_cache_geometry() -> None:
    engine = load_catalog().engine(ENGINE)
    # a member vLLM refuses before any class is used (TORCH_SDPA, CUSTOM: no class path;
    # NO_ATTENTION: no module) shapes no cache
    refused = {name for name, spec in engine.backends.items()
               if any(rule.raises and rule.when in (True, "true") for rule in spec.combination)}
    missing = [name for name, spec in engine.backends.items()
               if spec.runtime.kv_cache is None and name not in refused]
    assert not missing
    assert engine.profile.kv_cache_layout_default == "NHD"


def test_runtime_rules_read_only_known_names() -> None:
    """Names in the optional KV-cache and cascade rules resolve (the catalog's
    cross-check does not look at these optional sections)."""
    for engine_name in load_catalog().engine_names:
        engine = load_catalog().engine(engine_name)
        profile = engine.profile
        known = set(profile.inputs) | set(profile.environment) | {f.name for f in profile.facts}
        for spec in engine.backends.values():
            local = known | {f.name for f in spec.facts}
            conditions: list[object] = [r.when for r in spec.runtime.cascade_attention]
            geometry = spec.runtime.kv_cache
            if geometry is not None:
                conditions += [r.when for r in geometry.required_layout]
                for rule in geometry.shape:
                    conditions.append(rule.when)
                    if rule.shape:
                        conditions += list(split_shape(rule.shape))
                for layout, order in (geometry.stride_order or {}).items():
                    assert sorted(order) == list(range(len(order))), (spec.name, layout)
            for condition in conditions:
                if isinstance(condition, str):
                    unknown = E.names_in(E.parse(condition)) - local - kvshape.CALL_NAMES
                    assert not unknown, (engine_name, spec.name, condition, unknown)
