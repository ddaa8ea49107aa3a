"""Which GPU model runner vLLM starts (``VllmConfig.use_v2_model_runner``) and the
runner's refusals, from one data file (``model-runner.yaml`` of the engine profile, a
newer release patching an older one's with ``inherit: true``).

Both stages that depend on the runner read it here: the memory budget (V2's CUDA-graph
reservation, ``startup.yaml`` ``memory.model_runner``) and the speculative draft (the
runner that builds the draft, its backend rule: :mod:`selector.memory.speculative`).
Checked against vLLM's own answers (``tools/draft_oracle.py``'s ``runner`` of every
case, ``tests/golden/test_draft_oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from selector.catalog import Catalog, EngineData
from selector.memory.weights import config_int, text_config
from selector.models import ModelFacts

__all__ = [
    "RUNNER_FILE",
    "RunnerChoice",
    "RunnerData",
    "model_runner",
    "runner_data",
    "runner_of_model",
    "spec_decode_capture_sizes",
]

RUNNER_FILE = "model-runner.yaml"

Runner = Literal["v1", "v2"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelRule(_Strict):
    """``_is_default_v2_model_runner_model``: V2 for a generating model that is neither
    hybrid nor attention-free, dense or one of ``v2_moe_architectures``."""

    source: str
    v2_moe_architectures: tuple[str, ...]
    hybrid: Literal["v1", "v1_unless_listed"]


class V2Unsupported(_Strict):
    source: str
    supported_methods: tuple[str, ...] | None = None
    """An allow-list (None: none): any other method is ``method_feature``."""
    method_features: dict[str, str] | None = None
    """A method refused by its own words (null in a patch: none)."""
    methods: tuple[str, ...] = ()
    """A deny-list: each is ``method_feature``."""
    keys: dict[str, str] = Field(default_factory=dict)
    keys_except_methods: dict[str, tuple[str, ...]] = Field(default_factory=dict)


class V1Unsupported(_Strict):
    source: str
    methods: dict[str, str] = Field(default_factory=dict)
    keys: dict[str, str] = Field(default_factory=dict)
    architectures: dict[str, str] = Field(default_factory=dict)
    """Architectures the V1 runner refuses, each with vLLM's feature name (listed last)."""


class RunnerCodes(_Strict):
    refusal: str


class SpecDecodeRounding(_Strict):
    """``adjust_cudagraph_sizes_for_spec_decode``: the V1 runner's rounding of the capture
    sizes to multiples of the uniform decode query."""

    source: str


class RunnerData(_Strict):
    """``model-runner.yaml`` of an engine profile, inheritance applied."""

    engine: str
    source: str
    environment: str
    v2_methods: tuple[str, ...] = ()
    model_rule: ModelRule | None = None
    v2_unsupported: V2Unsupported
    v1_unsupported: V1Unsupported | None = None
    method_feature: str
    v2_refusal: str
    v1_refusal: str | None = None
    v1_spec_decode_rounding: SpecDecodeRounding | None = None
    codes: RunnerCodes


class RunnerChoice(_Strict):
    """The runner vLLM starts, why, and its refusal (None: it starts)."""

    runner: Runner
    reason: str
    refusal: str | None = None


def runner_data(catalog: Catalog, engine: str | EngineData | None) -> RunnerData | None:
    """The engine's runner data (None: the release's profile chain has none)."""
    return catalog.patched_data(engine, RUNNER_FILE, RunnerData)


def _v2_features(data: RunnerData, method: str, keys: Mapping[str, Any]) -> list[str]:
    rule = data.v2_unsupported
    out: list[str] = []
    if method:
        own = rule.method_features or {}
        if method in own:
            out.append(own[method])
        elif method in rule.methods or (rule.supported_methods is not None
                                        and method not in rule.supported_methods):
            out.append(data.method_feature.format(method=method))
    for key, feature in rule.keys.items():
        if keys.get(key) and method not in rule.keys_except_methods.get(key, ()):
            out.append(feature)
    return out


