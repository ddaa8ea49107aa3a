"""Test doubles of the LSE-returning kernel entry points, with the libraries' conventions.

* :class:`FakeFlashInfer` -- FlashInfer's decode (must be built with tensor cores, as
  vLLM 0.33.0 builds it), paged prefill and ragged prefill wrappers: host-side CSR plan
  arrays, ``run(..., return_lse=True)`` returning ``(out, lse)`` with a base-2 LSE
  ``(tokens, heads)``;
* :func:`fake_varlen` -- ``vllm.vllm_flash_attn.flash_attn_varlen_func``: paged (block
  table + seqused_k) or ragged (cu_seqlens_k), natural-log LSE ``(heads, tokens)``;
* :class:`FakeFa3Op` -- ``torch.ops._vllm_fa3_C.fwd`` with vLLM 0.25.1's recorded schema,
  taking positional arguments in the schema's order.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

SCHEMAS = (Path(__file__).parent.parent / "fixtures" / "kernel_contract"
           / "vllm-0.25.1-_vllm_fa3_C-schemas.txt")


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
           scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Output and natural LSE ``(rows, heads)``; no keys: zeros and -inf."""
    if k.shape[0] == 0:
        return torch.zeros_like(q), torch.full(q.shape[:2], float("-inf"))
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if causal:
        rows, keys = q.shape[0], k.shape[0]
        visible = torch.arange(keys)[None, :] <= torch.arange(keys - rows, keys)[:, None]
        scores = scores.masked_fill(~visible[None], float("-inf"))
    out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).to(q.dtype)
    return out, torch.logsumexp(scores, -1).transpose(0, 1)


