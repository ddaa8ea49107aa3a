"""Float32 PyTorch reference attention and the comparison of kernel outputs against it.

Per request: queries sit at the last ``query_len`` positions of the sequence; query
``i`` (absolute position ``p = context_len + i``) sees key ``j`` when ``j <= p`` and,
with a sliding window ``w``, ``j > p - w``. GQA maps query head ``h`` to KV head
``h // (q_heads / kv_heads)``. Soft-capping is ``cap * tanh(score / cap)`` on the
scaled scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeAlias

from selector.smoke.batch import BatchSpec
from selector.smoke.tensors import RequestData

__all__ = ["Comparison", "compare", "reference_attention", "tolerance_for"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any

_TOLERANCE = {"bfloat16": (2e-2, 2e-2), "float16": (4e-3, 4e-3)}
"""(atol, rtol) per dtype, against a float32 reference computed from the same inputs."""
FP8_TOLERANCE = (1e-1, 5e-2)
"""fp8 kernels also round the softmax probabilities to fp8 before the PV product."""


def tolerance_for(dtype: str, *, fp8: bool = False) -> tuple[float, float]:
    return FP8_TOLERANCE if fp8 else _TOLERANCE[dtype]


def reference_attention(torch: Torch, batch: BatchSpec, data: RequestData, *,
                        num_q_heads: int, num_kv_heads: int, head_size: int,
                        sliding_window: int | None, logits_soft_cap: float | None,
                        scale: float | None = None, sinks: Tensor | None = None) -> Tensor:
    """Float32 output ``(num_tokens, q_heads, head_v)`` in the batch's flat token order.

    ``sinks`` (one logit per query head) join each softmax's denominator and attend to
    nothing (gpt-oss's attention sinks, FlashAttention's ``s_aux``)."""
    group = num_q_heads // num_kv_heads
    scale = 1.0 / math.sqrt(head_size) if scale is None else scale
    outputs = []
    for request, queries, keys, values in zip(batch.requests, data.queries, data.keys,
                                              data.values, strict=True):
        q = queries.float()
        k = keys.float().repeat_interleave(group, dim=1)
        v = values.float().repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * scale
        if logits_soft_cap is not None:
            scores = logits_soft_cap * torch.tanh(scores / logits_soft_cap)
        query_pos = torch.arange(request.context_len, request.seq_len, device=q.device)
        key_pos = torch.arange(request.seq_len, device=q.device)
        visible = key_pos[None, :] <= query_pos[:, None]
        if sliding_window is not None:
            visible &= key_pos[None, :] > query_pos[:, None] - sliding_window
        scores = scores.masked_fill(~visible[None], float("-inf"))
        if sinks is not None:
            sink = sinks.float().reshape(-1, 1, 1).expand(-1, scores.shape[1], 1)
            probabilities = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
        else:
            probabilities = torch.softmax(scores, dim=-1)
        outputs.append(torch.einsum("hqk,khd->qhd", probabilities, v))
    return torch.cat(outputs)


@dataclass(frozen=True)
class Comparison:
    """How far an output is from what it should be."""

    max_abs: float
    max_rel: float
    """``max_abs`` over the largest reference magnitude."""
    worst_token: int
    passed: bool
    nan_count: int = 0


def compare(torch: Torch, output: Tensor, expected: Tensor, *, atol: float,
            rtol: float) -> Comparison:
    """Elementwise ``|out - ref| <= atol + rtol * |ref|``; NaN or Inf always fails."""
    out = output.float()
    ref = expected.float()
    nan_count = int((~torch.isfinite(out)).sum().item())
    diff = (out - ref).abs()
    diff = torch.where(torch.isfinite(diff), diff, torch.full_like(diff, float("inf")))
    max_abs = float(diff.max().item()) if diff.numel() else 0.0
    scale = float(ref.abs().max().item()) if ref.numel() else 0.0
    excess = diff - (atol + rtol * ref.abs())
    worst = int(excess.reshape(excess.shape[0], -1).max(dim=1).values.argmax().item()
                ) if excess.numel() else 0
    passed = nan_count == 0 and bool((excess <= 0).all().item())
    return Comparison(max_abs=max_abs, max_rel=max_abs / scale if scale else max_abs,
                      worst_token=worst, passed=passed, nan_count=nan_count)
