"""``explain`` through the stages: one layer's request facts (the single layer of a
deployment, or one layer of its model) solved without suggestions, then every check of
one backend in vLLM's order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from selector.catalog import Catalog
from selector.errors import InputError
from selector.inputs.config import LoadedDeployment, resolve_target
from selector.kv.model_driven import load_model_driven
from selector.pipeline.deployment import LayerRequest, layer_of
from selector.result import SolveResult
from selector.solver import explain_backend, solve

if TYPE_CHECKING:
    from selector.models import ModelFacts

__all__ = ["Explained", "explain_layer"]


@dataclass(frozen=True)
class Explained:
    """One backend's checks for one layer of a deployment."""

    backend: str
    """The backend's registered name."""
    request: LayerRequest
    result: SolveResult
    checks: list[dict[str, Any]]
    """Every check in vLLM's order: the rule, the facts it read, pass / fail."""

    @property
    def valid(self) -> bool:
        return self.result.verdict(self.backend).valid


def explain_layer(loaded: LoadedDeployment, backend: str, catalog: Catalog, *,
                  engine: str | None = None, layer: int | None = None,
                  model_facts: ModelFacts | None = None) -> Explained:
    """Explain ``backend`` for the deployment's single layer, or for layer ``layer`` of its
    model (default: the first attention layer; ``model_facts``: a command line's model)."""
    target = resolve_target(loaded, catalog, engine)
    engine_data = target.engine
    driven = load_model_driven(engine_data.engine, catalog)
    choosing = driven.models_choosing(backend.upper()) if driven is not None else ()
    if choosing:
        raise InputError(
            f"{backend.upper()} is chosen by a model's own layer code "
            f"({', '.join(choosing)}), not by the attention "
            "selector explain traces", field="backend",
            hint="check a deployment of that model: its report names the backend its layers build")
    name = engine_data.backend(backend).name
    request = layer_of(loaded, catalog, layer, target=target, model_facts=model_facts)
    result = solve(request.facts, engine=engine_data,
                   attention_backend=request.attention_backend, suggest=False,
                   catalog=catalog, model_backend=request.model_backend,
                   sink_backend=request.sink_backend)
    return Explained(backend=name, request=request, result=result,
                     checks=explain_backend(result, name, catalog))
