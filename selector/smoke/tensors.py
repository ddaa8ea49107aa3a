"""Device tensors of a smoke step: per-request Q/K/V and the paged KV cache.

The cache is allocated the way vLLM allocates it for each backend, in the negotiated
layout, and written only through ``slot_mapping`` (the unified KV-update step):

* FLASH_ATTN: logical ``(2, pages, block, kv_heads, head)``; HND stores it as
  ``(2, pages, kv_heads, block, head)`` and the kernel gets the permuted view;
* FLASHINFER: logical ``(pages, 2, block, kv_heads, head)``; HND stores
  ``(pages, 2, kv_heads, block, head)``, which is what FlashInfer's HND layout reads.

torch is imported by the caller and passed in; this module never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from selector.smoke.batch import BatchSpec
from selector.smoke.metadata import build_common_metadata
from selector.smoke.plan import SmokePlan

__all__ = ["PagedKvCache", "RequestData", "allocate_cache", "fill_cache", "history_slots",
           "make_request_data", "step_slot_mapping", "torch_dtype"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any


def torch_dtype(torch: Torch, name: str) -> Any:
    """``"bfloat16"`` -> ``torch.bfloat16``."""
    return {"bfloat16": torch.bfloat16, "float16": torch.float16}[name]


@dataclass
class PagedKvCache:
    """One layer's paged KV cache: the allocation and its logical K/V views."""

    backend: str
    layout: str
    block_size: int
    storage: Tensor
    """The allocation, in physical (layout) order."""
    key: Tensor
    """Logical ``(pages, block, kv_heads, head)`` view of the keys (may be strided)."""
    value: Tensor

    def write(self, torch: Torch, slots: Tensor, keys: Tensor, values: Tensor) -> None:
        """Write token rows to their slots; rows whose slot is negative (padding) are skipped."""
        keep = slots >= 0
        slots = slots[keep].long()
        pages = torch.div(slots, self.block_size, rounding_mode="floor")
        offsets = slots % self.block_size
        self.key[pages, offsets] = keys[keep]
        self.value[pages, offsets] = values[keep]

    def gather(self, torch: Torch, pages: list[int], length: int) -> tuple[Tensor, Tensor]:
        """Read back the first ``length`` tokens of a request whose pages are ``pages``."""
        index = torch.tensor(pages, device=self.storage.device, dtype=torch.long)
        keys = self.key[index].reshape(-1, *self.key.shape[2:])[:length]
        values = self.value[index].reshape(-1, *self.value.shape[2:])[:length]
        return keys, values


def allocate_cache(torch: Torch, plan: SmokePlan, num_pages: int, device: Any,
                   generator: Any) -> PagedKvCache:
    """Allocate one layer's cache in ``plan``'s backend shape and layout, filled with noise.

    Unused slots hold finite random values (never NaN), as kernels that load whole pages
    require.
    """
    dtype = torch_dtype(torch, plan.dtype)
    block, heads, head = plan.kernel_block_size, plan.num_kv_heads, plan.head_size
    hnd = plan.kv_layout == "HND"
    if plan.backend == "FLASH_ATTN":
        shape = (2, num_pages, heads, block, head) if hnd else (2, num_pages, block, heads, head)
    else:
        shape = (num_pages, 2, heads, block, head) if hnd else (num_pages, 2, block, heads, head)
    storage = torch.randn(shape, generator=generator, device=device, dtype=torch.float32)
    storage = storage.to(dtype)
    logical = storage.permute(0, 1, 3, 2, 4) if hnd else storage
    if plan.backend == "FLASH_ATTN":
        key, value = logical[0], logical[1]
    else:
        key, value = logical[:, 0], logical[:, 1]
    return PagedKvCache(plan.backend, plan.kv_layout, block, storage, key, value)


@dataclass
class RequestData:
    """Per-request logical tensors, the truth the reference is computed from."""

    queries: list[Tensor]
    """``(query_len, q_heads, head)`` per request."""
    keys: list[Tensor]
    """``(seq_len, kv_heads, head)`` per request: cached context then the new tokens."""
    values: list[Tensor]

    def flat_queries(self, torch: Torch) -> Tensor:
        return torch.cat(self.queries).contiguous()

    def new_tokens(self, torch: Torch, batch: BatchSpec) -> tuple[Tensor, Tensor]:
        """K/V rows of this step's new tokens, in flat batch order."""
        keys = [k[r.context_len:] for k, r in zip(self.keys, batch.requests, strict=True)]
        values = [v[r.context_len:] for v, r in zip(self.values, batch.requests, strict=True)]
        return torch.cat(keys), torch.cat(values)

    def context_tokens(self, torch: Torch, batch: BatchSpec) -> tuple[Tensor, Tensor]:
        """K/V rows of the tokens cached before this step, in flat batch order."""
        keys = [k[:r.context_len] for k, r in zip(self.keys, batch.requests, strict=True)]
        values = [v[:r.context_len] for v, r in zip(self.values, batch.requests, strict=True)]
        return torch.cat(keys), torch.cat(values)


def make_request_data(torch: Torch, batch: BatchSpec, plan: SmokePlan, device: Any,
                      generator: Any) -> RequestData:
    """Random Q/K/V per request in the plan's dtype (same seed + shapes -> same data)."""
    dtype = torch_dtype(torch, plan.dtype)

    def noise(*shape: int) -> Tensor:
        return torch.randn(shape, generator=generator, device=device,
                           dtype=torch.float32).to(dtype)

    queries, keys, values = [], [], []
    for request in batch.requests:
        queries.append(noise(request.query_len, plan.num_q_heads, plan.head_size))
        keys.append(noise(request.seq_len, plan.num_kv_heads, plan.head_size))
        values.append(noise(request.seq_len, plan.num_kv_heads, plan.head_size))
    return RequestData(queries, keys, values)


def history_slots(batch: BatchSpec) -> list[int]:
    """Slots of every token cached before this step (what earlier steps wrote), flat order."""
    block_size = batch.block_size
    return [
        request.block_ids[position // block_size] * block_size + position % block_size
        for request in batch.requests
        for position in range(request.context_len)
    ]


def fill_cache(torch: Torch, cache: PagedKvCache, batch: BatchSpec, data: RequestData,
               slot_mapping: Tensor, *, token_order: list[int] | None = None) -> None:
    """Write the cached context (earlier steps), then this step's tokens via slot_mapping.

    ``slot_mapping`` is in the order the backend sees the tokens; ``token_order[t]`` is
    the original flat row of token ``t`` (FlashInfer's reorder), identity when None.
    """
    device = cache.storage.device
    history = torch.tensor(history_slots(batch), device=device, dtype=torch.long)
    if history.numel():
        keys, values = data.context_tokens(torch, batch)
        cache.write(torch, history, keys, values)
    keys, values = data.new_tokens(torch, batch)
    if token_order is not None:
        order = torch.tensor(token_order, device=device, dtype=torch.long)
        keys, values = keys[order], values[order]
    cache.write(torch, slot_mapping, keys, values)


def step_slot_mapping(torch: Torch, batch: BatchSpec, device: Any) -> Tensor:
    """This step's ``slot_mapping`` as an int64 device tensor."""
    slots = build_common_metadata(batch).slot_mapping
    return torch.tensor(slots, device=device, dtype=torch.long)
