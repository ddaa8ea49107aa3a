"""vLLM's defaults for a ``vllm serve`` deployment, one table per release
(``schemas/engines/<engine>/defaults.yaml``, inherited whole like ``startup.yaml``).

Every figure a report uses that the user did not give (``max_num_batched_tokens`` and
``max_num_seqs`` by the device, ``gpu_memory_utilization``, the CUDA-graph mode and
capture sizes, the profile run's requests) is read from here; the values are checked
against vLLM's own code on emulated GPUs (``tools/defaults_oracle.py``,
``tests/golden/test_engine_defaults.py``). No I/O.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from selector.schema.types import CudaGraphMode

__all__ = ["ArchitectureModeDefault", "BatchDefaults", "BatchTier", "CaptureSizes",
           "EngineDefaults", "ModeDefault", "UtilizationDefault"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BatchTier(_Strict):
    """One branch of ``EngineArgs.get_batch_defaults``: a device with at least
    ``min_memory_gib`` of total memory, none of ``name_excludes`` in its CUDA name
    (lower case) and a capability not in ``capability_excludes`` gets these values."""

    min_memory_gib: float = Field(ge=0)
    name_excludes: tuple[str, ...] = ()
    capability_excludes: tuple[str, ...] = ()
    """Capabilities as ``major.minor`` (``current_platform.is_device_capability``)."""
    max_num_batched_tokens: dict[str, int]
    """By vLLM's ``UsageContext`` name (``OPENAI_API_SERVER`` for ``vllm serve``)."""
    max_num_seqs: dict[str, int]

    def matches(self, names: tuple[str, ...], memory_bytes: int | None, capability: str) -> bool:
        memory_gib = (memory_bytes or 0) / 1024**3
        lowered = [name.lower() for name in names]
        return (memory_gib >= self.min_memory_gib
                and not any(word in name for word in self.name_excludes for name in lowered)
                and capability not in self.capability_excludes)


class BatchDefaults(_Strict):
    source: str
    usage_context: str
    """The usage context of ``vllm serve`` (``UsageContext.OPENAI_API_SERVER``)."""
    tiers: tuple[BatchTier, ...] = Field(min_length=1)
    """First matching tier wins; the last is the fallback (also vLLM's answer when it
    cannot query the device: memory 0, no name)."""

    def tier(self, names: tuple[str, ...], memory_bytes: int | None, capability: str) -> BatchTier:
        for tier in self.tiers:
            if tier.matches(names, memory_bytes, capability):
                return tier
        return self.tiers[-1]


class UtilizationDefault(_Strict):
    value: float = Field(gt=0, le=1)
    source: str


class ModeDefault(_Strict):
    value: CudaGraphMode
    source: str


class ModelModeOverride(_Strict):
    """One step of ``VllmConfig.__post_init__`` that changes the CUDA-graph mode for the
    kind of model, before any attention backend's support is read: a ``model`` kind
    (``pooling``: vLLM's runner type, ``model_config.pooler_config`` set;
    ``encoder_decoder``: ``model_config.is_encoder_decoder``) whose mode is one of
    ``modes`` gets ``to``, and vLLM logs ``message`` (``{mode}``: the mode it replaced)."""

    model: Literal["pooling", "encoder_decoder"]
    modes: tuple[CudaGraphMode, ...]
    to: CudaGraphMode
    message: str


class ArchitectureModeDefault(_Strict):
    """An architecture's ``verify_and_update_config`` (``MODELS_CONFIG_MAP``,
    vllm/model_executor/models/config.py) that sets ``compilation_config.cudagraph_mode``
    to ``to`` when the user left it unset, before vLLM's default is filled in and before
    the kind rules run (``VllmConfig.__post_init__`` calls the hook first). vLLM logs
    nothing for it. ``compilation_mode``: the compilation mode the hook sets alongside
    (recorded, not used by the tool)."""

    architectures: tuple[str, ...] = Field(min_length=1)
    to: CudaGraphMode
    compilation_mode: str | None = None
    source: str
    since: str
    """The first release whose ``MODELS_CONFIG_MAP`` has the hook."""


class ModelModeOverrides(_Strict):
    source: str
    rules: tuple[ModelModeOverride, ...]
    """In vLLM's order: the first rule whose kind and mode match applies (an ``elif`` chain)."""
    architecture_defaults: tuple[ArchitectureModeDefault, ...] = ()
    """The model's own default mode, applied before ``rules`` when the user set none."""

    def architecture_default(self, architecture: str | None) -> ArchitectureModeDefault | None:
        """The architecture's own default (None: it has none)."""
        return next((d for d in self.architecture_defaults if architecture in d.architectures),
                    None)

    def apply(self, mode: CudaGraphMode, kinds: frozenset[str], architecture: str | None = None,
              user_set: bool = True) -> tuple[CudaGraphMode, str | None]:
        """The mode after the overrides, and vLLM's log line (None: none logged).
        ``architecture``: the model's (``model_config.architecture``); ``user_set``: the
        deployment gave the mode (the architecture defaults then leave it)."""
        default = self.architecture_default(architecture)
        if default is not None and not user_set:
            mode = default.to
        for rule in self.rules:
            if rule.model in kinds and mode in rule.modes:
                return rule.to, rule.message.format(mode=mode)
        return mode, None


