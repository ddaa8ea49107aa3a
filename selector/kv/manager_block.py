"""The platform phase: choose ``cache_config.block_size`` for the model
(reference 8.1: backend preference, hybrid Mamba alignment, the final check)."""

from __future__ import annotations

from collections.abc import Sequence

from selector.kv.backend_facts import BackendKVFacts
from selector.kv.block_size import (
    DEFAULT_BLOCK_SIZE,
    check_aligned_block_size,
    distinct_backends,
    preferred_block_size,
)
from selector.kv.hybrid import align_hybrid_block_size
from selector.kv.layer_specs import SpecContext, attention_bytes_per_token, mamba_page_bytes
from selector.kv.options import KVOptions
from selector.kv.plan_types import BlockSizeDecision
from selector.models.facts import LayerFacts, ModelFacts

__all__ = ["mamba_cache_mode", "negotiate_block_size"]


def mamba_cache_mode(model: ModelFacts, options: KVOptions) -> str:
    """``align`` for hybrid models with prefix caching (``MambaModelConfig``), else
    ``none``; prefix caching is the user's choice, else the release's default for
    hybrid models (``ModelConfig.is_prefix_caching_supported``)."""
    if options.mamba_cache_mode != "auto":
        return options.mamba_cache_mode
    _, steps = options.engine_rules()
    enabled = options.enable_prefix_caching
    if enabled is None:
        # off by default for an attention-free model or a CLS / MEAN / STEP pooling one
        enabled = steps.hybrid_prefix_caching and model.prefix_caching_default
    if not (model.is_hybrid and enabled):
        return "none"
    return "all" if steps.all_mode and model.mamba_prefix_caching else "align"


def negotiate_block_size(
    model: ModelFacts,
    layer_backends: Sequence[tuple[LayerFacts, BackendKVFacts]],
    options: KVOptions,
    max_model_len: int,
) -> BlockSizeDecision:
    """Steps 1, 2 and 4 of 8.1 (raises :class:`EngineStartupError` as vLLM would)."""
    backends = distinct_backends([backend for _, backend in layer_backends])
    user = options.block_size is not None
    mode = mamba_cache_mode(model, options)
    if not backends:
        # state layers only: no attention page to align; in align mode the Mamba block is
        # the block (MambaModelConfig.verify_and_update_config, vllm/model_executor/models/
        # config.py:750-788 in 0.33.0: JambaForSequenceClassification of Mamba layers only)
        size = options.block_size or DEFAULT_BLOCK_SIZE
        state_block = size if model.is_hybrid and mode == "align" else None
        return BlockSizeDecision(block_size=size, user_specified=user, preferred=size,
                                 mamba_block_size=state_block, mamba_cache_mode=mode)
    deciding = backends
    if options.kv_spec is not None and not options.kv_spec.block_size_all_backends:
        # the first non-SSM layer's backend alone (_find_non_ssm_backend)
        deciding = [next((b for _, b in layer_backends if not b.is_ssm), backends[0])]
    preferred = options.block_size or preferred_block_size(deciding)
    messages: list[str] = []
    if not user and preferred != DEFAULT_BLOCK_SIZE:
        names = "/".join(b.name for b in deciding)
        messages.append(f"Setting kv cache block size to {preferred} for {names} backend(s).")
    block = preferred
    hybrid = None
    _, steps = options.engine_rules()
    if model.is_hybrid:
        first_layer, first_backend = next(
            (layer, backend) for layer, backend in layer_backends if not backend.is_ssm
        )
        ssm_layer = model.state_layers[0]
        ctx = SpecContext(
            model_dtype=model.runtime_dtype,
            kv_cache_dtype=options.kv_cache_dtype,
            block_size=block,
            mamba_block_size=block,
            mamba_cache_mode="none",  # the unpadded state page: independent of the mode
            mamba_cache_dtype=options.mamba_cache_dtype,
            mamba_ssm_cache_dtype=options.mamba_ssm_cache_dtype,
            num_speculative_tokens=options.num_speculative_tokens,
            tp_size=model.tp_size,
        )
        hybrid = align_hybrid_block_size(
            block_size=block,
            first_backend=first_backend,
            backends=backends,
            attention_bytes_per_token=attention_bytes_per_token(first_layer, first_backend, ctx),
            mamba_page_bytes=mamba_page_bytes(ssm_layer, ctx),
            use_mla=model.use_mla,
            mamba_cache_mode=mode,
            prefill_checkpoint_alignment=(
                options.mamba_prefill_checkpoint_alignment if steps.prefill_checkpoint else None
            ),
            mla_min_block_size=steps.mla_min_block_size,
            lcm_non_ssm_backends=steps.lcm_non_ssm_backends,
            mamba_chunk_size=model.mamba_chunk_size,
        )
        block = hybrid.block_size
        messages.extend(hybrid.messages)
    check_aligned_block_size(backends, block, preferred)
    mamba_block = None
    if model.is_hybrid:
        mamba_block = block if mode == "align" else max_model_len
        if mode == "all" and hybrid is not None and hybrid.mamba_block_size is not None:
            mamba_block = hybrid.mamba_block_size
    checkpoints = (model.is_hybrid and mode == "align" and steps.prefill_checkpoint
                   and options.mamba_prefill_checkpoint_alignment is not None)
    return BlockSizeDecision(
        block_size=block,
        user_specified=user,
        preferred=preferred,
        hybrid=hybrid,
        mamba_block_size=mamba_block,
        mamba_cache_mode=mode,
        prefill_checkpoints=checkpoints,
        messages=tuple(messages),
    )
