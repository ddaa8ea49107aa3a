"""The whole-model check plus what decides whether ``vllm serve`` starts: the memory
budget sizes the KV cache the planner negotiates, then vLLM's start-up refusals
(memory, dtype, max_model_len, tensor and decode context parallelism) are added with vLLM's words.

Model facts + deployment in, a :class:`~selector.modelcheck.ModelCheckResult` out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from selector.catalog import Catalog
from selector.config import LoadedDeployment, resolve_device
from selector.errors import InputError
from selector.kv import KVOptions
from selector.memory import (
    StartupIssue,
    device_total_memory,
    dtype_issue,
    max_model_len_issue,
    memory_report,
    plan_budget,
    raw_config,
    startup_profile,
    tensor_parallel_issue,
)
from selector.memory.encoder import EncoderReport, encoder_data, encoder_report
from selector.memory.profile import StartupProfile
from selector.modelcheck import ModelCheckResult
from selector.models import ModelFacts
from selector.pipeline.model import check_model
from selector.request import RequestFacts

__all__ = ["check_startup", "tensor_parallel_record"]


def _unsharded(loaded: LoadedDeployment, model: ModelFacts | None) -> ModelFacts | None:
    if model is not None:
        return model
    from selector.models import load_model

    reference = loaded.deployment.model or ""
    candidate = Path(loaded.path).parent / reference
    if ("/" in reference or reference.endswith(".json")) and candidate.exists():
        reference = str(candidate)
    try:
        return load_model(reference)
    except InputError:
        return None  # the regular path reports it


def tensor_parallel_record(loaded: LoadedDeployment, catalog: Catalog, engine: str | None,
                           model: ModelFacts | None) -> tuple[StartupIssue, str, str] | None:
    """vLLM's refusal of a tensor- / decode-context-parallel split (the TP size by the DCP
    size, the attention heads by the TP size, DCP's GQA limits, the padded vocabulary), as
    (issue, engine, device) -- before the model is sharded."""
    d = loaded.deployment
    tp, dcp = d.parallel.tensor_parallel_size, d.parallel.decode_context_parallel_size
    pcp = d.parallel.prefill_context_parallel_size
    if tp <= 1 and dcp <= 1:
        return None
    facts = _unsharded(loaded, model)
    if facts is None:
        return None
    profile = startup_profile(catalog, engine or d.engine)
    issue = tensor_parallel_issue(catalog, profile, facts, tp, dcp, pcp)
    if issue is None:
        return None
    _, _, device = resolve_device(d, catalog)
    return issue, profile.engine, device


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


def _default_batched_tokens(profile: StartupProfile, device: str, nominal: float | None) -> int:
    """vLLM's default ``max_num_batched_tokens`` for the GPU (the start-up profile's table)."""
    total = device_total_memory(device, nominal)
    return profile.scheduler_default(device, total[0] / 1024**3 if total else 0.0) \
        .max_num_batched_tokens


def _encoder(model: ModelFacts, loaded: LoadedDeployment, catalog: Catalog, engine: str | None,
             profile: StartupProfile, device: str, nominal: float | None,
             cc: int) -> EncoderReport | None:
    data = encoder_data(catalog, engine)
    if data is None:
        return None
    d = loaded.deployment
    return encoder_report(
        catalog, data, raw_config(model), cc=cc, dtype=d.dtype, model_name=d.model or "",
        mm_encoder_attn_backend=d.mm_encoder_attn_backend,
        limit_mm_per_prompt=d.limit_mm_per_prompt, mm_processor_kwargs=d.mm_processor_kwargs,
        disable_chunked_mm_input=d.disable_chunked_mm_input,
        max_num_batched_tokens=d.max_num_batched_tokens,
        default_max_num_batched_tokens=_default_batched_tokens(profile, device, nominal))


def check_startup(model: ModelFacts, base: RequestFacts, kv: KVOptions, *,
                  loaded: LoadedDeployment, catalog: Catalog, engine: str | None,
                  settings: Mapping[str, object] | None = None,
                  environ: Mapping[str, str] | None = None) -> ModelCheckResult:
    """Budget -> KV plan (with the memory left for the KV cache) -> start-up refusals."""
    d = loaded.deployment
    engine_name = engine or d.engine
    profile = startup_profile(catalog, engine_name)
    device, cc, device_name = resolve_device(d, catalog)
    nominal = device.memory_gib if device is not None else getattr(d.device, "memory_gib", None)
    encoder = _encoder(model, loaded, catalog, engine_name, profile, device_name, nominal, cc)
    batched = encoder.max_num_batched_tokens if encoder and encoder.max_num_batched_tokens \
        else d.max_num_batched_tokens
    budget = None if _memory_not_modelled(settings) else plan_budget(
        model, profile, device=device_name, cc=cc, nominal_gib=nominal, dtype=d.dtype,
        cudagraphs=d.cudagraph_mode != "NONE", gpu_memory_utilization=d.gpu_memory_utilization,
        max_num_batched_tokens=batched, max_num_seqs=d.max_num_seqs,
        kv_cache_memory_bytes=d.kv_cache_memory_bytes,
        reserved_bytes=int(d.reserved_memory_gib * 1024**3) or None, moe_backend=d.moe_backend)
    if budget is not None:
        kv = kv.model_copy(update={"available_kv_bytes": budget.available_kv_bytes})
    checked = check_model(
        model, base, engine=engine_name, attention_backend=d.attention_backend,
        backend_per_kind=d.attention_config.backend_per_kind,
        cudagraph_mode=d.cudagraph_mode, options=kv, catalog=catalog)
    issues: list[StartupIssue] = []
    found = dtype_issue(catalog, profile, dtype=d.dtype, explicit=_explicit_dtype(loaded, settings),
                        cc=cc, device=device_name)
    if found is not None:
        issues.append(found)
    found = max_model_len_issue(catalog, profile, raw_config(model),
                                max_model_len=d.max_model_len, environment=environ or {})
    if found is not None:
        issues.append(found)
    if encoder is not None:
        issues.extend(encoder.issues)
    report = None
    if budget is not None:
        report = memory_report(budget, checked.plan if not issues else None, profile, catalog,
                               in_flight_tokens=kv.max_in_flight_tokens)
        if report.issue is not None:
            issues.append(report.issue)
    return replace(checked, memory=report, startup=tuple(issues), encoder=encoder)
