"""The request facts: one frozen, typed model; one builder; every producer feeds it and
only the pipeline chains the stages."""

from __future__ import annotations

import ast
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.inputs.config import deployment_facts, deployment_model, load_deployment
from selector.inputs.flat import FLAT_FIELDS, facts_from_flat
from selector.pipeline.deployment import layer_of, solve_deployment
from selector.request import ENV_PREFIX, RequestFacts, as_request, layer_request

ROOT = Path(__file__).resolve().parents[2]
FIELDS = {f.name: f for f in dataclasses.fields(RequestFacts)}
HINTS = typing.get_type_hints(RequestFacts)


def _deployment_files() -> list[Path]:
    files = [*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/fixtures/**/*.yaml")]
    return sorted(f for f in files
                  if any(line.startswith("device:")
                         for line in f.read_text(encoding="utf-8").splitlines()))


def _admits(annotation: Any, value: object) -> bool:
    allowed = typing.get_args(annotation) if isinstance(annotation, types.UnionType) \
        else (annotation,)
    if value is None:
        return type(None) in allowed
    if isinstance(value, bool):
        return bool in allowed
    return any(t is not type(None) and t is not bool and isinstance(value, t) for t in allowed)


def _typed(facts: RequestFacts) -> list[str]:
    """The stated facts whose value is not of the field's type (environment facts are the
    profile's: any scalar)."""
    return [f"{name}={value!r}" for name, value in facts.stated.items()
            if not name.startswith(ENV_PREFIX) and not _admits(HINTS[name], value)]


def test_every_profile_input_is_a_field_with_the_profiles_default() -> None:
    catalog = load_catalog()
    for name in catalog.engine_names:
        profile = catalog.engine(name).profile
        assert set(profile.inputs) <= set(FIELDS), name
        assert all(env.startswith(ENV_PREFIX) for env in profile.environment), name
        for fact, spec in profile.inputs.items():
            assert FIELDS[fact].default == spec.default, (name, fact)
    newest = set(catalog.engine(None).profile.inputs)
    assert set(FIELDS) == newest, "a field no profile reads"


def test_request_facts_are_frozen_and_the_solver_gets_a_copy() -> None:
    facts = as_request({"cc": 90, "head_size": 128})
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.cc = 80  # type: ignore[misc]
    mapping = facts.solver_facts()
    mapping["cc"] = 80
    assert facts.cc == 90 and facts.stated == {"cc": 90, "head_size": 128}
    assert facts.kv_cache_dtype == "auto"  # unstated: the profile's default
    assert facts == as_request({"cc": 90, "head_size": 128})
    assert hash(facts) == hash(as_request({"cc": 90, "head_size": 128}))


@pytest.mark.parametrize("path", _deployment_files(), ids=lambda p: p.name)
def test_deployments_state_typed_facts_of_the_profiles_vocabulary(path: Path) -> None:
    catalog = load_catalog()
    loaded = load_deployment(str(path))
    profile = catalog.engine(loaded.deployment.engine).profile
    vocabulary = set(profile.inputs) | set(profile.environment)
    if loaded.deployment.model is None:
        facts = deployment_facts(loaded, catalog)
        assert set(facts.stated) <= vocabulary
        assert not _typed(facts)
        return
    model, base, _ = deployment_model(loaded, catalog)
    assert set(base.stated) <= vocabulary and not _typed(base)
    for layer in model.layers:
        if layer.is_attention:
            facts = layer_request(base, layer, model)
            assert set(facts.stated) <= vocabulary, layer.index
            assert not _typed(facts), (layer.index, _typed(facts))


def test_a_layer_request_is_what_the_model_check_solved() -> None:
    catalog = load_catalog()
    loaded = load_deployment(str(ROOT / "tests/fixtures/smoke/gpt-oss-20b-h200.yaml"))
    solved = solve_deployment(loaded, catalog, suggest=False, startup=False)
    assert solved.model is not None and solved.layer is None and solved.valid
    for selection in solved.model.selections:
        request = layer_of(loaded, catalog, selection.layers[0])
        assert request.facts == selection.facts


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries(
    {"device_capability": st.sampled_from(["8.0", "9.0", "10.0", "12.0"]),
     "head_size": st.sampled_from([64, 128, 256, 576]),
     "dtype": st.sampled_from(["bfloat16", "float16"])},
    optional={"kv_cache_dtype": st.sampled_from(["auto", "fp8", "fp8_e5m2"]),
              "block_size": st.sampled_from([16, 32, 64]),
              "use_mla": st.booleans(), "has_sink": st.booleans(), "use_sparse": st.booleans(),
              "num_heads": st.integers(1, 128), "num_kv_heads": st.sampled_from([1, 8])}))
def test_flat_configs_state_every_fact_of_the_vocabulary_typed(config: dict[str, Any]) -> None:
    profile = load_catalog().engine(None).profile
    assert set(config) <= FLAT_FIELDS
    if "num_kv_heads" in config:
        config["num_heads"] = 8 * config["num_kv_heads"]
    facts, _ = facts_from_flat(config, profile)
    assert list(facts.stated) == [*profile.inputs, *profile.environment]
    assert not _typed(facts)


# --------------------------------------------------------------- the pipeline's place

CHAINING = {
    "deployment_facts", "deployment_model", "check_model", "check_startup",
    "tensor_parallel_record", "facts_from_flat", "plans_from_model", "plans_from_result",
    "model_groups", "layer_groups", "layer_request",
}
"""Functions whose calls chain one stage into the next."""


def test_only_the_pipeline_chains_the_stages() -> None:
    """The "single layer or whole model" decision and every stage-to-stage hand-off are
    in selector/pipeline/; elsewhere these functions are only defined."""
    offenders = []
    for path in sorted((ROOT / "selector").rglob("*.py")):
        if "pipeline" in path.relative_to(ROOT / "selector").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else \
                    func.attr if isinstance(func, ast.Attribute) else None
                if name in CHAINING:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}()")
    assert offenders == []
