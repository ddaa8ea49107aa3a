"""vLLM's start-up limits on a decode-context-parallel (DCP) / tensor-parallel split.

Pure Python (stdlib only): the one predicate ``check`` (a start-up refusal) and the
shard check of ``smoke`` (``selector.parallel``) both ask. What vLLM checks, in its order:

* ``tp_divisible``: the TP size divides by the DCP size (DCP reuses the TP ranks):
  ``ParallelConfig`` when the engine config is built (``vllm/config/parallel.py:596-600``
  in 0.33.0), without prefill context parallelism (PCP); with PCP, ``pcp_dcp_span``: the
  DCP size is 1, the PCP size or TP x PCP (``parallel.py:601-607``) -- or, in a release
  that checks the TP size whatever the PCP size, ``tp_divisible_with_pcp``;
* for a model that is not MLA (GQA/MQA), ``ModelConfig.verify_with_parallel_config``
  (``vllm/config/model.py:1578-1606`` in 0.33.0), after the heads-by-TP check:
  ``gqa_tp_above_kv_heads`` (TP greater than the model's KV heads),
  ``gqa_dcp_within_max`` (DCP at most TP // KV heads) and ``gqa_q_per_kv_divisible``
  (the query heads per KV head divide by the DCP size).

Which code and which words each release gives is data (``checks.decode_context_parallel``
of ``schemas/engines/*/startup.yaml``); the answers of every release's own code are in
``tests/golden/oracle/vllm-*/dcp.json.gz`` (``tools/dcp_oracle.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DCP_MODEL_CHECKS", "DCP_PARALLEL_CHECKS", "DcpCheck", "DcpRefusal", "dcp_refusals"]

DcpCheck = Literal["tp_divisible", "tp_divisible_with_pcp", "pcp_dcp_span",
                   "gqa_tp_above_kv_heads", "gqa_dcp_within_max", "gqa_q_per_kv_divisible"]

DCP_PARALLEL_CHECKS: frozenset[DcpCheck] = frozenset(
    {"tp_divisible", "tp_divisible_with_pcp", "pcp_dcp_span"})
"""The checks ``ParallelConfig`` makes when the engine config is built."""

DCP_MODEL_CHECKS: frozenset[DcpCheck] = frozenset(
    {"gqa_tp_above_kv_heads", "gqa_dcp_within_max", "gqa_q_per_kv_divisible"})
"""The checks ``ModelConfig.verify_with_parallel_config`` makes (after the heads-by-TP
check); ``tp_divisible`` comes before it, when the parallel config is built."""


@dataclass(frozen=True)
class DcpRefusal:
    """One limit a split breaks, with the figures vLLM's message names."""

    check: DcpCheck
    values: dict[str, int | str] = field(default_factory=dict)


def dcp_refusals(*, tp_size: int, dcp_size: int, num_heads: int, num_kv_heads: int,
                 use_mla: bool = False, pcp_size: int = 1) -> list[DcpRefusal]:
    """Every limit the split breaks, in vLLM's order (vLLM raises the first a release
    checks); empty: vLLM accepts it. ``num_heads`` / ``num_kv_heads``: the whole model's."""
    figures: dict[str, int | str] = {"tp_size": tp_size, "dcp_size": dcp_size,
                                     "num_kv_heads": num_kv_heads, "pcp_size": pcp_size}
    found: list[DcpRefusal] = []
    if tp_size % dcp_size:
        found.append(DcpRefusal("tp_divisible" if pcp_size == 1 else "tp_divisible_with_pcp",
                                dict(figures)))
    spans = (1, pcp_size, tp_size * pcp_size)
    if pcp_size > 1 and dcp_size not in spans:
        found.append(DcpRefusal("pcp_dcp_span",
                                {**figures, "valid_dcp_sizes": str(sorted(set(spans)))}))
    if dcp_size > 1 and not use_mla:
        max_dcp = tp_size // num_kv_heads
        if tp_size <= num_kv_heads:
            found.append(DcpRefusal("gqa_tp_above_kv_heads", dict(figures)))
        if dcp_size > max_dcp:
            found.append(DcpRefusal("gqa_dcp_within_max", {**figures, "max_dcp": max_dcp}))
        q_per_kv = num_heads // num_kv_heads
        if q_per_kv % dcp_size:
            found.append(DcpRefusal("gqa_q_per_kv_divisible", {**figures, "q_per_kv": q_per_kv}))
    return found
