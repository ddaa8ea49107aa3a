"""Hypothesis: over the shipped deployments (examples/ and tests/fixtures/, each on its own
device or another GPU of the catalog, with ``max_model_len`` and
``gpu_memory_utilization`` varied), ``smoke`` and ``bench`` refuse exactly the deployments
``check`` finds invalid, with check's errors in check's words and order.

The decision is made once (``check``'s record, through ``solve_to_run``); this property
guards that the two entry points the commands and the fleet nodes call
(``deployment_plans``, ``bench_targets``) take nothing else into account. ``check``'s words
are vLLM's: tests/golden/test_memory_oracle.py (MM001 / MM002, word for word against vLLM's
recorded answers) and tests/golden/test_startup_facts.py (SU002, vLLM's own
``get_and_verify_max_len``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.checkrun import CheckOptions
from selector.errors import InputError, InvalidDeploymentError
from selector.inputs.config import LoadedDeployment, load_deployment
from selector.memory import startup_profile
from selector.pipeline.bench import bench_targets
from selector.pipeline.check import check_deployment
from selector.pipeline.smoke import deployment_plans

ROOT = Path(__file__).resolve().parents[2]


def _shipped() -> list[LoadedDeployment]:
    """Every deployment file shipped in examples/ and tests/fixtures/ that loads."""
    files = [*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/fixtures/**/*.yaml")]
    loaded = []
    for path in sorted(files):
        if not any(line.startswith("device:")
                   for line in path.read_text(encoding="utf-8").splitlines()):
            continue
        try:
            loaded.append(load_deployment(str(path)))
        except InputError:
            continue  # a file made to be refused as input: not a deployment
    return loaded


SHIPPED = _shipped()
DEVICES = [device.name for device in load_catalog().devices if device.platform == "cuda"]
"""The CUDA devices: the smoke and bench of a ROCm deployment need an AMD GPU (exit 4)."""


def _startup_codes() -> set[str]:
    profile = startup_profile(load_catalog())
    checks, memory = profile.checks, profile.memory
    return {memory.no_memory_code, memory.too_long_code, memory.oom_code,
            checks.bfloat16.code, checks.max_model_len.code,
            checks.tensor_parallel_heads.code, checks.tensor_parallel_vocab.code}


STARTUP_CODES = _startup_codes()


@st.composite
def deployments(draw: st.DrawFn) -> LoadedDeployment:
    loaded = draw(st.sampled_from(SHIPPED))
    update: dict[str, object] = {}
    device = draw(st.sampled_from([None, *DEVICES]))
    if device is not None:
        update["device"] = device
    if loaded.deployment.model is not None:
        length = draw(st.sampled_from([None, 4096, 32768, 131072, 262144, 1048576]))
        if length is not None:
            update["max_model_len"] = length
        utilization = draw(st.sampled_from([None, 0.3, 0.5, 0.7, 0.95]))
        if utilization is not None:
            update["gpu_memory_utilization"] = utilization
    return replace(loaded, deployment=loaded.deployment.model_copy(update=update))


def test_the_shipped_deployments_include_every_refusal_kind() -> None:
    assert len(SHIPPED) > 40
    catalog = load_catalog()
    codes = {f.code for loaded in SHIPPED
             for f in check_deployment(loaded, catalog, CheckOptions()).findings
             if f.level == "error"}
    assert {"SU001", "SU002", "SU006", "MM001", "MM002"} <= codes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deployments())
def test_smoke_and_bench_refuse_what_check_finds_invalid(loaded: LoadedDeployment) -> None:
    catalog = load_catalog()
    try:
        record = check_deployment(loaded, catalog, CheckOptions())
    except InputError as error:  # e.g. heads a TP size cannot shard: bad input for all
        for run in (deployment_plans, bench_targets):
            with pytest.raises(InputError) as raised:
                run(loaded, catalog)
            assert raised.value.render() == error.render()
        return
    errors = [f for f in record.findings if f.level == "error"]
    path = loaded.path
    expected = (f"{path}: vLLM would reject this deployment: "
                + "; ".join(f"[{f.code}] {f.message.rstrip('.')}" for f in errors)
                + f"; `attn-select check {path}` says more")
    for run in (deployment_plans, bench_targets):
        if record.status == "valid":
            try:
                run(loaded, catalog)
            except InvalidDeploymentError as refused:  # pragma: no cover - the failure
                pytest.fail(f"check finds {path} valid, {run.__name__} refuses it: {refused}")
            except InputError:
                pass  # nothing to run (no attention layer or kernel runner): exit 2, not 1
            continue
        assert errors, record
        with pytest.raises(InvalidDeploymentError) as raised:
            run(loaded, catalog)
        assert str(raised.value) == expected
        startup = [f.code for f in errors if f.code in STARTUP_CODES]
        assert all(f"[{code}] " in str(raised.value) for code in startup)
