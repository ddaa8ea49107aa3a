"""The speculative draft of a model deployment through the stages: the draft's config
read once (an EAGLE draft's or a draft model's config.json; MTP layers come from the
target's config), its layers appended to the model's (``LayerFacts.draft``) so that the
solver selects their backend and the KV plan groups them with the target's, and the
draft's runner, backend rule, weights and refusals (:mod:`selector.memory.speculative`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from selector.catalog import Catalog, CatalogError
from selector.check.model import ModelCheckResult
from selector.errors import InputError
from selector.inputs.config import LoadedDeployment
from selector.memory.issues import StartupIssue, startup_issue
from selector.memory.runner import RunnerChoice, RunnerData, runner_data, runner_of_model
from selector.memory.speculative import (
    DraftReport,
    DraftRequest,
    SpeculativeData,
    draft_backend,
    draft_layers,
    draft_report,
    draft_tp_refusal,
    is_mtp,
    key_refusal,
    speculative_data,
    unknown_backend_message,
)
from selector.memory.weights import WeightPart
from selector.models import ModelFacts, load_model, parse_config
from selector.models.presets import preset_dir

__all__ = ["DraftStage", "draft_request", "draft_runner", "draft_stage"]


@dataclass(frozen=True)
class DraftStage:
    """The model with the draft's layers, the backend those layers are built with, the
    draft's own facts (an EAGLE draft, a draft model) and what the report says of it."""

    model: ModelFacts
    backend: str | None
    draft: ModelFacts | None
    request: DraftRequest
    data: SpeculativeData
    runner: Literal["v1", "v2"]
    runner_refusal: str | None
    runner_code: str
    """The reason code of the runner's refusal (``model-runner.yaml``)."""
    backend_rule: str
    architecture: str | None
    issue: StartupIssue | None = None
    """vLLM's refusal before any draft layer is built (an unknown backend name)."""

    def report(self, catalog: Catalog, weights: WeightPart | None = None,
               checked: ModelCheckResult | None = None, capture_sizes: tuple[int, ...] = (),
               target_tp: int = 1, target_kv_cache_dtype: str | None = None) -> DraftReport:
        """What the report says of the draft (its weights: ``draft_weight_part``; the
        backends selected for its layers and their KV-cache groups: ``checked``)."""
        layers = tuple(layer for layer in self.model.layers if layer.draft)
        selected: tuple[str, ...] = ()
        thresholds: tuple[int | None, ...] = ()
        groups: tuple[int, ...] = ()
        per_token = 0
        if checked is not None:
            selected = tuple(dict.fromkeys(s.result.selected for s in checked.selections
                                           if s.draft and s.result.selected))
            thresholds = tuple(s.result.runtime.reorder_batch_threshold
                               for s in checked.selections
                               if s.draft and s.result.runtime is not None)
            indices = {layer.index for layer in layers}
            plan = checked.plan
            for group in plan.groups if plan is not None else ():
                specs = group.layer_specs or (group.spec,) * len(group.layer_indices)
                held = [spec for index, spec in zip(group.layer_indices, specs, strict=False)
                        if index in indices and spec is not None]
                if held:
                    groups += (group.index,)
                    per_token += sum(spec.page_size_bytes // max(spec.block_size, 1)
                                     for spec in held)
        report = draft_report(catalog, self.data, self.request, runner=self.runner,
                              runner_refusal=self.runner_refusal,
                              runner_code=self.runner_code, layers=layers,
                              architecture=self.architecture, backend=self.backend,
                              backend_rule=self.backend_rule, weights=weights,
                              selected=selected, groups=groups, kv_bytes_per_token=per_token,
                              thresholds=thresholds, capture_sizes=capture_sizes,
                              target_tp=target_tp, target_kv_cache_dtype=target_kv_cache_dtype)
        if self.issue is not None:
            report = report.model_copy(update={"issues": (*report.issues, self.issue)})
        return report


def draft_request(loaded: LoadedDeployment) -> DraftRequest | None:
    """The deployment's draft (None: no speculative decoding, or only the number of
    speculative tokens is given)."""
    spec = loaded.deployment.speculative
    if spec.method is None and spec.model is None:
        return None
    keys = {"parallel_drafting": spec.parallel_drafting,
            "enable_adaptive_verification": spec.adaptive_verification,
            "kv_cache_dtype": spec.kv_cache_dtype,
            "draft_tensor_parallel_size": spec.draft_tensor_parallel_size,
            "quantization": spec.quantization}
    return DraftRequest(method=spec.method or ("draft_model" if spec.model else None),
                        model=spec.model, attention_backend=spec.attention_backend,
                        num_speculative_tokens=spec.num_speculative_tokens, keys=keys)


