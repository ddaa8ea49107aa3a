"""The whole-model check plus what decides whether ``vllm serve`` starts: the memory
budget sizes the KV cache the planner negotiates, then vLLM's start-up refusals
(memory, dtype, max_model_len, tensor and decode context parallelism) are added with vLLM's words.

Model facts + deployment in, a :class:`~selector.modelcheck.ModelCheckResult` out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from selector.catalog import Catalog
from selector.config import LoadedDeployment, Target
from selector.kv import KVOptions
from selector.memory import (
    StartupIssue,
    dtype_issue,
    max_model_len_issue,
    memory_report,
    plan_budget,
    raw_config,
    startup_profile,
    tensor_parallel_issue,
)
from selector.modelcheck import ModelCheckResult
from selector.models import ModelFacts
from selector.pipeline.model import check_model
from selector.request import RequestFacts

__all__ = ["check_startup", "tensor_parallel_record"]


def tensor_parallel_record(loaded: LoadedDeployment, catalog: Catalog, target: Target,
                           model: ModelFacts) -> tuple[StartupIssue, str, str] | None:
    """vLLM's refusal of a tensor- / decode-context-parallel split (the TP size by the DCP
    size, the attention heads by the TP size, DCP's GQA limits, the padded vocabulary), as
    (issue, engine, device) -- before the model (the whole model, read once) is sharded."""
    d = loaded.deployment
    tp, dcp = d.parallel.tensor_parallel_size, d.parallel.decode_context_parallel_size
    pcp = d.parallel.prefill_context_parallel_size
    if tp <= 1 and dcp <= 1:
        return None
    profile = startup_profile(catalog, target.engine.engine)
    issue = tensor_parallel_issue(catalog, profile, model, tp, dcp, pcp)
    if issue is None:
        return None
    return issue, profile.engine, target.device_name


def _memory_not_modelled(settings: Mapping[str, object] | None) -> bool:
    """Pipeline parallelism (layers split across GPUs) and expert parallelism over data
    parallel ranks place weights and KV layers in ways the budget does not model."""
    if not settings:
        return False
    pp = settings.get("pipeline_parallel_size") or 1
    dp = settings.get("data_parallel_size") or 1
    ep = bool(settings.get("enable_expert_parallel"))
    return (isinstance(pp, int) and pp > 1) or (ep and isinstance(dp, int) and dp > 1)


def _explicit_dtype(loaded: LoadedDeployment, settings: Mapping[str, object] | None) -> bool:
    if settings is not None and "dtype" in settings:
        return settings["dtype"] not in (None, "auto")
    return "dtype" in loaded.deployment.model_fields_set


def check_startup(model: ModelFacts, base: RequestFacts, kv: KVOptions, *,
                  loaded: LoadedDeployment, catalog: Catalog, target: Target,
                  settings: Mapping[str, object] | None = None,
                  environ: Mapping[str, str] | None = None) -> ModelCheckResult:
    """Budget -> KV plan (with the memory left for the KV cache) -> start-up refusals.

    The budget and the KV plan read the same batch limits and memory fraction: the
    ``kv`` options' (from ``target``, :func:`selector.config.deployment_model`)."""
    d = loaded.deployment
    engine_name = target.engine.engine
    profile = startup_profile(catalog, engine_name)
    cc, device_name = target.cc, target.device_name
    total = (target.memory_bytes, target.memory_source) if target.memory_bytes else None
    assert target.serve is not None
    budget = None if _memory_not_modelled(settings) else plan_budget(
        model, profile, device=device_name, cc=cc, total=total, dtype=d.dtype,
        cudagraphs=kv.cudagraph_mode not in (None, "NONE"),
        gpu_memory_utilization=kv.gpu_memory_utilization,
        utilization_default=target.serve.utilization_default,
        max_num_batched_tokens=kv.max_num_batched_tokens, max_num_seqs=kv.max_num_seqs,
        kv_cache_memory_bytes=d.kv_cache_memory_bytes,
        reserved_bytes=int(d.reserved_memory_gib * 1024**3) or None, moe_backend=d.moe_backend)
    if budget is not None:
        kv = kv.model_copy(update={"available_kv_bytes": budget.available_kv_bytes})
    checked = check_model(
        model, base, engine=engine_name, attention_backend=d.attention_backend,
        backend_per_kind=d.attention_config.backend_per_kind,
        cudagraph_mode=target.cudagraph_mode, options=kv, catalog=catalog)
    issues: list[StartupIssue] = []
    found = dtype_issue(catalog, profile, dtype=d.dtype, explicit=_explicit_dtype(loaded, settings),
                        cc=cc, device=device_name)
    if found is not None:
        issues.append(found)
    found = max_model_len_issue(catalog, profile, raw_config(model),
                                max_model_len=d.max_model_len, environment=environ or {})
    if found is not None:
        issues.append(found)
    report = None
    if budget is not None:
        report = memory_report(budget, checked.plan if not issues else None, profile, catalog,
                               in_flight_tokens=kv.max_in_flight_tokens)
        if report.issue is not None:
            issues.append(report.issue)
    return replace(checked, memory=report, startup=tuple(issues))
