"""The engine's ``model-driven.yaml`` loaded (inherited whole), its model-driven names and
the rule of a model's architecture."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from selector.catalog import Catalog, CatalogError
from selector.kv.model_driven.rules import DrivenModel, ModelDrivenData
from selector.models.facts import ModelFacts

__all__ = [
    "DATA_FILE",
    "driven_rule",
    "load_model_driven",
    "model_driven_names",
]

DATA_FILE = "model-driven.yaml"


@cache
def _load(path: Path) -> ModelDrivenData:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return ModelDrivenData.model_validate(raw)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(f"{path}: {exc}") from None


def load_model_driven(engine: str, catalog: Catalog) -> ModelDrivenData | None:
    """The engine's ``model-driven.yaml`` (inherited whole), or None when it has none."""
    path = catalog.engine_file(engine, DATA_FILE)
    return None if path is None else _load(path)


def model_driven_names(engine: str, catalog: Catalog) -> frozenset[str]:
    """The model-driven backend names of the release (valid ``--attention-backend`` values)."""
    data = load_model_driven(engine, catalog)
    if data is None:
        return frozenset()
    own = {name for rule in data.models.values() for name, helper in rule.layer_backends.items()
           if helper.enum_member}
    return frozenset(data.backends) | own


def driven_rule(model: ModelFacts, engine: str, catalog: Catalog
                ) -> tuple[ModelDrivenData, DrivenModel] | None:
    data = load_model_driven(engine, catalog)
    if data is None:
        return None
    rule = data.rule_for(model.architecture)
    return None if rule is None else (data, rule)
