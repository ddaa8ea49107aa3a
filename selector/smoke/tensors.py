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

__all__ = ["PagedKvCache", "RequestData", "allocate_cache", "cache_dtype", "fill_cache",
           "history_slots", "input_spread",
           "make_request_data", "step_slot_mapping", "torch_dtype"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any


def torch_dtype(torch: Torch, name: str) -> Any:
    """``"bfloat16"`` -> ``torch.bfloat16``."""
    return {"bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def cache_dtype(torch: Torch, plan: SmokePlan) -> Any:
    """The cache's storage dtype: float8_e4m3fn for an fp8 KV cache, else the model dtype."""
    return torch.float8_e4m3fn if plan.fp8_kv else torch_dtype(torch, plan.dtype)


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
    k_scale: float = 1.0
    v_scale: float = 1.0
    """Per-tensor scales of an fp8 cache: the cache stores ``K / k_scale``."""

    def write(self, torch: Torch, slots: Tensor, keys: Tensor, values: Tensor) -> None:
        """Write token rows to their slots; rows whose slot is negative (padding) are skipped.

        An fp8 cache stores ``keys / k_scale`` and ``values / v_scale`` (vLLM's
        reshape_and_cache with per-tensor scales)."""
        keep = slots >= 0
        slots = slots[keep].long()
        pages = torch.div(slots, self.block_size, rounding_mode="floor")
        offsets = slots % self.block_size
        if self.key.dtype == torch.float8_e4m3fn:
            self.key[pages, offsets] = (keys[keep].float() / self.k_scale).to(self.key.dtype)
            self.value[pages, offsets] = (values[keep].float() / self.v_scale).to(
                self.value.dtype)
            return
        self.key[pages, offsets] = keys[keep].to(self.key.dtype)
        self.value[pages, offsets] = values[keep].to(self.value.dtype)

    def gather(self, torch: Torch, pages: list[int], length: int) -> tuple[Tensor, Tensor]:
        """Read back the first ``length`` tokens of a request whose pages are ``pages``."""
        index = torch.tensor(pages, device=self.storage.device, dtype=torch.long)
        keys = self.key[index].reshape(-1, *self.key.shape[2:])[:length]
        values = self.value[index].reshape(-1, *self.value.shape[2:])[:length]
        if self.key.dtype == torch.float8_e4m3fn:
            return keys.float() * self.k_scale, values.float() * self.v_scale
        return keys, values


def allocate_cache(torch: Torch, plan: SmokePlan, num_pages: int, device: Any,
                   generator: Any) -> PagedKvCache:
    """Allocate one layer's cache in ``plan``'s backend shape and layout, filled with noise.

    Unused slots hold finite random values (never NaN), as kernels that load whole pages
    require.
    """
    dtype = cache_dtype(torch, plan)
    block, heads, head = plan.kernel_block_size, plan.num_kv_heads, plan.head_size
    hnd = plan.kv_layout == "HND"
    if plan.is_mla:
        latent = torch.randn((num_pages, block, 1, head), generator=generator, device=device,
                             dtype=torch.float32).to(dtype)
        assert plan.kv_lora_rank is not None
        return PagedKvCache(plan.backend, "NHD", block, latent, latent,
                            latent[..., :plan.kv_lora_rank], plan.k_scale, plan.k_scale)
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
    return PagedKvCache(plan.backend, plan.kv_layout, block, storage, key, value,
                        plan.k_scale, plan.v_scale)


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


def input_spread(plan: SmokePlan) -> float:
    """Standard deviation of the random Q/K/V: with a soft-cap, large enough that the scaled
    scores (std ``spread**2``) reach half the cap, so capping changes the result."""
    if plan.logits_soft_cap is None:
        return 1.0
    return float((plan.logits_soft_cap / 2) ** 0.5)


def make_request_data(torch: Torch, batch: BatchSpec, plan: SmokePlan, device: Any,
                      generator: Any) -> RequestData:
    """Random Q/K/V per request in the plan's dtype (same seed + shapes -> same data).

    With an fp8 KV cache the truth is what the kernel can see: float32 values that fp8
    storage (with the plan's per-tensor scales) holds exactly, so the reference is the
    attention over the dequantized cache. An MLA plan's values are the first
    ``kv_lora_rank`` channels of its keys (one latent vector per token)."""
    dtype = torch_dtype(torch, plan.dtype)
    spread = input_spread(plan)

    def noise(*shape: int, scale: float = 1.0) -> Tensor:
        values = torch.randn(shape, generator=generator, device=device,
                             dtype=torch.float32) * spread
        if plan.fp8_kv:
            return (values / scale).to(torch.float8_e4m3fn).float() * scale
        return values.to(dtype)

    queries, keys, values = [], [], []
    for request in batch.requests:
        queries.append(noise(request.query_len, plan.num_q_heads, plan.head_size,
                             scale=plan.q_scale))
        key = noise(request.seq_len, plan.num_kv_heads, plan.head_size, scale=plan.k_scale)
        keys.append(key)
        if plan.kv_lora_rank is not None:
            values.append(key[..., :plan.kv_lora_rank])
        else:
            values.append(noise(request.seq_len, plan.num_kv_heads, plan.head_size,
                                scale=plan.v_scale))
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
               slot_mapping: Tensor, *, token_order: list[int] | None = None,
               new_tokens: bool = True) -> None:
    """Write the cached context (earlier steps), then this step's tokens via slot_mapping.

    ``slot_mapping`` is in the order the backend sees the tokens; ``token_order[t]`` is
    the original flat row of token ``t`` (FlashInfer's reorder), identity when None.
    ``new_tokens=False`` writes the context only (the engine's own cache update writes
    this step's tokens).
    """
    device = cache.storage.device
    history = torch.tensor(history_slots(batch), device=device, dtype=torch.long)
    if history.numel():
        keys, values = data.context_tokens(torch, batch)
        cache.write(torch, history, keys, values)
    if not new_tokens:
        return
    keys, values = data.new_tokens(torch, batch)
    if token_order is not None:
        order = torch.tensor(token_order, device=device, dtype=torch.long)
        keys, values = keys[order], values[order]
    cache.write(torch, slot_mapping, keys, values)


def step_slot_mapping(torch: Torch, batch: BatchSpec, device: Any) -> Tensor:
    """This step's ``slot_mapping`` as an int64 device tensor."""
    slots = build_common_metadata(batch).slot_mapping
    return torch.tensor(slots, device=device, dtype=torch.long)
