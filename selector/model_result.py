"""What a whole-model check finds: per-layer selections and the negotiated KV plan (frozen
values; :mod:`selector.modelcheck` computes them, the reporters read them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from selector.kv import ModelPlan
from selector.memory.startup import MemoryReport, StartupIssue
from selector.models import ModelFacts
from selector.result import SolveResult

__all__ = ["LayerSelection", "ModelCheckResult"]


@dataclass(frozen=True)
class LayerSelection:
    """One distinct set of attention facts and the layers that share it."""

    layers: tuple[int, ...]
    kind: str
    facts: dict[str, Any]
    result: SolveResult


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

    @property
    def valid(self) -> bool:
        return (all(s.result.valid for s in self.selections)
                and (self.plan is None or self.plan.ok) and not self.startup)

    def selection_of(self, layer: int) -> LayerSelection:
        for selection in self.selections:
            if layer in selection.layers:
                return selection
        raise KeyError(layer)
