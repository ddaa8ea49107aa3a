"""``smoke --dry-run``: every kernel call a smoke run would make, without a GPU or torch.

Per plan: the backend and engine version, the batch the run feeds the kernels, the
providers in the order they are tried (the engine's own kernels first) with how each
takes the call, and every call -- entry point, vLLM source line, and each argument as a
literal, a plan quantity's value or the name of the tensor the step supplies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from selector.smoke.batch import BatchSpec
from selector.smoke.contract import ProviderSpec, load_contract, resolve_calls
from selector.smoke.graphs import capacity_batch
from selector.smoke.plan import SmokeOptions, SmokePlan
from selector.smoke.providers import platform_providers
from selector.smoke.workload import (
    graph_capacity_pages,
    long_context_for,
    mixed_batch,
    mla_decode_batch,
)

__all__ = ["dry_run", "smoke_batch"]


def smoke_batch(plan: SmokePlan, seed: int) -> BatchSpec:
    """The batch a smoke run feeds ``plan``'s kernels (the same function the runner uses)."""
    long_context = long_context_for(plan)
    if plan.is_mla:
        return mla_decode_batch(plan.kernel_block_size, seed, long_context).batch
    return mixed_batch(plan.kernel_block_size, seed, long_context=long_context).batch


def _provider(spec: ProviderSpec, plan: SmokePlan) -> dict[str, Any]:
    exact = plan.fa_version is None or spec.fa_versions is None or \
        plan.fa_version in spec.fa_versions
    where = spec.module if spec.kind in ("module", "backend_classes") \
        else f"$VLLM_KERNELS_DIR/{spec.library_file}"
    entry: dict[str, Any] = {"id": spec.id, "kind": spec.kind, "library": where,
             "entry_points": spec.entry_points,
             "runs_negotiated_kernel": exact}
    if spec.kind == "backend_classes":
        forward = "forward_mqa (the MLA decode)" if plan.is_mla else "forward"
        entry["runs"] = (f"vLLM's {plan.backend} backend class: its metadata builder's "
                         f"build(0, CommonAttentionMetadata) and its impl's {forward}, with "
                         "vLLM's own kernel arguments")
    if spec.requires.get(plan.backend):
        entry["requires"] = spec.requires[plan.backend]
    for key in ("bind", "fixed", "drops", "unsupported", "force", "positional"):
        value = getattr(spec, key)
        if value:
            entry[key] = value
    if spec.fa_versions:
        entry["fa_versions"] = spec.fa_versions
    return entry


def _batch_json(batch: BatchSpec) -> dict[str, Any]:
    return {"block_size": batch.block_size,
            "requests": [{"id": r.id, "context_len": r.context_len, "query_len": r.query_len,
                          "pages": len(r.block_ids)} for r in batch.requests]}


def dry_run(plans: Sequence[SmokePlan], options: SmokeOptions | None = None
            ) -> dict[str, Any]:
    """The calls of every plan as JSON-ready data (pure: no torch, no GPU, no probing)."""
    options = options or SmokeOptions()
    out = []
    for plan in plans:
        contract = load_contract(plan.kernel_calls)
        backend = contract.backend(plan.backend)
        batch = smoke_batch(plan, options.seed)
        providers = [_provider(spec, plan) for spec in platform_providers(plan)]
        providers.sort(key=lambda entry: not entry["runs_negotiated_kernel"])
        entry: dict[str, Any] = {
            "plan": plan.model_dump(mode="json", exclude_defaults=True),
            "engine": contract.engine, "library": backend.library,
            "batch": _batch_json(batch),
            "providers": providers,
            "cross_checked_by": [spec.id for spec in contract.providers
                                 if spec.kind == "backend_classes"
                                 and plan.backend in spec.cross_checks],
            "calls": [call.to_json() for call in resolve_calls(plan, batch)],
            "notes": backend.notes,
        }
        if plan.uses_full_graph and not plan.is_mla:
            block = plan.kernel_block_size
            graph = capacity_batch(block, graph_capacity_pages(block))
            entry["graph_calls"] = [call.to_json() for call in
                                    resolve_calls(plan, graph, graph_capture=True)]
        out.append(entry)
    return {"dry_run": True, "plans": out}
