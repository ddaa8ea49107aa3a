"""What a shard check runs: one :class:`ShardPlan` per smoke plan of a TP / DCP deployment.

Pure Python (no torch). A shard plan is a smoke plan (backend, kernel geometry, dtype)
plus the whole model's head counts and the deployment's parallel split, and the two
backend columns the merge reads (``runtime.lse_base``, ``runtime.dcp_decode_kv``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from selector.memory.dcp import dcp_refusals
from selector.parallel.sharding import HeadShard, dcp_block_size_problem, head_shard

__all__ = ["ShardOptions", "ShardPlan"]

_Positive = Annotated[int, Field(ge=1, strict=True)]


class ShardPlan(BaseModel):
    """One backend's attention split over TP ranks (and DCP ranks) as vLLM splits it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    backend: Literal["FLASH_ATTN", "FLASHINFER"]
    engine: str = Field(min_length=1)
    """The engine version whose kernel calls are reproduced (the smoke plan's)."""
    kernel_calls: str = Field(min_length=1)
    """That engine's kernel call contract file (the smoke plan's ``kernel_calls``)."""
    kernel_block_size: Annotated[int, Field(ge=1, le=4096, strict=True)]
    kv_layout: Literal["NHD", "HND"] = "NHD"
    dtype: Literal["bfloat16", "float16"] = "bfloat16"
    head_size: Annotated[int, Field(ge=8, le=512, strict=True)]
    num_heads: _Positive
    """Query heads of the whole model (before tensor parallelism)."""
    num_kv_heads: _Positive
    """KV heads of the whole model."""
    tensor_parallel_size: _Positive = 1
    decode_context_parallel_size: _Positive = 1
    cp_kv_cache_interleave_size: _Positive = 1
    sliding_window: _Positive | None = None
    logits_soft_cap: Annotated[float, Field(gt=0)] | None = None
    lse_base: Literal["e", "2"]
    """Base of the LSE the backend's kernels return (backend data ``runtime.lse_base``)."""
    dcp_decode_kv: Literal["context", "sequence"] = "context"
    """Backend data ``runtime.dcp_decode_kv``: what a decode reads from the sharded cache."""

    @model_validator(mode="after")
    def _consistent(self) -> ShardPlan:
        tp, dcp = self.tensor_parallel_size, self.decode_context_parallel_size
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is not a multiple of num_kv_heads "
                             f"{self.num_kv_heads}")
        if self.num_heads % tp:
            raise ValueError(f"num_heads {self.num_heads} is not divisible by "
                             f"tensor_parallel_size {tp}")
        if tp < self.num_kv_heads and self.num_kv_heads % tp:
            raise ValueError(f"num_kv_heads {self.num_kv_heads} is not divisible by "
                             f"tensor_parallel_size {tp}")
        if tp > self.num_kv_heads and tp % self.num_kv_heads:
            raise ValueError(f"tensor_parallel_size {tp} is not a multiple of num_kv_heads "
                             f"{self.num_kv_heads}")
        refusals = dcp_refusals(tp_size=tp, dcp_size=dcp, num_heads=self.num_heads,
                                num_kv_heads=self.num_kv_heads)
        if refusals:  # `check` reports it in vLLM's words (a start-up refusal)
            figures = ", ".join(f"{k}={v}" for k, v in refusals[0].values.items())
            raise ValueError(f"vLLM refuses this TP/DCP split at start-up "
                             f"({refusals[0].check}: {figures})")
        problem = dcp_block_size_problem(dcp_size=dcp, block_size=self.kernel_block_size,
                                         interleave=self.cp_kv_cache_interleave_size)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def uses_dcp(self) -> bool:
        return self.decode_context_parallel_size > 1

    @property
    def world_size(self) -> int:
        """Ranks one check spans: a DCP group, or every TP rank without DCP."""
        return self.decode_context_parallel_size if self.uses_dcp else \
            self.tensor_parallel_size

    def shard(self, rank: int) -> HeadShard:
        return head_shard(rank, self.tensor_parallel_size, self.num_heads, self.num_kv_heads)

    @property
    def heads_per_rank(self) -> int:
        return self.num_heads // self.tensor_parallel_size

    def group_q_heads(self) -> list[int]:
        """DCP group 0's query heads after the all-gather (ranks 0 .. dcp-1)."""
        heads: list[int] = []
        for rank in range(self.decode_context_parallel_size):
            heads.extend(self.shard(rank).q_heads)
        return heads

    def describe(self) -> str:
        heads = f"{self.num_heads}/{self.num_kv_heads} heads"
        if self.uses_dcp:
            per_rank = self.shard(0)
            return (f"DCP {self.decode_context_parallel_size} (group 0 of TP "
                    f"{self.tensor_parallel_size}: {len(self.group_q_heads())} gathered q "
                    f"heads over {len(per_rank.kv_heads)} KV head(s) per rank, {heads}, "
                    f"interleave {self.cp_kv_cache_interleave_size}), LSE base "
                    f"{self.lse_base}")
        replicas = self.shard(0).kv_replicas
        extra = f", each KV head on {replicas} ranks" if replicas > 1 else ""
        return (f"TP {self.tensor_parallel_size} ({self.heads_per_rank} q / "
                f"{len(self.shard(0).kv_heads)} KV heads per rank of {heads}{extra})")


class ShardOptions(BaseModel):
    """How a shard check runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    kernels: Literal["native", "torch"] = "native"
    """``native``: the backend's real kernels; ``torch``: the plain-torch stand-in."""
    merge_lse_base: Literal["e", "2", "swapped"] | None = None
    """Merge as if the kernels returned this base (``swapped``: the other one of each
    plan's), a deliberate mix-up to prove the check catches one; None: the data's base."""
    repeats: Annotated[int, Field(ge=1, le=1000)] = 5
    device: str | None = None
    """torch device (default: ``cuda`` with native kernels, ``cpu`` with the stand-in)."""
