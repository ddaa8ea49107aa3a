"""Shard plans of a deployment: its smoke plans plus the TP / DCP split (pure; no torch)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import ValidationError

from selector.catalog import Catalog
from selector.errors import CannotRunHereError, InputError, InvalidDeploymentError
from selector.inputs.config import LoadedDeployment
from selector.models import ModelFacts
from selector.parallel.plan import ShardPlan
from selector.smoke.plan import SmokePlan

__all__ = ["SHARD_BACKENDS", "HeadsOf", "model_heads", "shard_plans"]

HeadsOf = Callable[[SmokePlan], tuple[int, int]]
"""(attention heads, KV heads) in all, before the split, of the layers a smoke plan runs."""


def model_heads(model: ModelFacts, plan: SmokePlan) -> tuple[int, int]:
    """(query heads, KV heads) in all of the model's attention layers of the plan's head size."""
    for layer in model.layers:
        if layer.total_q_heads and layer.head_size == plan.head_size:
            return layer.total_q_heads, layer.total_kv_heads or layer.total_q_heads
    raise InputError(f"no attention layer of head size {plan.head_size} in the model")


SHARD_BACKENDS = ("FLASH_ATTN", "FLASHINFER")


def _checkable(plan: SmokePlan) -> bool:
    return plan.backend in SHARD_BACKENDS and not plan.is_mla and not plan.fp8_kv \
        and not plan.has_sinks and plan.softmax_scale is None


def shard_plans(loaded: LoadedDeployment, plans: Sequence[SmokePlan],
                heads_of: HeadsOf, catalog: Catalog) -> tuple[list[ShardPlan], list[str]]:
    """One shard plan per smoke plan when the deployment splits attention over ranks
    (tensor_parallel_size or decode_context_parallel_size > 1), and the names of the
    smoke plans the shard check cannot run yet (MLA, FP8 KV caches, sinks). ``heads_of``
    gives a plan's heads in all (asked only when the plan is shard-checked)."""
    config = loaded.path
    deployment = loaded.deployment
    parallel = deployment.parallel
    tp, dcp = parallel.tensor_parallel_size, parallel.decode_context_parallel_size
    if tp == 1 and dcp == 1:
        return [], []
    out = []
    skipped = [plan.name for plan in plans if not _checkable(plan)]
    if skipped and dcp > 1:
        raise CannotRunHereError(
            f"plan '{skipped[0]}': DCP shard checks run FLASH_ATTN and FLASHINFER with a "
            "model-dtype KV cache and no sinks; this plan is not shard-checked yet")
    for plan in plans:
        if not _checkable(plan):
            continue
        # the plan's engine and platform: the resolved target's (a --engine flag wins over
        # the file's engine:), never the file's text
        runtime = catalog.engine(plan.engine, plan.platform).backend(plan.backend).runtime
        if dcp > 1 and (runtime.lse_base is None or runtime.dcp_decode_kv is None):
            raise CannotRunHereError(
                f"plan '{plan.name}': vLLM runs {plan.backend} with DCP, but its data states "
                "no LSE base / DCP read (runtime.lse_base, runtime.dcp_decode_kv)")
        heads, kv_heads = heads_of(plan)
        try:
            out.append(ShardPlan(
                name=plan.name, backend=plan.backend, engine=plan.engine,
                kernel_calls=plan.kernel_calls,
                kernel_block_size=plan.kernel_block_size, kv_layout=plan.kv_layout,
                dtype=plan.dtype, head_size=plan.head_size, num_heads=heads,
                num_kv_heads=kv_heads, tensor_parallel_size=tp,
                decode_context_parallel_size=dcp,
                cp_kv_cache_interleave_size=parallel.cp_kv_cache_interleave_size,
                sliding_window=plan.sliding_window, logits_soft_cap=plan.logits_soft_cap,
                lse_base=runtime.lse_base or "e",
                dcp_decode_kv=runtime.dcp_decode_kv or "context"))
        except ValidationError as error:
            message = error.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
            raise InvalidDeploymentError(
                f"{config}: vLLM would refuse this split at start-up: {message}") from None
    return out, skipped
