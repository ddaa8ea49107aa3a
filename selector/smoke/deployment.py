"""The smoke plans of a deployment file, through the solver (and the KV planner).

One entry for every caller of the smoke pipeline: the local ``smoke CONFIG`` command and
a fleet run (which negotiates the same file once per device type of the cluster).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import PurePath
from typing import TYPE_CHECKING

from selector.catalog import load_catalog
from selector.config import deployment_facts
from selector.errors import InputError, InvalidDeploymentError
from selector.modelcheck import check_model_deployment
from selector.smoke.from_result import parity_backends, plans_from_model, plans_from_result
from selector.solver import pinned, solve
from selector.startup_check import tensor_parallel_record

if TYPE_CHECKING:
    from selector.config import LoadedDeployment
    from selector.smoke.plan import SmokePlan

__all__ = ["deployment_plans", "on_device"]


def on_device(loaded: LoadedDeployment, device: str | None) -> LoadedDeployment:
    """``loaded`` with its ``device:`` replaced by ``device`` (None: unchanged)."""
    if device is None:
        return loaded
    return replace(loaded, deployment=loaded.deployment.model_copy(update={"device": device}))


def deployment_plans(loaded: LoadedDeployment) -> list[SmokePlan]:
    """The smoke plans of a loaded deployment on its own device.

    Raises :class:`InvalidDeploymentError` (exit 1) when vLLM would reject it and
    :class:`InputError` (exit 2) when no attention group has a backend to smoke-test.
    """
    catalog = load_catalog()
    config = loaded.path
    deployment = loaded.deployment
    if deployment.model is not None:
        refused = tensor_parallel_record(loaded, catalog, None, None)
        if refused is not None:  # as check reports it (exit 1), before the model is sharded
            raise InvalidDeploymentError(
                f"{config}: vLLM would reject this deployment: {refused[0].message.rstrip('.')}; "
                f"`attn-select check {config}` says more")
        checked = check_model_deployment(loaded, catalog)
        if not checked.valid:
            raise InvalidDeploymentError(
                f"{config}: vLLM would reject this deployment; `attn-select check {config}` says why")
        plans = plans_from_model(checked)
        selected = sorted({s.result.selected or "-" for s in checked.selections})
    else:
        result = solve(deployment_facts(loaded, catalog), engine=deployment.engine,
                       attention_backend=deployment.attention_backend,
                       cudagraph_mode=deployment.cudagraph_mode, suggest=False, catalog=catalog)
        if not result.valid:
            reason = f": {result.error.message}" if result.error is not None else ""
            raise InvalidDeploymentError(
                f"{config}: vLLM would reject this deployment{reason}; "
                f"`attn-select check {config}` says more")
        plans = plans_from_result(result, name=PurePath(config).stem,
                                  sliding_window=deployment.layer.sliding_window,
                                  logits_soft_cap=deployment.layer.logits_soft_cap,
                                  parity={b: pinned(result, b) for b in parity_backends(result)})
        selected = [result.selected or "-"]
    if not plans:
        raise InputError(
            f"the plan selects {', '.join(selected)}, and no attention group has a backend "
            "to smoke-test", file=str(config),
            hint="pin one with attention_backend: FLASH_ATTN (or FLASHINFER) to smoke-test it")
    return plans
