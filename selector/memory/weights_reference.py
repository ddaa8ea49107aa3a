"""The weight estimate against vLLM's own parameters, part by part.

vLLM's answers are ``tests/golden/oracle/vllm-<v>/weights-configs.jsonl.gz``
(tools/weights_oracle.py ``--real``): for every real config.json the project ships, the
parameters of vLLM's model class built on the meta device at several tensor-parallel
sizes, per rank. :func:`vllm_parts` sorts those parameters into the estimate's parts by
name and owning module class; :func:`compare` puts the tool's estimate beside them. The
golden test (tests/golden/test_weights_configs.py) and the generated table in
``docs/memory.md`` both read :func:`comparisons`.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from selector.catalog import Catalog
from selector.errors import InputError
from selector.memory.profile import startup_profile
from selector.memory.weights import estimate_weights
from selector.models import parse_config

__all__ = ["PART_GROUPS", "WeightComparison", "comparisons", "load_answers", "vllm_parts"]

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1, "uint8": 1,
                "int8": 1, "int32": 4, "float64": 8, "int64": 8}

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("vision tower", re.compile(
        r"^(?:model\.)?(?:visual|vision_tower|vision_model|vision|multi_modal_projector|"
        r"mm_projector|embed_vision|audio_tower|embed_audio|audio_model|vision_embed|"
        r"patch_embed|merger|vision_encoder|vision_adapter|vision_projection|"
        r"audio_encoder)\.")),
    ("expert biases", re.compile(r"\|FusedMoE$|\|\w*FusedMoE$")),
    ("lm_head", re.compile(r"\|ParallelLMHead$")),
    # LongCat-Flash-Lite's n-gram tables (a VocabParallelEmbedding) and their projections
    # Inkling's InklingReplicatedEmbedding: a full table per rank
    ("embedding", re.compile(r"\|VocabParallelEmbedding$|\|\w*ReplicatedEmbedding$|"
                             r"\.(?:wpe|embed_positions)\.weight\||"
                             r"\.ngram_embeddings\.oe_projection\|")),
    ("shared experts", re.compile(r"\.shared_experts?\.|\.shared_mlp\.")),
    ("router", re.compile(r"\.(?:gate|router)\.(?:weight|e_score_correction_bias)\||"
                          r"\.mlp\.gate\.weight\||\|GateLinear$|\.fc[12]_latent_proj\.")),
    ("ssm mixers", re.compile(r"\|(?:MambaMixer2?|MambaMixer|GatedDeltaNet\w*|Mixer2RMSNormGated|"
                              r"\w*Mamba\w*)$|\.(?:mamba|linear_attn|ssm|short_conv)\.|"
                              r"\.mixer\.(?:in_proj|conv1d|out_proj|A|D|dt_bias|norm|x_proj|"
                              r"dt_proj|A_log)\b")),
    ("dense MLP", re.compile(r"\.mixer\.(?:up_proj|down_proj)\.")),
    ("attention", re.compile(r"\.(?:self_attn|attn|attention|self_attention|mixer)\.|"
                             r"\.(?:qkv_proj|o_proj)\.weight\|")),
    # LongCat-Flash's two dense MLPs per decoder layer: mlps.0 / mlps.1
    ("dense MLP", re.compile(r"\.(?:mlps?|feed_forward|ffn|mixer)\.|\.(?:fc1|fc2)\.weight\|")),
)
"""The estimate's part of a vLLM parameter, first match wins, on ``name|owner class``."""

_LEFT_OUT = re.compile(r"(?:norm\w*\.weight|norm\w*\.bias|\.bias|\.sinks|layernorm\w*)\|")
"""Parameters the estimate leaves out by design (weights.py): norms, biases, sinks."""

