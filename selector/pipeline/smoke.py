"""``smoke`` through the stages: a deployment solved (and, for a model, its KV cache
planned), then the smoke plans of what was negotiated, and the shard plans of a
tensor- or decode-context-parallel split.

One entry for every caller of the smoke: the local ``smoke CONFIG`` command and a fleet
run (which negotiates the same file once per device type of the cluster).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from selector.catalog import Catalog
from selector.errors import InputError
from selector.inputs.config import LoadedDeployment, deployment_model, load_deployment
from selector.pipeline.check import solve_to_run
from selector.smoke.from_result import parity_choice, plans_from_model, plans_from_result
from selector.smoke.plan import SmokePlan
from selector.solver import pinned

if TYPE_CHECKING:
    from selector.parallel.plan import ShardPlan

__all__ = ["deployment_plans", "deployment_smoke", "shard_plans"]


def deployment_plans(loaded: LoadedDeployment, catalog: Catalog, *,
                     parity: bool | None = None) -> list[SmokePlan]:
    """The smoke plans of a loaded deployment on its own device (:func:`deployment_smoke`
    without the parity backends it left out)."""
    return deployment_smoke(loaded, catalog, parity=parity)[0]


def deployment_smoke(loaded: LoadedDeployment, catalog: Catalog, *,
                     parity: bool | None = None) -> tuple[list[SmokePlan], list[str]]:
    """The smoke plans of a loaded deployment on its own device, and the parity backends
    left out (``parity``: ``True`` every valid one, ``False`` none, ``None`` those whose
    kernels need no compile: :func:`selector.smoke.from_result.parity_choice`).

    Raises :class:`InvalidDeploymentError` (exit 1) when vLLM would reject it (as
    ``check`` reports it) and :class:`InputError` (exit 2) when no attention group has a
    backend to smoke-test or the model has no attention layer.
    """
    config = loaded.path
    deployment = loaded.deployment
    solved = solve_to_run(loaded, catalog, "smoke")
    skipped: list[str] = []
    if solved.model is not None:
        checked = solved.model
        plans = plans_from_model(checked, catalog)
        selected = sorted({s.result.selected or "-" for s in checked.selections})
    else:
        result = solved.layer
        assert result is not None
        run, skipped = parity_choice(result, catalog, parity)
        plans = plans_from_result(result, catalog=catalog, name=PurePath(config).stem,
                                  sliding_window=deployment.layer.sliding_window,
                                  logits_soft_cap=deployment.layer.logits_soft_cap,
                                  parity={b: pinned(result, b, catalog) for b in run})
        selected = [result.selected or "-"]
    if not plans:
        raise InputError(
            f"the plan selects {', '.join(selected)}, and no attention group has a backend "
            "to smoke-test", file=str(config),
            hint="pin one with attention_backend: FLASH_ATTN (or FLASHINFER) to smoke-test it")
    return plans, skipped


def shard_plans(config: Path, plans: Sequence[SmokePlan], catalog: Catalog
                ) -> tuple[list[ShardPlan], list[str]]:
    """One shard plan per smoke plan when the deployment splits attention over ranks
    (tensor_parallel_size or decode_context_parallel_size > 1), and the names of the
    smoke plans the shard check cannot run yet (MLA, FP8 KV caches, sinks)."""
    loaded = load_deployment(str(config))
    parallel = loaded.deployment.parallel
    if parallel.tensor_parallel_size == 1 and parallel.decode_context_parallel_size == 1:
        return [], []  # nothing split over ranks: the shard code is not even imported
    from selector.parallel import from_deployment

    layer = loaded.deployment.layer

    def layer_heads(plan: SmokePlan) -> tuple[int, int]:
        return layer.num_heads, layer.num_kv_heads or layer.num_heads

    def model_heads(plan: SmokePlan) -> tuple[int, int]:
        model, _, _ = deployment_model(loaded, catalog)
        return from_deployment.model_heads(model, plan)

    heads_of = layer_heads if loaded.deployment.model is None else model_heads
    return from_deployment.shard_plans(loaded, plans, heads_of, catalog)
