"""How a quantization scheme turns a part's parameters into bytes, as vLLM's quant methods
create them (``create_weights``): the stored value bits, the scales and zero points each
group of input values carries, and which layers stay unquantized (the embedding, the
lm_head, the checkpoint's ``ignore`` / ``modules_to_not_convert`` / ``exclude_modules``
list, routers vLLM builds without a quant method).

The scheme is the checkpoint's ``quantization_config`` or the ``--quantization`` value
(online quantization of an unquantized checkpoint). Data:
``schemas/engines/<engine>/startup.yaml`` (``memory.quantization``,
``memory.quantized_modules``); checked against vLLM's parameters of small quantized models
built on the meta device (tools/quant_oracle.py, tests/golden/test_quant_weights.py).

Per layer, vLLM's tensors are ``value_bits`` per weight, ``scale_bits`` per group of
``group_size`` input values (per output row) and, for blocks, one scale per
``block[0] x block[1]`` block; the per-tensor / per-shard scalars, per-output-row vectors
(channel scales, ``weight_shape``) are left out (under 0.1 % of a layer of the shipped
presets' sizes).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from selector.memory.profile import QuantScheme, StartupProfile

__all__ = ["QuantPlan", "part_shares", "quant_plan", "quantization_config"]


class QuantPlan(BaseModel):
    """The scheme one deployment's weights are stored in, with the config's own figures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scheme: QuantScheme
    method: str
    """The ``quant_method`` (or ``--quantization`` value) it came from."""
    value_bits: int
    group_size: int
    block: tuple[int, int] | None = None
    ignore: tuple[str, ...] = ()
    online: bool = False
    """Quantized by vLLM after loading (``--quantization`` on an unquantized checkpoint)."""

    @property
    def name(self) -> str:
        return self.scheme.name

    @property
    def bits_per_weight(self) -> float:
        """Storage bits per weight of a quantized layer: the value, its group's scales
        and zero points, or its block's scale."""
        bits = float(self.value_bits)
        if self.group_size:
            zero = self.value_bits if self.scheme.zero_points else 0
            bits += (self.scheme.scale_bits + zero) / self.group_size
        if self.block is not None:
            bits += self.scheme.block_scale_bits / (self.block[0] * self.block[1])
        return bits

    def ignored(self, module: str, match: str | None = None) -> bool:
        """Whether vLLM leaves ``module`` (vLLM's name, HF shard names for fused layers)
        unquantized by the ignore list, as the scheme's method matches it."""
        mode = match or self.scheme.ignore_match
        for pattern in self.ignore:
            if mode == "exact" and module == pattern:
                return True
            if mode == "substring" and pattern in module:
                return True
            if mode == "suffix" and (module == pattern or module.endswith("." + pattern)):
                return True
            if mode == "regex":  # compressed-tensors: "re:" regex or the exact name
                if pattern.startswith("re:"):
                    if re.match(pattern[3:], module):
                        return True
                elif module == pattern:
                    return True
            if mode == "fnmatch" and (module == pattern or fnmatch.fnmatchcase(module, pattern)
                                      or pattern in module.split(".")):
                return True
        return False


