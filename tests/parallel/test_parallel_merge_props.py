"""Invariant: attention over keys split any way across ranks, merged by LSE in the base
the parts were written in, equals attention over all keys (skipped without torch)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from selector.parallel.lse import merge_partials  # noqa: E402


def _part(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor,
                                                                        torch.Tensor]:
    if k.shape[0] == 0:
        return torch.zeros(q.shape[0], v.shape[1]), torch.full((q.shape[0],), float("-inf"))
    scores = q @ k.T
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


@settings(max_examples=40, deadline=None)
@given(owners=st.lists(st.integers(0, 3), min_size=1, max_size=24),
       base=st.sampled_from(["e", "2"]), seed=st.integers(0, 1000))
def test_any_split_merges_to_full_attention(owners: list[int], base: str, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(3, 8, generator=generator) * 2
    k = torch.randn(len(owners), 8, generator=generator)
    v = torch.randn(len(owners), 4, generator=generator)
    full, full_lse = _part(q, k, v)
    ranks = 4
    outs, lses = [], []
    for rank in range(ranks):
        index = torch.tensor([i for i, o in enumerate(owners) if o == rank], dtype=torch.long)
        out, lse = _part(q, k[index], v[index])
        outs.append(out[:, None])  # one head
        lses.append((lse / math.log(2.0) if base == "2" else lse)[:, None])
    merged, lse = merge_partials(torch, torch.stack(outs), torch.stack(lses), base)
    assert torch.allclose(merged[:, 0], full, atol=1e-5)
    natural = lse[:, 0] * (math.log(2.0) if base == "2" else 1.0)
    assert torch.allclose(natural, full_lse, atol=1e-5)
