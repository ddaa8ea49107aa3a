"""vLLM's DCP token-to-rank and TP head-to-rank rules (pure Python; no torch).

Expected values come from vLLM 0.33.0's own functions (tests/fixtures/parallel, written
by tools/parallel_oracle.py): ``get_dcp_local_seq_lens``, ``ModelConfig.get_num_kv_heads``
and ``verify_with_parallel_config``, and the LSE base its DCP combine is called with.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vllm_facts import vllm_facts

from selector.catalog import load_catalog
from selector.memory import dcp_issue, startup_profile
from selector.parallel.sharding import (
    dcp_group_ranks,
    dcp_local_position,
    dcp_local_seq_len,
    dcp_owner,
    head_shard,
)
from selector.parallel.workload import dcp_slot, shard_workload


def test_local_seq_lens_match_vllm() -> None:
    rows = vllm_facts()["get_dcp_local_seq_lens"]
    assert len(rows) == 72  # 5 DCP sizes x their ranks x 4 interleaves
    for row in rows:
        ours = [dcp_local_seq_len(n, row["dcp"], row["rank"], row["interleave"])
                for n in range(len(row["local"]))]
        assert ours == row["local"], row


@pytest.mark.parametrize("block_size", [16, 64])
def test_slots_fill_exactly_the_tokens_vllm_counts(block_size: int) -> None:
    """Each rank's tokens land on its local positions 0 .. n-1 (n = vLLM's local length)
    through the shared block table: what the rank's attention call then reads."""
    for row in vllm_facts()["get_dcp_local_seq_lens"]:
        dcp, rank, interleave = row["dcp"], row["rank"], row["interleave"]
        if block_size % interleave:
            continue
        seq_len = len(row["local"]) - 1
        pages = tuple(range(100, 100 + -(-seq_len // (block_size * dcp)) + 1))
        slots = [dcp_slot(p, pages, block_size, dcp, rank, interleave) for p in range(seq_len)]
        mine = [s for s in slots if s is not None]
        local = [(pages.index(s // block_size)) * block_size + s % block_size for s in mine]
        assert sorted(local) == list(range(row["local"][seq_len])), row
        assert local == sorted(local)  # rank-local order follows the sequence


@given(seq_len=st.integers(0, 400), dcp=st.sampled_from([1, 2, 3, 4, 8]),
       interleave=st.sampled_from([1, 2, 4, 8, 16]))
def test_every_token_has_exactly_one_owner(seq_len: int, dcp: int, interleave: int) -> None:
    owners = [dcp_owner(p, dcp, interleave) for p in range(seq_len)]
    for rank in range(dcp):
        positions = [p for p, owner in enumerate(owners) if owner == rank]
        assert len(positions) == dcp_local_seq_len(seq_len, dcp, rank, interleave)
        assert [dcp_local_position(p, dcp, interleave) for p in positions] == \
            list(range(len(positions)))


def test_kv_heads_per_rank_and_dcp_limits_match_vllm() -> None:
    catalog = load_catalog()
    profile = startup_profile(catalog, "vllm==0.33.0")
    rows = vllm_facts()["heads"]
    assert any(row["error"] for row in rows) and any(not row["error"] for row in rows)
    for row in rows:
        tp, heads, kv_heads = row["tp"], row["num_heads"], row["num_kv_heads"]
        shards = [head_shard(rank, tp, heads, kv_heads) for rank in range(tp)]
        assert all(len(s.kv_heads) == row["kv_heads_per_rank"] for s in shards), row
        issue = dcp_issue(catalog, profile, tp_size=tp, dcp_size=row["dcp"], num_heads=heads,
                          num_kv_heads=kv_heads, use_mla=False)
        assert (issue.message if issue else None) == row["error"], row


@pytest.mark.parametrize(("tp", "heads", "kv_heads"), [(2, 64, 8), (8, 64, 8), (16, 64, 8),
                                                       (8, 32, 2)])
def test_head_shards_cover_the_model_and_keep_gqa_groups(tp: int, heads: int,
                                                        kv_heads: int) -> None:
    shards = [head_shard(rank, tp, heads, kv_heads) for rank in range(tp)]
    assert [h for s in shards for h in s.q_heads] == list(range(heads))
    group = heads // kv_heads
    for shard in shards:  # every query head's KV head is on its rank
        assert {h // group for h in shard.q_heads} <= set(shard.kv_heads)
    if tp > kv_heads:
        assert all(s.kv_replicas == tp // kv_heads for s in shards)


def test_dcp_groups_are_consecutive_tp_ranks() -> None:
    assert dcp_group_ranks(8, 2) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert dcp_group_ranks(8, 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_backend_lse_base_is_what_vllms_dcp_combine_reads() -> None:
    engine = load_catalog().engine("vllm==0.33.0")
    for backend, fact in vllm_facts()["dcp_combine_lse_base"].items():
        assert fact["lines"], fact
        assert engine.backend(backend).runtime.lse_base == fact["lse_base"], backend


def test_workload_hits_the_split_edges() -> None:
    workload = shard_workload(16, dcp_size=4, interleave=1)
    lengths = {r.id: r for r in workload.requests}
    short = lengths["decode-short"]
    assert workload.local_len(short.context_len, 3) == 0  # an empty shard
    assert lengths["decode-full-virtual-block"].seq_len % (16 * 4) == 0
    assert any(r.query_len > 1 for r in workload.requests)
    decodes = [r.query_len == 1 for r in workload.requests]
    assert decodes == sorted(decodes, reverse=True)  # decodes first
    assert 0 not in {b for r in workload.requests for b in r.block_ids}


def test_dry_run_without_torch() -> None:
    """``smoke --dry-run`` of a DCP deployment: the ranks' reads and calls, no torch."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    config = Path(__file__).parents[2] / "examples" / "parallel" / "gqa-32q-2kv-h200-tp8-dcp2.yaml"
    code = ("import json, sys; from selector.cli import main; sys.argv = ['attn-select', "
            f"'smoke', {str(config)!r}, '--dry-run', '--format', 'json', '--parity']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, 'dry run imported torch'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    data = json.loads(result.stdout)
    assert "plans" not in data  # DCP: the standard smoke does not run
    shards = {s["plan"]["backend"]: s for s in data["shards"]}
    assert shards["FLASHINFER"]["merge"]["lse_base"] == "2"
    assert shards["FLASH_ATTN"]["merge"]["lse_base"] == "e"
    workload = shard_workload(16, dcp_size=2)
    for rank in shards["FLASH_ATTN"]["ranks"]:
        assert rank["kv_lens_read"] == [
            dcp_local_seq_len(r.context_len, 2, rank["rank"]) for r in workload.requests]
