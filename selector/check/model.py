"""The whole-model check's result: every attention layer's backend selected by the
solver with that layer's own facts, then the KV cache negotiated across all layers
(:func:`selector.pipeline.model.check_model` chains the two), and what the KV planner
reads of a selected backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from selector.catalog import Catalog, EngineData
from selector.kv import BackendKVFacts, ModelPlan
from selector.memory.encoder import EncoderReport
from selector.memory.speculative import DraftReport
from selector.memory.startup import MemoryReport, StartupIssue
from selector.models import ModelFacts
from selector.request import RequestFacts
from selector.result import SolveResult
from selector.solver import derive_facts, kernel_block_sizes_of

__all__ = ["ArchitectureNote", "LayerSelection", "ModelCheckResult", "architecture_notes",
           "backend_kv_facts"]


@dataclass(frozen=True)
class ArchitectureNote:
    """vLLM's word on the model's architecture for the engine release: an error (AS131:
    the release does not support it; AS133: it refuses the model at start-up) or the
    warning AS132 (supported, but no family maps its layers)."""

    level: Literal["error", "warning"]
    code: str
    message: str
    hint: str


@dataclass(frozen=True)
class LayerSelection:
    """One distinct set of attention facts and the layers that share it."""

    layers: tuple[int, ...]
    kind: str
    facts: RequestFacts
    result: SolveResult
    draft: bool = False
    """Layers of the speculative draft (their backend follows the draft's rule)."""
    own_code: bool = False
    """The model's own layer code chose the backend (``model-driven.yaml``): it builds the
    layers itself, so the profile's layer-build checks of that backend do not apply."""


@dataclass(frozen=True)
class ModelCheckResult:
    """The model as groups: per-layer selections and the negotiated KV plan."""

    model: ModelFacts
    engine: str
    selections: tuple[LayerSelection, ...]
    plan: ModelPlan | None
    """None when some layer has no valid backend (nothing to negotiate)."""
    memory: MemoryReport | None = None
    """The start-up memory budget and KV fit (None when the device memory is unknown)."""
    startup: tuple[StartupIssue, ...] = ()
    """Start-up refusals besides the KV plan's (dtype, max_model_len, memory)."""
    architecture: tuple[ArchitectureNote, ...] = ()
    """vLLM's word on the architecture (:func:`architecture_notes`)."""
    encoder: EncoderReport | None = None
    """The multimodal encoder's start-up: its attention backend, tokens per item, vLLM's
    raise of the batched tokens (None: no vision encoder, or the engine has no data)."""
    draft: DraftReport | None = None
    """The speculative draft at start-up: its runner, layers, backend rule and weights
    (None: no draft asked, or the engine has no data)."""
    platform: str | None = None
    """The platform the engine was loaded for (None: the catalog's default platform)."""

    @property
    def cudagraph_refused(self) -> bool:
        """vLLM raises while resolving the CUDA-graph mode (the plan's resolution)."""
        plan = self.plan
        return plan is not None and plan.cudagraph is not None and bool(plan.cudagraph.error)

    @property
    def valid(self) -> bool:
        """The complete verdict: vLLM starts the model (every layer selected, the KV plan
        and CUDA-graph mode resolved, no start-up refusal, the architecture accepted)."""
        return (all(s.result.valid for s in self.selections)
                and (self.plan is None or self.plan.ok) and not self.startup
                and not self.cudagraph_refused
                and not any(note.level == "error" for note in self.architecture))

    def selection_of(self, layer: int) -> LayerSelection:
        for selection in self.selections:
            if layer in selection.layers:
                return selection
        raise KeyError(layer)


def _local_facts(result: SolveResult, catalog: Catalog) -> dict[str, Any]:
    """The selected backend's local facts (``kv_packing``, ``canonical_kv_cache_dtype``)."""
    assert result.selected is not None
    spec = catalog.engine(result.engine, result.platform).backends[result.selected]
    scope = {**result.facts, **result.derived}
    derive_facts(spec.facts, scope)
    return scope


def backend_kv_facts(result: SolveResult, catalog: Catalog) -> BackendKVFacts:
    """What the KV planner needs of a layer's selected backend (kernel block sizes,
    layouts, CUDA-graph support, packing), from the solver's result."""
    assert result.selected is not None and result.runtime is not None
    spec = catalog.engine(result.engine, result.platform).backends[result.selected]
    scope = {**result.facts, **result.derived}
    sizes = kernel_block_sizes_of(spec, scope)
    local = _local_facts(result, catalog)
    packing = local.get("kv_packing") or "dense"
    runtime = result.runtime
    aliases = catalog.layout_aliases  # engines before the 5-D layouts name them NHD / HND
    layouts = (tuple(aliases.get(x, x) for x in runtime.kv_layouts)
               if runtime.kv_layouts else None)
    fa_trace = runtime.fact("fa_version")
    return BackendKVFacts(
        name=spec.name,
        class_name=spec.class_name,
        kernel_block_sizes=sizes,
        supported_layouts=layouts,
        cudagraph_support=runtime.cudagraph_support,
        reorder_batch_threshold=runtime.reorder_batch_threshold,
        is_mla=spec.family == "mla",
        packing=packing,
        canonical_kv_cache_dtype=local.get("canonical_kv_cache_dtype"),
        fa_version=fa_trace.value if fa_trace else None,
        exact_size_alignment=catalog.engine(
            result.engine, result.platform).profile.kv_spec.exact_size_alignment,
    )


def architecture_notes(model: ModelFacts, engine: EngineData,
                       catalog: Catalog) -> tuple[ArchitectureNote, ...]:
    """vLLM's verdict on the model's architecture for ``engine``: AS133 for each refusal
    the model facts record, AS131 when the release's registry refuses the architecture,
    AS132 when it supports it but no family maps its layers."""
    from selector.models.arch_registry import architecture_status, load_model_registry

    refused = catalog.cli_codes["AS133"]
    notes = [ArchitectureNote("error", "AS133",
                              f"{engine.engine} refuses the model at start-up: {text}",
                              refused.hint)
             for text in model.refusals]
    registry = load_model_registry(engine.directory)
    if registry is None:
        return tuple(notes)
    status = architecture_status(model.architectures or (model.architecture,), registry,
                                 engine.engine)
    if status.status == "supported":
        if model.family is None:
            from selector.models.families import unmapped_reason

            unmapped = catalog.cli_codes["AS132"]
            reason = unmapped_reason(status.architecture, registry.table_of(status.architecture))
            notes.append(ArchitectureNote(
                "warning", "AS132", f"{status.architecture} (vLLM module {status.module}) has "
                "no layer mapping" + (f" ({reason})" if reason else "")
                + ": every layer was checked as uniform attention", unmapped.hint))
        return tuple(notes)
    if status.status == "removed":
        hint = (f"{engine.engine} no longer supports it; vllm=={status.last_version} is the "
                "last release that does")
    elif status.status == "out_of_tree":
        hint = "install the plugin named in the message"
    else:
        hint = (f"`attn-select list models --engine {engine.engine}` lists the architectures "
                "it supports; check the config's architectures field")
    notes.append(ArchitectureNote(
        "error", "AS131",
        f"{engine.engine} refuses the model at start-up: ValueError: {status.message}", hint))
    return tuple(notes)
