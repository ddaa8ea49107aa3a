"""`check` and the smoke's shard check (``ShardPlan``) agree on which TP / DCP splits
vLLM refuses at start-up: random head counts and TP / DCP sizes, one predicate
(selector/memory/dcp.py) behind both. vLLM's own answers: tests/golden/test_dcp_oracle.py."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from selector.catalog import load_catalog
from selector.checkrun import CheckOptions
from selector.inputs.config import parse_deployment
from selector.parallel.plan import ShardPlan
from selector.pipeline.check import check_deployment
from selector.smoke.plan import kernel_calls_file


@st.composite
def splits(draw: st.DrawFn) -> tuple[int, int, int, int]:
    kv_heads = draw(st.sampled_from([1, 2, 4, 8, 16]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
    tp = draw(st.sampled_from([d for d in (1, 2, 3, 4, 6, 8, 12, 16, 32) if heads % d == 0]))
    dcp = draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    return heads, kv_heads, tp, dcp


def _kv_heads_split(kv_heads: int, tp: int) -> bool:
    return kv_heads % tp == 0 if tp <= kv_heads else tp % kv_heads == 0


@settings(max_examples=150, deadline=None)
@given(split=splits())
def test_check_and_the_shard_check_agree_on_refused_splits(split: tuple[int, int, int, int]
                                                           ) -> None:
    heads, kv_heads, tp, dcp = split
    loaded = parse_deployment("split.yaml", (
        "device: H200\ndtype: bfloat16\n"
        f"layer: {{head_size: 128, num_heads: {heads}, num_kv_heads: {kv_heads}}}\n"
        f"parallel: {{tensor_parallel_size: {tp}, decode_context_parallel_size: {dcp}}}\n"))
    record = check_deployment(loaded, load_catalog(), CheckOptions(engine="vllm==0.33.0"))
    check_refuses = any(f.field == "parallel.decode_context_parallel_size"
                        and f.code.startswith("SU") for f in record.findings)
    if not _kv_heads_split(kv_heads, tp):  # the shard plan's own input rule, not vLLM's
        return
    try:
        ShardPlan(name="p", backend="FLASH_ATTN", engine="vllm==0.33.0",
                  kernel_calls=kernel_calls_file("vllm==0.33.0", load_catalog()),
                  kernel_block_size=16, head_size=128,
                  num_heads=heads, num_kv_heads=kv_heads, tensor_parallel_size=tp,
                  decode_context_parallel_size=dcp, lse_base="e")
        smoke_refuses = False
    except ValidationError as error:
        assert "vLLM refuses this TP/DCP split" in str(error), error
        smoke_refuses = True
    assert check_refuses == smoke_refuses, (split, record.findings)
    event("refused" if check_refuses else "accepted")
    if check_refuses:
        assert record.failed and record.status == "invalid"
