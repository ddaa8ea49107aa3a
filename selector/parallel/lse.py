"""Merging partial attention outputs by their log-sum-exp (LSE), as vLLM's DCP does.

A kernel that attends over part of the keys returns ``out_r`` (softmax-normalised over
its part) and ``lse_r = log_b(sum exp(s))`` in its own base ``b``: natural log for
FlashAttention, base 2 for FlashInfer (the backend data's ``runtime.lse_base``). vLLM
combines the ranks' parts in two steps, and so does this module:

1. all-gather every rank's LSE; each rank rescales its own output by
   ``b ** (lse_r - lse)`` where ``lse = log_b(sum_r b ** lse_r)``
   (``correct_attn_out`` and ``CorrectAttnCPOutKernel.kernel``,
   ``vllm/v1/attention/ops/dcp.py:121-216, 376-435``, with ``IS_BASE_E`` choosing
   ``exp`` or ``exp2``; NaN and +inf LSEs count as -inf, an all--inf row keeps max 0);
2. sum the rescaled outputs over the ranks (``cp_lse_ag_out_rs``: a reduce-scatter
   over heads, ``dcp.py:471-500``; ``cp_lse_ag_out_ar``: an all-reduce, ``dcp.py:503-532``).

A rank with no tokens of a request reports LSE -inf for it (``mask_dcp_empty_shards_``,
``dcp.py:72-97``). The merged context part and the new tokens' part are then combined in
natural log by ``merge_attn_states`` (``vllm/v1/attention/ops/merge_attn_states.py:71``);
FlashInfer's base-2 LSEs are first converted (``log2_lse_to_ln``,
``vllm/v1/attention/backends/utils.py:70-75``).

torch is passed in; this module never imports it.
"""

from __future__ import annotations

import math
from typing import Any, Literal, TypeAlias

__all__ = [
    "LseBase",
    "combine_lse",
    "correct_partial",
    "merge_partials",
    "merge_two",
    "to_natural",
]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any
LseBase = Literal["e", "2"]

_LN_2 = math.log(2.0)


def to_natural(lse: Tensor, base: LseBase) -> Tensor:
    """An LSE in ``base`` as a natural-log LSE (``log2_lse_to_ln`` for base 2)."""
    return lse * _LN_2 if base == "2" else lse


def _clean(torch: Torch, lse: Tensor) -> Tensor:
    lse = lse.float()
    bad = torch.isnan(lse) | (lse == float("inf"))
    return torch.where(bad, torch.full_like(lse, float("-inf")), lse)


def _pow(torch: Torch, values: Tensor, base: LseBase) -> Tensor:
    return torch.exp(values) if base == "e" else torch.exp2(values)


def combine_lse(torch: Torch, lses: Tensor, base: LseBase) -> Tensor:
    """``log_b(sum_r b ** lses[r])`` over dim 0, with vLLM's -inf / NaN handling."""
    lses = _clean(torch, lses)
    top = lses.max(dim=0).values
    top = torch.where(top == float("-inf"), torch.zeros_like(top), top)
    total = _pow(torch, lses - top, base).sum(dim=0)
    return (torch.log(total) if base == "e" else torch.log2(total)) + top


def correct_partial(torch: Torch, out: Tensor, lses: Tensor, rank: int, base: LseBase
                    ) -> tuple[Tensor, Tensor]:
    """Rank ``rank``'s output ``(tokens, heads, dim)`` rescaled by the all-gathered
    ``lses`` ``(ranks, tokens, heads)``; returns it (float32) and the combined LSE."""
    lse = combine_lse(torch, lses, base)
    delta = _clean(torch, lses[rank]) - lse
    delta = torch.where(torch.isnan(delta) | (delta == float("inf")),
                        torch.full_like(delta, float("-inf")), delta)
    factor = _pow(torch, delta, base)
    scaled = out.float() * factor.unsqueeze(-1)
    # a rank with no tokens has factor 0; its (unused) output must not turn that into NaN
    scaled = torch.where(factor.unsqueeze(-1) > 0, scaled, torch.zeros_like(scaled))
    return scaled, lse


def merge_partials(torch: Torch, outs: Tensor, lses: Tensor, base: LseBase
                   ) -> tuple[Tensor, Tensor]:
    """All ranks' parts at once (one device): ``outs`` ``(ranks, tokens, heads, dim)``,
    ``lses`` ``(ranks, tokens, heads)`` in ``base``; returns the float32 output and LSE."""
    total = None
    lse = None
    for rank in range(outs.shape[0]):
        scaled, lse = correct_partial(torch, outs[rank], lses, rank, base)
        total = scaled if total is None else total + scaled
    assert total is not None and lse is not None
    return total, lse


def merge_two(torch: Torch, first: Tensor, first_lse: Tensor, second: Tensor,
              second_lse: Tensor) -> Tensor:
    """``merge_attn_states`` on natural-log LSEs ``(tokens, heads)``: float32 output."""
    outs = torch.stack([first.float(), second.float()])
    lses = torch.stack([first_lse.float(), second_lse.float()])
    merged, _ = merge_partials(torch, outs, lses, "e")
    return merged
