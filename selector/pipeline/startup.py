"""The whole-model check plus what decides whether ``vllm serve`` starts: the memory
budget sizes the KV cache the planner negotiates, then vLLM's start-up refusals
(memory, dtype, max_model_len, tensor and decode context parallelism) are added with vLLM's words.

Model facts + deployment in, a :class:`~selector.check.model.ModelCheckResult` out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Literal

from selector.catalog import Catalog
from selector.check.model import ModelCheckResult
from selector.inputs.config import LoadedDeployment, Target, model_kinds
from selector.kv import KVOptions
from selector.kv.plan_types import ModelPlan
from selector.memory import (
    MemoryBudget,
    MemoryReport,
    StartupIssue,
    auto_fit_length,
    captured_graph_count,
    dtype_issue,
    max_model_len_issue,
    memory_report,
    plan_budget,
    raw_config,
    startup_profile,
    tensor_parallel_issue,
)
from selector.memory.encoder import (
    EncoderReport,
    encoder_data,
    encoder_memory_line,
    encoder_report,
)
from selector.memory.issues import layer_build_issues, startup_issue
from selector.memory.pp import PARTITION_ENV, PartitionRefusal, pp_stages
from selector.memory.profile import StartupProfile
from selector.memory.runner import runner_data, spec_decode_capture_sizes
from selector.memory.speculative import draft_weight_part
from selector.memory.startup import dtype_bytes
from selector.memory.weights import WeightPart
from selector.models import ModelFacts
from selector.pipeline.draft import DraftStage, draft_runner
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
    """Expert parallelism over data-parallel ranks places the experts in a way the budget
    does not model."""
    if not settings:
        return False
    dp = settings.get("data_parallel_size") or 1
    ep = bool(settings.get("enable_expert_parallel"))
    return ep and isinstance(dp, int) and dp > 1


def _explicit_dtype(loaded: LoadedDeployment, settings: Mapping[str, object] | None) -> bool:
    if settings is not None and "dtype" in settings:
        return settings["dtype"] not in (None, "auto")
    return "dtype" in loaded.deployment.model_fields_set


def _pp_size(loaded: LoadedDeployment, settings: Mapping[str, object] | None) -> int:
    size = settings.get("pipeline_parallel_size") if settings else None
    return size if isinstance(size, int) and size > 1 else \
        loaded.deployment.parallel.pipeline_parallel_size


def _encoder(model: ModelFacts, loaded: LoadedDeployment, catalog: Catalog, engine: str,
             cc: int, default_batched_tokens: int, kv: KVOptions) -> EncoderReport | None:
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
        default_max_num_batched_tokens=default_batched_tokens,
        max_model_len=kv.max_model_len, max_num_seqs=kv.max_num_seqs,
        dtype_bytes=dtype_bytes(d.dtype))


def model_capture_sizes(catalog: Catalog, target: Target, model: ModelFacts, kv: KVOptions,
                        decode_query_len: int) -> tuple[int, ...]:
    """The CUDA-graph capture sizes of the deployment: the target's, unless the model's
    ``verify_and_update_config`` sets ``max_cudagraph_capture_size`` (gpt-oss's 1024:
    ``defaults.yaml`` ``cudagraph_capture.max_size_by_architecture``)."""
    assert target.serve is not None
    capture = catalog.engine_defaults(target.engine.engine).cudagraph_capture
    if model.architecture not in capture.max_size_by_architecture \
            or kv.cudagraph_mode in (None, "NONE"):
        return target.serve.cudagraph_capture_sizes
    return capture.sizes(target.serve.max_num_seqs, target.serve.max_num_batched_tokens,
                         target.cc, decode_query_len, architecture=model.architecture)


def check_startup(model: ModelFacts, base: RequestFacts, kv: KVOptions, *,
                  loaded: LoadedDeployment, catalog: Catalog, target: Target,
                  settings: Mapping[str, object] | None = None,
                  environ: Mapping[str, str] | None = None,
                  draft: DraftStage | None = None) -> ModelCheckResult:
    """Budget -> KV plan (with the memory left for the KV cache) -> start-up refusals;
    with pipeline parallelism one budget and KV plan per stage, each of its own layers.

    The budget and the KV plan read the same batch limits and memory fraction: the
    ``kv`` options' (from ``target``, :func:`selector.inputs.config.deployment_model`). ``draft``:
    the speculative draft (its layers are in ``model``): their backend, its weights and
    refusals."""
    d = loaded.deployment
    engine_name = target.engine.engine
    profile = startup_profile(catalog, engine_name)
    cc, device_name = target.cc, target.device_name
    total = (target.memory_bytes, target.memory_source) if target.memory_bytes else None
    assert target.serve is not None
    encoder = _encoder(model, loaded, catalog, engine_name, cc,
                       default_batched_tokens=target.serve.max_num_batched_tokens, kv=kv)
    if encoder is not None and encoder.max_num_batched_tokens:  # vLLM's raise of the default:
        # the budget, the KV fit and the report all read the raised value
        kv = kv.model_copy(update={"max_num_batched_tokens": encoder.max_num_batched_tokens})
    draft_weights = _draft_weights(draft, model, profile, d.dtype, cc, d.moe_backend,
                                   d.quantization)
    runner = _model_runner(catalog, engine_name, model, draft, environ)
    runners = runner_data(catalog, engine_name)
    base_sizes = model_capture_sizes(catalog, target, model, kv,
                                     1 + d.speculative.num_speculative_tokens)
    capture_sizes = base_sizes if runners is None or runner is None \
        else spec_decode_capture_sizes(
            runners, base_sizes, runner=runner,
            cudagraph_mode=kv.cudagraph_mode,
            decode_query_len=1 + d.speculative.num_speculative_tokens)
    budget_of = partial(
        plan_budget, model, profile, device=device_name, cc=cc, total=total, dtype=d.dtype,
        cudagraphs=kv.cudagraph_mode not in (None, "NONE"),
        gpu_memory_utilization=kv.gpu_memory_utilization,
        utilization_default=target.serve.utilization_default,
        max_num_batched_tokens=kv.max_num_batched_tokens, max_num_seqs=kv.max_num_seqs,
        kv_cache_memory_bytes=d.kv_cache_memory_bytes,
        reserved_bytes=int(d.reserved_memory_gib * 1024**3) or None, moe_backend=d.moe_backend,
        quantization=d.quantization, cpu_offload_gib=d.cpu_offload_gb,
        max_model_len=kv.max_model_len, block_size=kv.block_size,
        captured_graphs=captured_graph_count(kv.cudagraph_mode, capture_sizes, kv.max_num_seqs),
        encoder_profile=encoder_memory_line(encoder, encoder_data(catalog, engine_name)),
        model_runner=runner, pooling="pooling" in model_kinds(model, target.engine))

    def budget_for(stage: tuple[int, int] | None) -> MemoryBudget | None:
        last = stage is None or stage[1] == decoder_layers  # the draft runs on the last stage
        return budget_of(stage=stage, extra_weights=(draft_weights,)
                         if draft_weights is not None and last else ())

    def solve(facts: ModelFacts, *, options: KVOptions) -> ModelCheckResult:
        return check_model(facts, base, engine=target.engine, attention_backend=d.attention_backend,
                           backend_per_kind=d.attention_config.backend_per_kind,
                           cudagraph_mode=options.cudagraph_mode, options=options, catalog=catalog,
                           draft_backend=draft.backend if draft is not None else None,
                           platform=target.platform)

    issues: list[StartupIssue] = []
    pp = _pp_size(loaded, settings)
    decoder_layers = sum(1 for layer in model.layers if not layer.draft)
    split = pp_stages(decoder_layers, pp, (environ or {}).get(PARTITION_ENV)) if pp > 1 \
        else ((0, decoder_layers),)
    if isinstance(split, PartitionRefusal):
        issues.append(startup_issue(catalog, profile.memory.pp_partition_codes[split.check],
                                    ("parallel", "pipeline_parallel_size"), **split.values))
        split = ()
    modelled = not _memory_not_modelled(settings) and bool(split)
    stages = [_Stage(model if pp == 1 else _stage_model(model, start, end), budget,
                     None if pp == 1 else (start, end, pp))
              for start, end in split
              for budget in [budget_for(None if pp == 1 else (start, end)) if modelled
                             else None]]
    whole = stages[0].budget if pp == 1 and stages else None
    if whole is not None:
        kv = kv.model_copy(update={"available_kv_bytes": whole.available_kv_bytes})
    checked = solve(model, options=kv)
    for selection in checked.selections:  # the selected backends build the layers
        if selection.result.selected is not None and not selection.own_code:
            issues.extend(issue for issue in layer_build_issues(
                catalog, checked.engine, checked.platform, selection.result.selected,
                {**selection.result.facts, **selection.result.derived}, model.build_checks)
                if issue not in issues)
    auto = d.max_model_len == "auto" and modelled
    auto_from = kv.max_model_len if auto else None
    plans = [checked.plan if pp == 1 else _stage_plan(solve, stage, kv) for stage in stages]
    if auto and auto_from is not None:  # vLLM's auto-fit, before the fit check: the
        # length every stage fits (the smallest of the workers'), kv_cache_planning.py:1337-1410
        fits = [auto_fit_length(stage.budget, plan, profile,
                                in_flight_tokens=kv.max_in_flight_tokens)
                for stage, plan in zip(stages, plans, strict=True) if stage.budget is not None]
        fitted = min((f for f in fits if f is not None), default=None)
        if fitted and fitted < auto_from:
            kv = kv.model_copy(update={"max_model_len": fitted})
            checked = solve(model, options=kv.model_copy(update={
                "available_kv_bytes": whole.available_kv_bytes if whole else None}))
            plans = [checked.plan if pp == 1 else _stage_plan(solve, stage, kv)
                     for stage in stages]
    found = dtype_issue(catalog, profile, dtype=d.dtype, explicit=_explicit_dtype(loaded, settings),
                        cc=cc, device=device_name)
    if found is not None:
        issues.append(found)
    found = max_model_len_issue(catalog, profile, raw_config(model),
                                max_model_len=None if d.max_model_len == "auto" else d.max_model_len,
                                environment=environ or {})
    if found is not None:
        issues.append(found)
    if encoder is not None:
        issues.extend(encoder.issues)
    draft_report = draft.report(
        catalog, draft_weights, checked, capture_sizes=capture_sizes,
        target_tp=d.parallel.tensor_parallel_size, target_kv_cache_dtype=d.kv_cache_dtype,
    ) if draft is not None else None
    if draft_report is not None:
        issues.extend(draft_report.issues)
    reports = [(memory_report(stage.budget, plan if not issues else None, profile, catalog,
                              in_flight_tokens=kv.max_in_flight_tokens, auto_fit_from=auto_from,
                              platform=checked.platform),
                stage.label)
               for stage, plan in zip(stages, plans, strict=True) if stage.budget is not None]
    report = _worst(reports)
    if report is not None and report.issue is not None:
        issues.append(report.issue)
    if pp > 1 and checked.plan is not None:  # every stage's pool holds the reported one's blocks
        checked = replace(checked, plan=checked.plan.model_copy(
            update={"capacity": report.capacity if report is not None else None}))
    return replace(checked, memory=report, startup=tuple(issues), encoder=encoder,
                   draft=draft_report)


def _model_runner(catalog: Catalog, engine: str, model: ModelFacts, draft: DraftStage | None,
                  environ: Mapping[str, str] | None) -> Literal["v1", "v2"] | None:
    """The GPU model runner vLLM starts (the draft's, which the same rule chose:
    selector/memory/runner.py); None where the release has no model-runner.yaml."""
    if draft is not None:
        return draft.runner
    runners = runner_data(catalog, engine)
    return None if runners is None else draft_runner(runners, model, None, environ).runner


def _draft_weights(draft: DraftStage | None, model: ModelFacts, profile: StartupProfile,
                   dtype: str, cc: int, moe_backend: str | None,
                   quantization: str | None) -> WeightPart | None:
    """The speculative draft's weights on one GPU (None: no draft layers)."""
    if draft is None or draft.data is None or not any(layer.draft for layer in model.layers):
        return None
    return draft_weight_part(draft.data, draft.request, model, draft.draft, profile,
                             dtype_bytes=4 if dtype == "float32" else 2, cc=cc, moe_backend=moe_backend,
                             quantization=quantization)


