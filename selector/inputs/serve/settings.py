"""What a ``vllm serve`` command line sets that changes attention-backend selection
(:class:`Settings`), and which flags carry it (:data:`HANDLED`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["HANDLED", "Settings"]

HANDLED = frozenset({
    "--model", "--attention-backend", "--attention-config", "--block-size", "--kv-cache-dtype",
    "--dtype", "--tensor-parallel-size", "--decode-context-parallel-size",
    "--prefill-context-parallel-size", "--speculative-config", "--compilation-config",
    "--optimization-level", "--kv-transfer-config", "--enable-prefix-caching",
    "--no-enable-prefix-caching", "--max-model-len", "--gpu-memory-utilization",
    "--hf-overrides", "--enforce-eager", "--no-enforce-eager", "--disable-sliding-window",
    "--cp-kv-cache-interleave-size", "--max-num-batched-tokens", "--pipeline-parallel-size",
    "--data-parallel-size", "--enable-expert-parallel", "--no-enable-expert-parallel",
    "--moe-backend", "--max-num-seqs", "--kv-cache-memory-bytes", "--quantization",
    "--cpu-offload-gb", "--mm-encoder-attn-backend", "--limit-mm-per-prompt",
    "--mm-processor-kwargs", "--disable-chunked-mm-input", "--no-disable-chunked-mm-input",
    "--enable-chunked-mm-input",
})
"""The flags whose values :func:`build_settings` reads."""


@dataclass
class Settings:
    attention_backend: str | None = None
    flash_attn_version: int | None = None
    use_trtllm_attention: bool | None = None
    use_non_causal: bool = False
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    tp: int = 1
    dcp: int = 1
    pcp: int = 1
    cp_interleave: int = 1
    num_speculative_tokens: int = 0
    speculative: dict[str, Any] = field(default_factory=dict)
    """``--speculative-config``'s draft keys (method, model, attention_backend,
    parallel_drafting) as given."""
    cudagraph_mode: str | None = None
    """None: the engine's default (``defaults.yaml``)."""
    kv_connector: str | None = None
    enable_prefix_caching: bool | None = None
    max_model_len: int | None = None
    cpu_offload_gb: float = 0.0
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_num_seqs: int | None = None
    moe_backend: str | None = None
    quantization: str | None = None
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    hf_overrides: dict[str, Any] = field(default_factory=dict)
    disable_sliding_window: bool = False
    backend_per_kind: dict[str, str] = field(default_factory=dict)
    kv_options: dict[str, Any] = field(default_factory=dict)
    batch_invariant: bool = False
    environment: dict[str, bool] = field(default_factory=dict)
    multimodal: dict[str, Any] = field(default_factory=dict)
    """The multimodal encoder's settings, by their deployment keys."""
