"""The shard check with the real kernels (``gpu`` marker: FA3 via vLLM's kernels and
FlashInfer, on one GPU; the NCCL run on two)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.parallel.plan import ShardOptions, ShardPlan
from selector.pipeline.smoke import shard_plans
from selector.smoke.plan import SmokePlan

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).parent.parent.parent / "examples" / "parallel"


def _plans(name: str) -> list[ShardPlan]:
    from selector.cli.smoke import _deployment_plans

    config = EXAMPLES / f"{name}.yaml"
    smoke: list[SmokePlan] = _deployment_plans(config, True)
    plans, skipped = shard_plans(config, smoke, catalog=load_catalog())
    assert not skipped
    return plans


@pytest.mark.parametrize("name", ["gqa-32q-2kv-h200-tp8-dcp2", "gqa-32q-2kv-h200-tp8-dcp4",
                                  "llama-3.1-70b-attn-h200-tp8",
                                  "llama-3.1-70b-attn-h200-tp16"])
def test_real_kernels_merge_to_the_reference(name: str) -> None:
    from selector.parallel.simulate import run_shard_check

    report = run_shard_check(_plans(name), ShardOptions())
    assert {p.backend for p in report.plans} >= {"FLASH_ATTN"}
    assert report.passed, "\n".join(report.render_lines())


def test_real_kernels_lse_mixup_fails() -> None:
    from selector.parallel.simulate import run_shard_check

    report = run_shard_check(_plans("gqa-32q-2kv-h200-tp8-dcp2"),
                             ShardOptions(merge_lse_base="swapped"))
    assert [p.passed for p in report.plans] == [False] * len(report.plans)


def test_two_gpus_over_nccl() -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, torch sees {torch.cuda.device_count()}")
    from selector.parallel.distributed import run_distributed

    report = run_distributed(_plans("gqa-32q-2kv-h200-tp8-dcp2"),
                             ShardOptions(), processes=2)
    assert report.passed, "\n".join(report.render_lines())
    assert all(p.collective_us is not None for p in report.plans)