_DRAFTS = "drafts"
"""``schemas/models/drafts/ORG--NAME.json``: recorded draft config.json files (SOURCES.md)."""


def _draft_path(loaded: LoadedDeployment, name: str) -> Path | None:
    candidate = Path(loaded.path).parent / name
    for path in (candidate, Path(name)):
        if path.is_dir() and (path / "config.json").is_file():
            return path / "config.json"
        if path.is_file():
            return path
    recorded = preset_dir() / _DRAFTS / (name.strip().strip("/").replace("/", "--", 1) + ".json")
    if recorded.is_file():
        return recorded
    lowered = {p.name.lower(): p for p in (preset_dir() / _DRAFTS).glob("*.json")}
    return lowered.get(recorded.name.lower())


def _read_draft(loaded: LoadedDeployment, data: SpeculativeData, request: DraftRequest
                ) -> ModelFacts | None:
    """The draft's facts from its config.json (an EAGLE draft read as the decoder class
    it builds, ``speculative.yaml`` ``eagle``); None when it is not found."""
    assert request.model is not None
    path = _draft_path(loaded, request.model)
    if path is None:
        return None
    if request.method == "draft_model":
        return load_model(str(path))
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"the draft's config.json cannot be read: {exc}", file=str(path),
                         field="speculative.model") from None
    archs = [a for a in raw.get("architectures") or [] if a in data.eagle]
    if not archs:
        return None
    read = dict(raw, architectures=[data.eagle[archs[0]].reads_as])
    facts = parse_config(read, file=str(path))
    return facts.model_copy(update={"architecture": archs[0]}).with_config(raw)


def draft_stage(loaded: LoadedDeployment, catalog: Catalog, engine: str, whole: ModelFacts,
                environ: Mapping[str, str] | None) -> DraftStage | None:
    """The draft of a model deployment (None: no draft asked, or the engine has no data)."""
    request = draft_request(loaded)
    if request is None:
        return None
    data = speculative_data(catalog, engine)
    runners = runner_data(catalog, engine)
    if data is None or runners is None:
        raise CatalogError(f"{engine}: no speculative.yaml / model-runner.yaml in its profile chain")
    choice = draft_runner(runners, whole, request, environ)
    runner, refusal = choice.runner, choice.refusal
    target_backend = loaded.deployment.attention_backend
    unknown = unknown_backend_message(data, request.attention_backend or "")
    refused: tuple[str, tuple[str, ...], str] | None = (
        (data.codes.unknown_backend, ("speculative", "attention_backend"), unknown)
        if unknown is not None else None)
    if refused is None and (keyed := key_refusal(data, request)) is not None:
        refused = (data.codes.key_refused, ("speculative",), keyed)
    tp = loaded.deployment.parallel.tensor_parallel_size
    if refused is None and (tp_refused := draft_tp_refusal(data, request, tp)) is not None:
        refused = (data.codes.key_refused, ("speculative", "draft_tensor_parallel_size"),
                   tp_refused)
    if refused is not None:
        code, field, message = refused
        issue = startup_issue(catalog, code, field, message=message)
        return DraftStage(model=whole, backend=None, draft=None, request=request, data=data,
                          runner=runner, runner_refusal=None,
                          runner_code=runners.codes.refusal, backend_rule="",
                          architecture=None, issue=issue)
    backend, rule = draft_backend(data, request, runner, target_backend)
    draft = None if is_mtp(request) or request.model is None else \
        _read_draft(loaded, data, request)
    layers, architecture = draft_layers(data, request, whole, draft)
    model = whole.model_copy(update={"layers": (*whole.layers, *layers)}) if layers else whole
    return DraftStage(model=model, backend=backend, draft=draft, request=request, data=data,
                      runner=runner, runner_refusal=refusal, runner_code=runners.codes.refusal,
                      backend_rule=rule, architecture=architecture)


def draft_runner(runners: RunnerData, model: ModelFacts, request: DraftRequest | None,
                 environ: Mapping[str, str] | None) -> RunnerChoice:
    """The GPU model runner vLLM starts for the model and its draft (``model-runner.yaml``,
    the rule the memory budget reads too)."""
    return runner_of_model(runners, model, method=request.method if request else None,
                           keys=request.keys if request else None, environ=environ)