PART_GROUPS: Mapping[str, tuple[str, ...]] = {
    "embedding + lm_head": ("embedding", "lm_head"),
    "attention": ("attention",),
    "ssm mixers": ("ssm mixers",),
    "MLP": ("dense MLP", "shared experts", "router"),
    "routed experts": ("routed experts", "expert biases"),
    "vision tower": ("vision tower",),
}
"""The parts compared: sums of the estimate's parts (a model's router and shared expert
live in one vLLM module for some families, so the MLP side is compared as a whole)."""


def _part(name: str, owner: str) -> str:
    key = f"{name}|{owner}"
    if owner.endswith(("FusedMoE", "RoutedExperts")) and not name.startswith(("visual", "vision")):
        return "expert biases" if name.endswith("_bias") else "routed experts"
    for part, pattern in _RULES:
        if part == "expert biases":
            continue
        if part in ("attention", "dense MLP", "ssm mixers", "embedding") and _LEFT_OUT.search(key):
            return "left out"
        if pattern.search(key):
            return part
    return "left out"


def vllm_parts(rows: Sequence[Sequence[Any]]) -> dict[str, int]:
    """Bytes per part of one rank's parameters (``[name, owner, shape, dtype, layers]``)."""
    parts: dict[str, int] = {}
    for name, owner, shape, dtype, layers in rows:
        count = _layer_count(layers)
        part = _part(str(name), str(owner))
        nbytes = math.prod(shape) * _DTYPE_BYTES.get(str(dtype), 2) * count
        parts[part] = parts.get(part, 0) + nbytes
    return parts


def _layer_count(layers: str) -> int:
    if not layers:
        return 1
    total = 0
    for span in layers.split(","):
        first, _, last = span.partition("-")
        total += int(last or first) - int(first) + 1
    return total


class WeightComparison(BaseModel):
    """One config at one tensor-parallel size: vLLM's bytes per GPU and the tool's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    source: str
    tp: int
    architecture: str
    vllm_bytes: int
    tool_bytes: int | None
    """None: the tool cannot count a part (``unknown``) or cannot read the config."""
    unknown: tuple[str, ...] = ()
    vllm_parts: dict[str, int]
    tool_parts: dict[str, int]
    note: str = ""

    @property
    def error(self) -> float | None:
        if self.tool_bytes is None or not self.vllm_bytes:
            return None
        return (self.tool_bytes - self.vllm_bytes) / self.vllm_bytes


def load_answers(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _grouped(parts: Mapping[str, int]) -> dict[str, int]:
    out = {}
    for group, members in PART_GROUPS.items():
        total = sum(parts.get(m, 0) for m in members)
        if total:
            out[group] = total
    return out


def comparisons(catalog: Catalog, engine: str, answers: Sequence[Mapping[str, Any]]
                ) -> Iterator[WeightComparison]:
    """The tool beside vLLM for every answered config and tensor-parallel size."""
    profile = startup_profile(catalog, engine)
    for answer in answers:
        for tp_text, built in answer["tp"].items():
            if built.get("status") != "ok":
                continue
            tp = int(tp_text)
            raw = answer["config"]
            theirs = vllm_parts(built["parameters"])
            theirs.pop("left out", None)
            common = {"id": answer["id"], "source": answer["source"], "tp": tp,
                      "architecture": built["architecture"], "vllm_bytes": built["bytes"],
                      "vllm_parts": _grouped(theirs)}
            try:
                facts = parse_config(raw, file=answer["source"], name=answer["id"])
                estimate = estimate_weights(
                    raw, layer_kinds=tuple(layer.kind for layer in facts.layers), tp=tp,
                    dtype_bytes=2, cc=90, profile=profile)
            except InputError as exc:
                yield WeightComparison(**common, tool_bytes=None, tool_parts={},
                                       note=f"config not read: {exc}")
                continue
            mine = {part.name: part.bytes for part in estimate.parts}
            unknown = tuple(getattr(estimate, "unknown", ()))
            yield WeightComparison(**common, tool_bytes=None if unknown else estimate.bytes_per_gpu,
                                   unknown=unknown, tool_parts=_grouped(mine))