def _v1_features(data: RunnerData, method: str, keys: Mapping[str, Any],
                 architectures: tuple[str, ...] = ()) -> list[str]:
    rule = data.v1_unsupported
    if rule is None:
        return []
    out = [feature for name, feature in rule.methods.items() if method == name]
    out += [feature for key, feature in rule.keys.items() if keys.get(key) not in (None, False)]
    # model_config.architecture: the first of the config's architectures
    out += [rule.architectures[a] for a in architectures[:1] if a in rule.architectures]
    return out


def _model_default(rule: ModelRule | None, *, architectures: tuple[str, ...], moe: bool,
                   hybrid: bool) -> str | None:
    """Why the model starts V1 by the model rule (None: it does not)."""
    if rule is None:
        return None
    listed = bool(set(architectures) & set(rule.v2_moe_architectures))
    if hybrid and (rule.hybrid == "v1" or not listed):
        return "a hybrid model starts the V1 runner"
    if moe and not listed:
        return "an MoE architecture outside the default-V2 list starts the V1 runner"
    return None


def model_runner(data: RunnerData, *, architectures: tuple[str, ...], moe: bool, hybrid: bool,
                 method: str | None = None, keys: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None) -> RunnerChoice:
    """``use_v2_model_runner`` and the validation of the runner in use, for a model
    (``hybrid``: it has state layers) and its speculative method and keys."""
    keys = keys or {}
    spec = method or ""
    v2 = _v2_features(data, spec, keys)
    v1 = _v1_features(data, spec, keys, architectures)

    def v2_choice(reason: str) -> RunnerChoice:
        refusal = data.v2_refusal.format(features=", ".join(v2)) if v2 else None
        return RunnerChoice(runner="v2", reason=reason, refusal=refusal)

    def v1_choice(reason: str) -> RunnerChoice:
        refusal = data.v1_refusal.format(features=", ".join(v1)) \
            if v1 and data.v1_refusal else None
        return RunnerChoice(runner="v1", reason=reason, refusal=refusal)

    forced = ((environ or {}).get(data.environment) or "").strip().lower()
    if forced in ("1", "true"):
        return v2_choice(f"{data.environment}=1")
    if forced in ("0", "false"):
        return v1_choice(f"{data.environment}=0")
    if spec and spec in data.v2_methods:
        return v2_choice(f"the {spec} method starts Model Runner V2")
    why_v1 = _model_default(data.model_rule, architectures=architectures, moe=moe, hybrid=hybrid)
    if why_v1 is not None:
        return v1_choice(why_v1)
    if v2:
        return v1_choice(f"Model Runner V2 does not yet support {', '.join(v2)}")
    return RunnerChoice(runner="v2", reason="the default")


def runner_of_model(data: RunnerData, model: ModelFacts, *, method: str | None = None,
                    keys: Mapping[str, Any] | None = None,
                    environ: Mapping[str, str] | None = None) -> RunnerChoice:
    """:func:`model_runner` for a model's facts (its architectures, MoE and state layers
    read from its config)."""
    raw = model.config or {}
    architectures = tuple(str(a) for a in raw.get("architectures") or ())
    moe = bool(config_int(text_config(raw), "num_local_experts", "n_routed_experts",
                          "num_experts"))
    return model_runner(data, architectures=architectures, moe=moe,
                        hybrid=bool(model.state_layers), method=method, keys=keys,
                        environ=environ)


_FULL_DECODE = frozenset({"FULL", "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"})
"""The CUDA-graph modes whose decode graphs are FULL (``CUDAGraphMode.decode_mode``)."""


def spec_decode_capture_sizes(data: RunnerData, sizes: tuple[int, ...], *, runner: Runner,
                              cudagraph_mode: str | None,
                              decode_query_len: int) -> tuple[int, ...]:
    """The capture sizes after the runner's spec-decode step: the V1 runner with FULL
    decode graphs rounds each up to a multiple of the decode query, as
    ``adjust_cudagraph_sizes_for_spec_decode`` does; otherwise ``sizes`` as they are."""
    query = decode_query_len
    if data.v1_spec_decode_rounding is None or runner != "v1" or query <= 1 or not sizes \
            or cudagraph_mode not in _FULL_DECODE:
        return sizes
    largest = max(sizes)
    rounded = sorted({-(-size // query) * query for size in sizes
                      if -(-size // query) * query <= largest})
    if not rounded and query <= largest:
        rounded = [query]
    return tuple(rounded)
