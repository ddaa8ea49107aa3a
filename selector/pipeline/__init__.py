"""The pipeline: the only place the stages are chained.

::

    deployment file / vllm serve line / flat config
      -> request facts (selector.request: one frozen model, one builder)
      -> solve: the single layer, or every layer of the model (selector.solver, modelcheck)
      -> KV plan and start-up checks (selector.kv, selector.memory)
      -> result -> records / smoke plans / bench targets / diffs / verdict lines

:mod:`.deployment` decides between a single-layer deployment and a whole model, once;
each command has its module here (:mod:`.check`, :mod:`.explain`, :mod:`.diff`,
:mod:`.smoke`, :mod:`.bench`, :mod:`.flat` for ``sweep``). The submodules import their
stages at the top; this package imports a submodule only when one of its names is used,
so ``sweep`` does not pay for the whole-model machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

__all__ = [
    "Explained",
    "FlatEvaluator",
    "FlatRequest",
    "LayerRequest",
    "Solved",
    "bench_targets",
    "check_deployment",
    "check_files",
    "check_model",
    "check_serve",
    "check_startup",
    "deployment_plans",
    "deployment_smoke",
    "diff_deployment",
    "draft_stage",
    "explain_layer",
    "layer_of",
    "record_of",
    "rejection",
    "rewritten_cache_dtypes",
    "shard_plans",
    "solve_deployment",
    "solve_for_engine",
    "solve_to_run",
    "sweep_matrix",
    "tensor_parallel_record",
]

_LAZY = {
    "LayerRequest": "selector.pipeline.deployment",
    "Solved": "selector.pipeline.deployment",
    "layer_of": "selector.pipeline.deployment",
    "solve_deployment": "selector.pipeline.deployment",
    "check_deployment": "selector.pipeline.check",
    "check_files": "selector.pipeline.check",
    "check_serve": "selector.pipeline.check",
    "record_of": "selector.pipeline.check",
    "rejection": "selector.pipeline.check",
    "solve_to_run": "selector.pipeline.check",
    "Explained": "selector.pipeline.explain",
    "explain_layer": "selector.pipeline.explain",
    "diff_deployment": "selector.pipeline.diff",
    "solve_for_engine": "selector.pipeline.diff",
    "sweep_matrix": "selector.pipeline.diff",
    "deployment_plans": "selector.pipeline.smoke",
    "deployment_smoke": "selector.pipeline.smoke",
    "shard_plans": "selector.pipeline.smoke",
    "bench_targets": "selector.pipeline.bench",
    "FlatEvaluator": "selector.pipeline.flat",
    "FlatRequest": "selector.pipeline.flat",
    "check_model": "selector.pipeline.model",
    "rewritten_cache_dtypes": "selector.pipeline.model",
    "draft_stage": "selector.pipeline.draft",
    "check_startup": "selector.pipeline.startup",
    "tensor_parallel_record": "selector.pipeline.startup",
}

if TYPE_CHECKING:
    from selector.pipeline.bench import bench_targets
    from selector.pipeline.check import (
        check_deployment,
        check_files,
        check_serve,
        record_of,
        rejection,
        solve_to_run,
    )
    from selector.pipeline.deployment import LayerRequest, Solved, layer_of, solve_deployment
    from selector.pipeline.diff import diff_deployment, solve_for_engine, sweep_matrix
    from selector.pipeline.draft import draft_stage
    from selector.pipeline.explain import Explained, explain_layer
    from selector.pipeline.flat import FlatEvaluator, FlatRequest
    from selector.pipeline.model import check_model, rewritten_cache_dtypes
    from selector.pipeline.smoke import deployment_plans, deployment_smoke, shard_plans
    from selector.pipeline.startup import check_startup, tensor_parallel_record

__getattr__ = lazy_getattr(__name__, _LAZY)