@dataclass(frozen=True)
class _Stage:
    model: ModelFacts
    budget: MemoryBudget | None
    split: tuple[int, int, int] | None
    """(first layer, end, pipeline size); None without pipeline parallelism."""

    @property
    def label(self) -> str | None:
        if self.split is None:
            return None
        start, end, size = self.split
        return (f"pipeline stage holding layers {start}-{end - 1} of {size} stages"
                if end > start else f"pipeline stage with no layers of {size} stages")


def _stage_model(model: ModelFacts, start: int, end: int) -> ModelFacts:
    """One stage's decoder layers; the last stage holds the speculative draft's too."""
    decoder = tuple(layer for layer in model.layers if not layer.draft)
    draft = tuple(layer for layer in model.layers if layer.draft) if end == len(decoder) else ()
    return model.model_copy(update={"layers": (*decoder[start:end], *draft)})


def _stage_plan(solve: Callable[..., ModelCheckResult], stage: _Stage,
                kv: KVOptions) -> ModelPlan | None:
    """The KV plan of one stage's own layers with its own memory."""
    if stage.budget is None or not stage.model.layers:
        return None
    options = kv.model_copy(update={"available_kv_bytes": stage.budget.available_kv_bytes})
    return solve(stage.model, options=options).plan


def _worst(reports: list[tuple[MemoryReport, str | None]]) -> MemoryReport | None:
    """The stage vLLM refuses first, else the one with the fewest KV blocks (vLLM sizes
    every worker's pool to the smallest: kv_cache_planning.py, get_kv_cache_configs)."""
    if not reports:
        return None
    refused = [(report, label) for report, label in reports if report.issue is not None]

    def blocks(item: tuple[MemoryReport, str | None]) -> int:
        cap = item[0].capacity
        return cap.num_blocks if cap is not None and cap.num_blocks is not None else 1 << 62

    report, label = refused[0] if refused else min(reports, key=blocks)
    return report if label is None else report.model_copy(update={"pp_stage": label})
