"""Pipeline parallelism: which decoder layers each stage holds, as vLLM's
``get_pp_indices`` splits them (vllm/distributed/utils.py:198-241 in 0.33.0, the same
rule in 0.25.1), with ``VLLM_PP_LAYER_PARTITION`` or evenly, the remainder going to the
stages before the last (checked against vLLM's own answers: tests/golden/test_pp_stages.py)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PARTITION_ENV", "PartitionRefusal", "pp_stages"]

PARTITION_ENV = "VLLM_PP_LAYER_PARTITION"


@dataclass(frozen=True)
class PartitionRefusal:
    """vLLM's ValueError for a ``VLLM_PP_LAYER_PARTITION`` it refuses: which check and
    the values its message names."""

    check: str
    """``invalid`` (not integers), ``count`` (not one per stage), ``sum`` (not every layer)."""
    values: dict[str, str]


def pp_stages(num_layers: int, pp_size: int,
              partition: str | None = None) -> tuple[tuple[int, int], ...] | PartitionRefusal:
    """Each stage's decoder layers ``[start, end)``, or vLLM's refusal of the partition."""
    if partition is not None:
        try:
            sizes = [int(part) for part in partition.split(",")]
        except ValueError:
            return PartitionRefusal("invalid", {"partition": partition})
        if len(sizes) != pp_size:
            return PartitionRefusal("count", {"count": str(len(sizes)), "pp_size": str(pp_size)})
        if sum(sizes) != num_layers:
            return PartitionRefusal("sum", {"total": str(sum(sizes)),
                                            "num_layers": str(num_layers)})
    else:
        sizes = [num_layers // pp_size] * pp_size
        for index in range(2, num_layers % pp_size + 2):
            sizes[-index] += 1
    starts = [sum(sizes[:rank]) for rank in range(pp_size)]
    return tuple((start, start + size) for start, size in zip(starts, sizes, strict=True))
