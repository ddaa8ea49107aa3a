"""vLLM's recorded ROCm answers (``tools/rocm_oracle_sample.py``) as flat configs of the
ROCm platform: the ROCm oracle's input (``gcn_arch``, ``aiter_installed``, ``env``) in
the request vocabulary of the profile's ``platforms/rocm.yaml``."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from selector.catalog import Catalog, EngineData
from selector.inputs.flat import facts_from_flat
from selector.platforms import rocm
from selector.solver.mla_prefill import select_mla_prefill

__all__ = ["FAMILIES", "PREFILL_ASKED", "ROOT", "golden_files", "pinned_files",
           "prefill_mismatches", "read_cases", "to_flat"]

ROOT = Path(__file__).parent / "oracle"

_SELECTOR_FIELDS = (
    "head_size", "dtype", "kv_cache_dtype", "block_size", "use_mla", "has_sink", "use_sparse",
    "use_mm_prefix", "use_per_head_quant_scales", "has_sliding_window", "use_non_causal",
    "attn_type", "num_heads", "attention_backend", "model_attn_type",
)


FAMILIES = ("standard", "mla")
"""The seeded samples of ``tools/rocm_oracle_sample.py`` (``rocm-cases`` holds named ones)."""


def golden_files() -> list[Path]:
    return sorted(p for family in FAMILIES for p in ROOT.glob(f"vllm-*/rocm-{family}.jsonl.gz"))


def pinned_files() -> list[Path]:
    """The pinned family (``--pinned N``): every ``AttentionBackendEnum`` member pinned in
    turn, as ``--attention-backend`` does."""
    return sorted(ROOT.glob("vllm-*/rocm-pinned.jsonl.gz"))


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
    flat["env_rocm_flash_attn"] = bool(config.get("flash_attn_installed", False))
    flat.update(config.get("mla_prefill") or {})
    flat.update(rocm.environment_facts(config.get("env") or {}))
    return flat


PREFILL_ASKED = ("ROCM_AITER_FA", "FLASH_ATTN")
"""The MLA prefill backends ``RocmPlatform.get_mla_prefill_backend_cls`` asks (the
oracle also records the others' ``validate_configuration``, whose package probes
answer for the oracle's CPU environment, not a ROCm install: not compared)."""


def prefill_mismatches(cases: Sequence[Mapping[str, Any]], data: EngineData,
                       catalog: Catalog) -> list[tuple[Any, ...]]:
    """(id, field, ours, vLLM's) where the profile's ROCm MLA prefill choice differs from
    the recorded one (every case with an ``mla_prefill`` answer)."""
    mismatches: list[tuple[Any, ...]] = []
    for case in cases:
        answer = case.get("mla_prefill")
        if not answer or answer.get("not_in_release"):
            continue
        facts, _ = facts_from_flat(to_flat(case["input"]), data.profile)
        ours = select_mla_prefill(facts.solver_facts(), data, catalog=catalog)
        for name in PREFILL_ASKED:
            mine = [d.message for d in ours.verdict(name).reasons]
            if mine != answer["backends"][name]:
                mismatches.append((case.get("id"), name, mine, answer["backends"][name]))
        if ours.selected != answer["selected"]:
            mismatches.append((case.get("id"), "selected", ours.selected, answer["selected"]))
        error = ours.error.message if ours.error is not None else None
        expected = (answer["error"] or "").removeprefix("ValueError: ") or None
        if error != expected:
            mismatches.append((case.get("id"), "error", error, answer["error"]))
        if ours.config != answer["config"]:
            mismatches.append((case.get("id"), "config", ours.config, answer["config"]))
    return mismatches