class CaptureSizes(_Strict):
    """``VllmConfig._set_cudagraph_sizes`` without user sizes: the largest size is
    ``min(max_num_seqs x seqs_factor x q, max_size, max_num_batched_tokens)`` (``q``: the
    uniform decode query length, 1 + ``num_speculative_tokens``; ``max_size`` by
    capability family where ``max_size_by_family`` names one), the sizes are 1, 2, 4, then
    every 8 below 256, then every 16, up to it, with ``max_num_batched_tokens``
    (``append_max_num_batched_tokens``) and ``max_num_seqs`` (``append_max_num_seqs``)
    added when they fit; with ``uniform_decode_grid`` and ``q > 1``, the uniform-decode
    sizes ``n x q`` for every request count ``n`` of the request grid instead of
    ``max_num_seqs``."""

    source: str
    seqs_factor: int = Field(gt=0)
    max_size: int = Field(gt=0)
    max_size_by_family: dict[int, int] = {}
    """Capability family (``major x 10``, ``is_device_capability_family``) -> max size."""
    small: tuple[int, ...]
    step_below_256: int = Field(gt=0)
    step_from_256: int = Field(gt=0)
    append_max_num_batched_tokens: bool
    append_max_num_seqs: bool
    uniform_decode_grid: bool = False
    max_size_by_architecture: dict[str, int] = {}
    """An architecture's ``verify_and_update_config`` that sets
    ``max_cudagraph_capture_size`` when the user set no capture sizes (``MODELS_CONFIG_MAP``):
    vLLM then takes it as given, ``min(it, max_num_batched_tokens)``, the grid up to it and
    ``max_num_batched_tokens`` when it fits, without the uniform-decode sizes."""

    def _grid(self, limit: int) -> list[int]:
        found = [size for size in self.small if size <= limit]
        if limit >= 8:
            found += range(8, min(limit + 1, 256), self.step_below_256)
        if limit >= 256:
            found += range(256, limit + 1, self.step_from_256)
        return found

    def sizes(self, max_num_seqs: int, max_num_batched_tokens: int, cc: int,
              decode_query_len: int = 1, architecture: str | None = None) -> tuple[int, ...]:
        explicit = self.max_size_by_architecture.get(architecture or "")
        if explicit is not None:
            limit = min(max_num_batched_tokens, explicit)
            found = self._grid(limit)
            if self.append_max_num_batched_tokens and max_num_batched_tokens <= limit:
                found.append(max_num_batched_tokens)
            return tuple(sorted(set(found)))
        ceiling = self.max_size_by_family.get(cc // 10 * 10, self.max_size)
        limit = min(max_num_seqs * self.seqs_factor * decode_query_len, ceiling)
        if self.uniform_decode_grid and decode_query_len > 1:
            # request_counts: the grid of request counts up to max_num_seqs (at most the
            # ceiling), max_num_seqs itself included
            reqs = min(max_num_seqs, ceiling)
            decode = [n * decode_query_len for n in {*self._grid(reqs), reqs}
                      if n * decode_query_len <= limit]
        else:
            decode = [max_num_seqs] if self.append_max_num_seqs and max_num_seqs <= limit else []
        limit = min(max_num_batched_tokens, limit)
        found = self._grid(limit)
        if self.append_max_num_batched_tokens and max_num_batched_tokens <= limit:
            found.append(max_num_batched_tokens)
        found += [size for size in decode if size <= max_num_batched_tokens]
        return tuple(sorted(set(found)))


class EngineDefaults(_Strict):
    """One release's defaults (``defaults.yaml``)."""

    engine: str
    gpu_memory_utilization: UtilizationDefault
    cudagraph_mode: ModeDefault
    cudagraph_model_overrides: ModelModeOverrides
    """The mode a pooling model or an encoder-decoder gets instead (vllm/config/vllm.py)."""
    batch: BatchDefaults
    cudagraph_capture: CaptureSizes
    profile_run_seqs_source: str
    """The profile run's dummy batch has ``min(max_num_batched_tokens, max_num_seqs)``
    requests (its sampler run one row each)."""

    def batch_defaults(self, names: tuple[str, ...], memory_bytes: int | None,
                       capability: str) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) of ``vllm serve`` on this device."""
        tier = self.batch.tier(names, memory_bytes, capability)
        context = self.batch.usage_context
        return tier.max_num_batched_tokens[context], tier.max_num_seqs[context]

    @staticmethod
    def profile_run_seqs(max_num_batched_tokens: int, max_num_seqs: int) -> int:
        return min(max_num_batched_tokens, max_num_seqs)