def _pages(storage: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    keys, values = storage[:, 0], storage[:, 1]
    if layout == "HND":
        keys, values = keys.transpose(1, 2), values.transpose(1, 2)
    return keys, values


class _Paged:
    def __init__(self, workspace: Any, kv_layout: str = "NHD", **options: Any) -> None:
        self.layout, self.options = kv_layout, options

    def _plan(self, qo: list[int], indptr: Any, indices: Any, last: Any, page: int,
              causal: bool, kwargs: dict[str, Any]) -> None:
        for array in (indptr, indices, last):
            assert array.device.type == "cpu", "plan() arrays live on the host"
        self.qo, self.indptr, self.indices = qo, indptr.tolist(), indices.tolist()
        self.last, self.page, self.causal = last.tolist(), page, causal
        self.scale = kwargs["sm_scale"]

    def run(self, q: torch.Tensor, cache: torch.Tensor, *, return_lse: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor]:
        assert return_lse
        keys, values = _pages(cache, self.layout)
        outs, lses = [], []
        for index, last in enumerate(self.last):
            pages = self.indices[self.indptr[index]:self.indptr[index + 1]]
            length = (len(pages) - 1) * self.page + last if pages else 0
            k = keys[pages].reshape(-1, *keys.shape[2:])[:length]
            v = values[pages].reshape(-1, *values.shape[2:])[:length]
            out, lse = attend(q[self.qo[index]:self.qo[index + 1]], k, v, causal=self.causal,
                              scale=self.scale)
            outs.append(out)
            lses.append(lse)
        return torch.cat(outs), torch.cat(lses) / math.log(2.0)


class DecodeWrapper(_Paged):
    def plan(self, indptr: Any, indices: Any, last: Any, num_qo_heads: int,
             num_kv_heads: int, head_dim: int, page_size: int, **kwargs: Any) -> None:
        assert self.options.get("use_tensor_cores") is True
        self._plan(list(range(len(last) + 1)), indptr, indices, last, page_size, False,
                   kwargs)


class PrefillWrapper(_Paged):
    def plan(self, qo_indptr: Any, indptr: Any, indices: Any, last: Any, num_qo_heads: int,
             num_kv_heads: int, head_dim: int, page_size: int, *, causal: bool,
             **kwargs: Any) -> None:
        self._plan(qo_indptr.tolist(), indptr, indices, last, page_size, causal, kwargs)


class RaggedWrapper:
    def __init__(self, workspace: Any, kv_layout: str = "NHD") -> None:
        assert kv_layout == "NHD"

    def plan(self, qo_indptr: Any, kv_indptr: Any, num_qo_heads: int, num_kv_heads: int,
             head_dim: int, *, causal: bool, **kwargs: Any) -> None:
        self.qo, self.kv = qo_indptr.tolist(), kv_indptr.tolist()
        self.causal, self.scale = causal, kwargs["sm_scale"]

    def run(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
            return_lse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        outs, lses = [], []
        for index in range(len(self.qo) - 1):
            rows = slice(self.qo[index], self.qo[index + 1])
            keys = slice(self.kv[index], self.kv[index + 1])
            out, lse = attend(q[rows], k[keys], v[keys], causal=self.causal, scale=self.scale)
            outs.append(out)
            lses.append(lse)
        return torch.cat(outs), torch.cat(lses) / math.log(2.0)


class FakeFlashInfer:
    __version__ = "fake"
    BatchDecodeWithPagedKVCacheWrapper = DecodeWrapper
    BatchPrefillWithPagedKVCacheWrapper = PrefillWrapper
    BatchPrefillWithRaggedKVCacheWrapper = RaggedWrapper


def fake_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, max_seqlen_q: int,
                cu_seqlens_q: torch.Tensor, max_seqlen_k: int,
                cu_seqlens_k: torch.Tensor | None = None, seqused_k: torch.Tensor | None = None,
                softmax_scale: float | None = None, causal: bool = False,
                window_size: list[int] | None = None, softcap: float = 0.0,
                block_table: torch.Tensor | None = None, return_softmax_lse: bool = False,
                fa_version: int = 2, **unused: Any) -> tuple[torch.Tensor, torch.Tensor]:
    assert return_softmax_lse and fa_version == 3 and not unused
    assert softmax_scale is not None
    starts = cu_seqlens_q.tolist()
    outs, lses = [], []
    for index in range(len(starts) - 1):
        rows = q[starts[index]:starts[index + 1]]
        if block_table is not None:
            assert seqused_k is not None
            length = int(seqused_k[index])
            pages = block_table[index, : -(-length // k.shape[1])].long()
            keys = k[pages].reshape(-1, *k.shape[2:])[:length]
            values = v[pages].reshape(-1, *v.shape[2:])[:length]
        else:
            assert cu_seqlens_k is not None
            bounds = cu_seqlens_k.tolist()
            keys, values = (k[bounds[index]:bounds[index + 1]],
                            v[bounds[index]:bounds[index + 1]])
        out, lse = attend(rows, keys, values, causal=causal, scale=softmax_scale)
        outs.append(out)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses).transpose(0, 1).contiguous()


class FakeFa3Op:
    """``_vllm_fa3_C.fwd`` by vLLM 0.25.1's schema: positional arguments in its order."""

    def __init__(self) -> None:
        line = SCHEMAS.read_text(encoding="utf-8").splitlines()[0]
        self._schema = torch._C.parse_schema("_vllm_fa3_C::" + " ".join(line.split()))
        self.names = [argument.name for argument in self._schema.arguments]

    def __call__(self, *values: Any) -> list[torch.Tensor]:
        assert len(values) == len(self.names)
        given = dict(zip(self.names, values, strict=True))
        assert given["out"] is None and given["cp_world_size"] == 1
        out, lse = fake_varlen(
            given["q"], given["k"], given["v"], given["max_seqlen_q"], given["cu_seqlens_q"],
            given["max_seqlen_k"], cu_seqlens_k=given["cu_seqlens_k"],
            seqused_k=given["seqused_k"], softmax_scale=given["softmax_scale"],
            causal=given["is_causal"], block_table=given["page_table"],
            return_softmax_lse=True, fa_version=3)
        return [out, lse, torch.empty(0), torch.empty(0)]
