"""The FlashAttention-3 / FlashMLA backend set of tools/kv_oracle.py ("FA3(H100)") and its
layer chooser, without importing vLLM: tools/memory_oracle.py plans with it under vLLM
and tests/golden/test_memory_oracle.py replays the same plans in CI."""

from __future__ import annotations

from collections.abc import Callable

import oracle  # noqa: F401  (the checkout's selector/ first on sys.path)

from selector.kv import BackendKVFacts, MultipleOf
from selector.models import LayerFacts

__all__ = ["SCENARIO", "SET", "choose"]

SCENARIO: dict[str, object] = {"cudagraph_mode": "FULL_AND_PIECEWISE", "max_num_batched_tokens": 8192,
                               "max_num_seqs": 256, "gpu_memory_utilization": 0.9}
"""The scheduler settings the KV and memory-fit oracles ran vLLM's planner with (the
recorded answers, e.g. tests/golden/oracle/vllm-0.33.0/memory-fit.jsonl.gz, hold for
these): stated here, since the planner has no defaults of its own."""

_FA3 = BackendKVFacts(name="FLASH_ATTN", class_name="FlashAttentionBackend",
                      kernel_block_sizes=(MultipleOf(multiple_of=16),), cudagraph_support="ALWAYS")
_FLASHMLA = BackendKVFacts(name="FLASHMLA", class_name="FlashMLABackend", kernel_block_sizes=(64,),
                           cudagraph_support="UNIFORM_BATCH", reorder_batch_threshold=128,
                           is_mla=True)
_SPARSE = BackendKVFacts(name="FLASHMLA_SPARSE", class_name="FlashMLASparseBackend",
                         kernel_block_sizes=(MultipleOf(multiple_of=64),),
                         cudagraph_support="UNIFORM_BATCH", is_mla=True)


def choose(layer: LayerFacts) -> BackendKVFacts:
    if layer.kind == "mla":
        return _SPARSE if layer.is_sparse else _FLASHMLA
    return _FA3


SET: Callable[[LayerFacts], BackendKVFacts] = choose