def quantization_config(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The checkpoint's ``quantization_config`` (top level, then ``text_config``, then
    ``compression_config``), as vLLM's ``get_quant_config`` looks for it
    (vllm/model_executor/model_loader/weight_utils.py:239-247 in 0.33.0)."""
    for qc in (raw.get("quantization_config"),
               (raw.get("text_config") or {}).get("quantization_config")
               if isinstance(raw.get("text_config"), Mapping) else None,
               raw.get("compression_config")):
        if isinstance(qc, Mapping):
            return qc
    return None


def _ct_weights(qc: Mapping[str, Any]) -> Mapping[str, Any]:
    groups = qc.get("config_groups")
    first: Any = next(iter(groups.values()), {}) if isinstance(groups, Mapping) and groups else {}
    weights = first.get("weights") if isinstance(first, Mapping) else None
    return weights if isinstance(weights, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _matches(scheme: QuantScheme, method: str, algo: str | None,
             weights: Mapping[str, Any]) -> bool:
    if method not in scheme.methods:
        return False
    if scheme.algos and (algo or "") not in scheme.algos:
        return False
    ct = scheme.compressed_tensors
    if ct is not None:
        if weights.get("type") != ct.type:
            return False
        if ct.num_bits and weights.get("num_bits") != ct.num_bits:
            return False
    return True


def quant_plan(raw: Mapping[str, Any], profile: StartupProfile,
               quantization: str | None = None) -> tuple[QuantPlan | None, str | None]:
    """(the plan, the method) of a checkpoint; ``quantization``: the ``--quantization``
    value. (None, method) for a method the data does not model; (None, None) unquantized."""
    qc = quantization_config(raw)
    if qc is None:
        if not quantization:
            return None, None
        return _online_plan(profile, quantization)
    method = str(qc.get("quant_method", "")).lower()
    algo = qc.get("quant_algo")
    nested = qc.get("quantization")
    if not method and (algo is not None or isinstance(nested, Mapping)):
        # ModelOpt's hf_quant_config.json names no quant_method: vLLM picks ModelOpt by
        # its quant_algo (modelopt.py:453-459, 776-782 in 0.33.0)
        method = "modelopt"
    if algo is None and isinstance(nested, Mapping):
        algo = nested.get("quant_algo")
    weights = _ct_weights(qc) if method == "compressed-tensors" else {}
    scheme = next((s for s in profile.memory.quantization
                   if _matches(s, method, str(algo) if algo else None, weights)), None)
    if method == "compressed-tensors" and weights.get("num_bits") == 4 and not any(
            s.compressed_tensors for s in profile.memory.quantization):
        # a release whose data names no compressed-tensors rows: 4-bit float is NVFP4,
        # 4-bit int a GPTQ-like int4 layout
        kind = "nvfp4" if weights.get("type") == "float" else "int4-gptq"
        scheme = next((s for s in profile.memory.quantization if s.name == kind), scheme)
    if scheme is None:
        return None, method
    source: Mapping[str, Any] = weights or (nested if isinstance(nested, Mapping) else qc)
    bits = _int(source.get(scheme.bits_key)) if scheme.bits_key else None
    group = _int(source.get(scheme.group_size_key)) if scheme.group_size_key else None
    if group is not None and group < 0:  # -1: one group per row (GPTQ / AWQ channelwise)
        group = 0
    block = None
    if scheme.block_key:
        listed = qc.get(scheme.block_key)
        if isinstance(listed, Sequence) and len(listed) == 2 and all(_int(v) for v in listed):
            block = (int(listed[0]), int(listed[1]))
    ignore: list[str] = []
    for key in scheme.ignore_keys:
        for holder in (qc, nested if isinstance(nested, Mapping) else {}):
            value = holder.get(key)
            if isinstance(value, list):
                ignore.extend(str(v) for v in value)
    return QuantPlan(scheme=scheme, method=method,
                     value_bits=bits or scheme.value_bits,
                     group_size=scheme.group_size if group is None else group,
                     block=block, ignore=tuple(ignore)), method


def _online_plan(profile: StartupProfile, quantization: str) -> tuple[QuantPlan | None, str]:
    value = quantization.lower()
    scheme = next((s for s in profile.memory.quantization
                   if s.online and value in s.methods), None)
    if scheme is None:
        return None, value
    block = tuple(scheme.online_block) if scheme.online_block else None
    return QuantPlan(scheme=scheme, method=value, value_bits=scheme.value_bits,
                     group_size=scheme.group_size,
                     block=(block[0], block[1]) if block else None, online=True), value


_NEVER_QUANTIZED = ("embedding", "lm_head", "expert biases", "vision tower")
"""Parts kept at the checkpoint dtype whatever the scheme (vocab-parallel embedding and
lm_head take no linear method; the vision tower is not modelled)."""


def part_shares(plan: QuantPlan | None, profile: StartupProfile, part: str, *,
                model_type: str, num_layers: int) -> float:
    """The share (0..1) of ``part``'s parameters vLLM stores quantized under ``plan``:
    0 for a part the method does not quantize, else the share of the part's modules, over
    every decoder layer, that the ignore list leaves alone."""
    if plan is None or part in _NEVER_QUANTIZED:
        return 0.0
    if plan.scheme.layers == "experts" and part != "routed experts":
        return 0.0
    modules = profile.memory.quantized_modules
    if modules is None:  # no per-module data: every linear part, no ignore list
        return 0.0 if part == "router" else 1.0
    if part == "router" and model_type not in modules.router_quantized_types:
        return 0.0
    names = modules.parts.get(part)
    if not names:
        return 0.0
    layers = max(num_layers, 1)
    kept = 0
    for index in range(layers):
        prefixes = [prefix.replace("{i}", str(index)) for prefix in modules.layer_prefixes]
        kept += sum(not any(plan.ignored(prefix + name) for prefix in prefixes)
                    for name in names)
    return kept / (layers * len(names))
