"""A pin that vLLM's config turns into automatic selection (``pin_selects_auto``: the
MiniMax M3 MSA aliases, vLLM 0.27.0+ ``AttentionConfig.__post_init__``) is automatic
selection: ``solve`` answers it as no pin at all, and the name still has its own reasons
(vLLM's answers for the pinned family: tests/golden/test_rocm_oracle.py)."""

from __future__ import annotations

import pytest

from selector.catalog import load_catalog
from selector.solver import solve

FACTS = {"cc": 94, "head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto",
         "block_size": None, "use_mla": False}


@pytest.mark.parametrize("alias", ["CUTLASS_MSA", "TRITON_MSA"])
def test_an_msa_alias_pinned_on_rocm_is_auto_selection(alias: str) -> None:
    catalog = load_catalog()
    engine = catalog.engine("vllm==0.33.0", "rocm")
    assert engine.backends[alias].pin_selects_auto
    pinned = solve(FACTS, engine=engine, attention_backend=alias, catalog=catalog)
    auto = solve(FACTS, engine=engine, catalog=catalog)
    assert (pinned.mode, pinned.requested_backend) == ("auto", None)
    assert pinned.selected == auto.selected is not None
    # the alias's class answers "kv_cache_dtype not supported" for auto (no "auto" among
    # MiniMaxM3SparseBackend's kv-cache dtypes), which decides nothing
    assert [r.code for r in next(v for v in pinned.verdicts if v.backend == alias).reasons]


def test_no_cuda_backend_is_an_alias() -> None:
    catalog = load_catalog()
    for name in catalog.engine_names:
        assert not any(b.pin_selects_auto for b in catalog.engine(name, "cuda").backends.values())
