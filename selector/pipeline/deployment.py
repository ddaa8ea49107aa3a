"""A deployment through the stages: request facts, then selection for its single layer or
every layer of its model (with the KV plan and, when asked, vLLM's start-up checks).

The one place that decides between a single-layer deployment (``layer:``) and a whole
model (``model:``); every command takes a :class:`Solved` from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import selector.pipeline as stages  # a whole model's stages load on first use (_LAZY there)
from selector.catalog import Catalog
from selector.errors import InputError
from selector.inputs.config import (
    LoadedDeployment,
    Target,
    deployment_facts,
    deployment_model,
    deployment_whole_model,
    resolve_target,
)
from selector.memory import StartupIssue, dcp_issue, dtype_issue, kv_heads_issue, startup_profile
from selector.memory.issues import layer_build_issues
from selector.request import RequestFacts, layer_request
from selector.result import SolveResult
from selector.solver import solve

if TYPE_CHECKING:
    from selector.check.model import ModelCheckResult
    from selector.models import LayerFacts, ModelFacts

__all__ = ["LayerRequest", "Solved", "layer_of", "no_attention_layer", "solve_deployment"]


@dataclass(frozen=True)
class Solved:
    """One deployment through the stages, on its own device.

    Exactly one of ``layer`` (a single-layer deployment), ``model`` (a model deployment:
    per-layer selections and the KV plan) or ``refused`` (vLLM refuses to split the
    model's heads over the tensor-parallel ranks, before any selection) is set.
    """

    loaded: LoadedDeployment
    engine: str
    device: str
    layer: SolveResult | None = None
    model: ModelCheckResult | None = None
    refused: StartupIssue | None = None
    startup: tuple[StartupIssue, ...] = ()
    """A single layer's start-up refusals (the model's are in ``model.startup``)."""

    @property
    def valid(self) -> bool:
        """The complete verdict: vLLM would start it (selection, KV plan, CUDA-graph mode,
        the start-up checks and the architecture; what ``check``'s record says)."""
        if self.layer is not None:
            runtime = self.layer.runtime
            refused = runtime is not None and runtime.cudagraph_mode == "ERROR"
            return self.layer.valid and not self.startup and not refused
        return self.model is not None and self.model.valid


def _layer_startup(loaded: LoadedDeployment, catalog: Catalog, target: Target, *,
                   split: bool, startup: bool) -> tuple[StartupIssue, ...]:
    """A single layer's start-up refusals: vLLM's refusal of the TP / DCP split (``split``;
    the layer stands for the model: its heads are the model's), then the dtype on this GPU
    (``startup``)."""
    d = loaded.deployment
    cc, device = target.cc, target.device_name
    profile = startup_profile(catalog, target.engine.engine)
    layer, parallel = d.layer, d.parallel
    refused = dcp_issue(catalog, profile, tp_size=parallel.tensor_parallel_size,
                        dcp_size=parallel.decode_context_parallel_size,
                        pcp_size=parallel.prefill_context_parallel_size,
                        num_heads=layer.num_heads,
                        num_kv_heads=layer.num_kv_heads or layer.num_heads,
                        use_mla=layer.mla is not None) if split else None
    if split and refused is None and layer.mla is None:  # then the model is built
        refused = kv_heads_issue(catalog, profile, tp_size=parallel.tensor_parallel_size,
                                 num_kv_heads=layer.num_kv_heads or layer.num_heads)
    dtype = dtype_issue(catalog, profile, dtype=d.dtype, explicit="dtype" in d.model_fields_set,
                        cc=cc, device=device) if startup else None
    return tuple(issue for issue in (refused, dtype) if issue is not None)


def solve_deployment(loaded: LoadedDeployment, catalog: Catalog, *, engine: str | None = None,
                     model: ModelFacts | None = None, kv_options: Mapping[str, Any] | None = None,
                     settings: Mapping[str, object] | None = None,
                     environ: Mapping[str, str] | None = None, suggest: bool = True,
                     startup: bool = True, refuse_split: bool = True) -> Solved:
    """Solve one loaded deployment on its own device.

    ``engine`` (``--engine``) wins over the file's ``engine:`` and the environment: the
    deployment's :class:`~selector.inputs.config.Target` is resolved once, here, and validated
    against that engine. For a model deployment: ``model`` is the whole model already
    read (e.g. with ``--hf-overrides`` applied; else ``model:`` is read, once), ``kv_options``
    adds KV-planner options, ``settings`` / ``environ`` are the command line's.
    ``suggest``: the solver's fix suggestions; ``startup``: vLLM's start-up checks
    (the memory budget sizes the KV cache); ``refuse_split``: vLLM's refusal of a
    tensor- / decode-context-parallel split (a model's heads by the TP size, DCP's limits),
    before sharding.
    """
    d = loaded.deployment
    target = resolve_target(loaded, catalog, engine)
    device = target.device_name
    if d.model is None:
        facts = deployment_facts(loaded, catalog, target)
        result = solve(facts, engine=target.engine, attention_backend=d.attention_backend,
                       cudagraph_mode=target.cudagraph_mode, suggest=suggest, catalog=catalog)
        issues = _layer_startup(loaded, catalog, target, split=refuse_split, startup=startup)
        if startup and result.selected is not None:  # the selected backend builds the layer
            issues += tuple(layer_build_issues(catalog, result.engine, result.platform,
                                               result.selected,
                                               {**result.facts, **result.derived}))
        return Solved(loaded=loaded, engine=result.engine, device=device, layer=result,
                      startup=issues)
    whole = model or deployment_whole_model(loaded)
    if refuse_split:
        split = stages.tensor_parallel_record(loaded, catalog, target, whole)
        if split is not None:
            issue, engine_name, device = split
            return Solved(loaded=loaded, engine=engine_name, device=device, refused=issue)
    draft = stages.draft_stage(loaded, catalog, target.engine.engine, whole, environ)
    if draft is not None:  # the draft's layers join the model's (their KV joins the groups)
        whole = draft.model
    facts_model, base, kv = deployment_model(loaded, catalog, target, whole)
    if kv_options:
        kv = kv.model_copy(update=dict(kv_options))
    if startup:
        checked = stages.check_startup(facts_model, base, kv, loaded=loaded, catalog=catalog,
                                target=target, settings=settings, environ=environ,
                                draft=draft)
    else:
        checked = stages.check_model(facts_model, base, engine=target.engine,
                              attention_backend=d.attention_backend,
                              backend_per_kind=d.attention_config.backend_per_kind,
                              cudagraph_mode=kv.cudagraph_mode, options=kv, catalog=catalog,
                              draft_backend=draft.backend if draft is not None else None,
                              platform=target.platform)
    return Solved(loaded=loaded, engine=checked.engine, device=device, model=checked)


def no_attention_layer(solved: Solved, command: str) -> InputError | None:
    """The error of a model deployment without an attention layer, for a command that runs
    attention kernels (``smoke``, ``bench``): vLLM builds no attention backend for its
    state (Mamba, GDN) or cache-less layers. None when some layer is attention."""
    if solved.model is None or solved.model.selections:
        return None
    kinds = sorted({layer.kind for layer in solved.model.model.layers})
    return InputError(
        f"the model has no attention layer (its layers are {', '.join(kinds)}): vLLM builds "
        f"no attention backend for them, so `{command}` has no attention kernel to run",
        file=str(solved.loaded.path),
        hint="give a model with attention layers; `attn-select check` shows its KV plan")


@dataclass(frozen=True)
class LayerRequest:
    """The request of one attention layer of a deployment (for ``explain``)."""

    facts: RequestFacts
    attention_backend: str | None
    """The backend the deployment pins for this layer (None: automatic selection)."""
    layer: int | None = None
    """The model layer's index (None: a single-layer deployment)."""
    kind: str | None = None
    """The model layer's spec kind (None: a single-layer deployment)."""
    model_backend: str | None = None
    """The backend the layer's own module passes (``LayerFacts.model_backend``): the
    layer's, unchecked, whatever ``attention_backend`` says."""
    sink_backend: str | None = None
    """The backend the layer's module binds for its learnable sink where the choice cannot
    apply sinks (``LayerFacts.sink_backend``)."""


def _model_layer(model: ModelFacts, layer: int | None) -> tuple[int, LayerFacts]:
    attention = [i for i, facts_of in enumerate(model.layers) if facts_of.is_attention]
    if not attention:
        raise InputError("the model has no attention layer to explain", field="model")
    index = attention[0] if layer is None else layer
    if not 0 <= index < len(model.layers):
        raise InputError(f"layer {index} does not exist (the model has {len(model.layers)} layers)",
                         field="--layer", hint=f"give 0 to {len(model.layers) - 1}")
    chosen = model.layers[index]
    if not chosen.is_attention:
        raise InputError(f"layer {index} is a {chosen.kind} layer, not attention",
                         field="--layer", hint="pick an attention layer (see `attn-select check`)")
    return index, chosen


def layer_of(loaded: LoadedDeployment, catalog: Catalog, layer: int | None = None, *,
             target: Target | None = None, model_facts: ModelFacts | None = None
             ) -> LayerRequest:
    """The request of one layer: the single layer of a ``layer:`` deployment, or layer
    ``layer`` of a model (default: its first attention layer). ``target``: the
    deployment's resolved target (resolved here, with the file's engine, when not given);
    ``model_facts`` replaces the model read from the deployment (a command line's,
    ``--hf-overrides`` applied)."""
    d = loaded.deployment
    target = target or resolve_target(loaded, catalog)
    if d.model is None:
        if layer is not None:
            raise InputError("--layer needs a deployment with a `model:`", field="--layer")
        return LayerRequest(facts=deployment_facts(loaded, catalog, target),
                            attention_backend=d.attention_backend)
    model, base, _ = deployment_model(loaded, catalog, target, model_facts)
    index, chosen = _model_layer(model, layer)
    per_kind = d.attention_config.backend_per_kind
    rewritten = stages.rewritten_cache_dtypes(model, base, engine=target.engine,
                                              attention_backend=d.attention_backend,
                                              backend_per_kind=per_kind, catalog=catalog,
                                              platform=target.platform)
    if index in rewritten:  # an earlier layer wrote its stored dtype back (check_model)
        chosen = chosen.model_copy(update={"kv_cache_dtype": rewritten[index]})
    return LayerRequest(facts=layer_request(base, chosen, model),
                        attention_backend=per_kind.get(chosen.spec_kind, d.attention_backend),
                        layer=index, kind=chosen.spec_kind, model_backend=chosen.model_backend,
                        sink_backend=chosen.sink_backend)
