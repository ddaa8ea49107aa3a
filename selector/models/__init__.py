"""Models, offline: a Hugging Face config.json (or a preset) in, per-layer
attention facts out."""

from selector.models.facts import (
    ATTENTION_KINDS,
    SSM_KINDS,
    GDNDims,
    LayerFacts,
    LayerKind,
    Mamba1Dims,
    MLADims,
    ModelDType,
    ModelFacts,
    SparseIndexer,
    SSMDims,
)
from selector.models.hf_config import parse_config
from selector.models.loader import load_config_file, load_model
from selector.models.presets import list_presets, preset_dir

__all__ = [
    "ATTENTION_KINDS",
    "SSM_KINDS",
    "GDNDims",
    "LayerFacts",
    "LayerKind",
    "MLADims",
    "Mamba1Dims",
    "ModelDType",
    "ModelFacts",
    "SSMDims",
    "SparseIndexer",
    "list_presets",
    "load_config_file",
    "load_model",
    "parse_config",
    "preset_dir",
]
