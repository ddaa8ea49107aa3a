"""vLLM's recorded ROCm answers (``tools/rocm_oracle_sample.py``) as flat configs of the
ROCm platform: the ROCm oracle's input (``gcn_arch``, ``aiter_installed``, ``env``) in
the request vocabulary of the profile's ``platforms/rocm.yaml``."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from selector.platforms import rocm

__all__ = ["FAMILIES", "ROOT", "golden_files", "read_cases", "to_flat"]

ROOT = Path(__file__).parent / "oracle"

_SELECTOR_FIELDS = (
    "head_size", "dtype", "kv_cache_dtype", "block_size", "use_mla", "has_sink", "use_sparse",
    "use_mm_prefix", "use_per_head_quant_scales", "has_sliding_window", "use_non_causal",
    "attn_type", "num_heads", "attention_backend",
)


FAMILIES = ("standard", "mla")
"""The seeded samples of ``tools/rocm_oracle_sample.py`` (``rocm-cases`` holds named ones)."""


def golden_files() -> list[Path]:
    return sorted(p for family in FAMILIES for p in ROOT.glob(f"vllm-*/rocm-{family}.jsonl.gz"))


def read_cases(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def to_flat(config: Mapping[str, Any], not_passed: tuple[str, ...] = ()) -> dict[str, Any]:
    """The flat config (ROCm vocabulary) of one ROCm oracle input. ``not_passed``: the
    selector arguments the release's ``get_attn_backend`` does not take (left out)."""
    cc = rocm.capability_of_arch(str(config["gcn_arch"]))
    flat: dict[str, Any] = {"device_capability": rocm.capability_text(cc)}
    for name in _SELECTOR_FIELDS:
        if name in config and name not in not_passed and config[name] is not None:
            flat[name] = config[name]
        elif name == "block_size":
            flat[name] = None
    flat["env_aiter"] = bool(config.get("aiter_installed", False))
    flat.update(rocm.environment_facts(config.get("env") or {}))
    return flat
