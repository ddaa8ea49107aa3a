"""Models, offline: a Hugging Face config.json (or a preset) in, per-layer
attention facts out.

The package exports the entry points and the facts they return; the rest of the
per-layer vocabulary (layer kinds, MLA / SSM dimensions) is in :mod:`selector.models.facts`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

if TYPE_CHECKING:
    from selector.models.facts import (
        GDNDims,
        LayerFacts,
        Mamba1Dims,
        ModelFacts,
        ShortConvDims,
    )
    from selector.models.hf_config import (
        parse_config,
    )
    from selector.models.loader import (
        load_config_file,
        load_model,
    )
    from selector.models.presets import (
        list_presets,
        preset_dir,
    )
    from selector.models.tensor_parallel import shard_model

__all__ = [
    "GDNDims",
    "LayerFacts",
    "Mamba1Dims",
    "ModelFacts",
    "ShortConvDims",
    "list_presets",
    "load_config_file",
    "load_model",
    "parse_config",
    "preset_dir",
    "shard_model",
]

_LAZY: dict[str, str] = {
    "shard_model": "selector.models.tensor_parallel",
    "GDNDims": "selector.models.facts",
    "ShortConvDims": "selector.models.facts",
    "LayerFacts": "selector.models.facts",
    "Mamba1Dims": "selector.models.facts",
    "ModelFacts": "selector.models.facts",
    "list_presets": "selector.models.presets",
    "load_config_file": "selector.models.loader",
    "load_model": "selector.models.loader",
    "parse_config": "selector.models.hf_config",
    "preset_dir": "selector.models.presets",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
