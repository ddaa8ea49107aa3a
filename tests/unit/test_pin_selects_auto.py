"""A MiniMax M3 MSA alias (``pin_selects_auto``: vLLM 0.27.0+ ``AttentionConfig.__post_init__``,
0.33.0 ``config/attention.py:172-181``) answers by the path that gives it:
``AttentionConfig.backend`` (``--attention-config.backend``, a flat config's
``attention_backend`` as vLLM's recorded answers give it) is automatic selection, while
``--attention-backend`` is set after that rewrite (``engine/arg_utils.py:2727-2737``), so the
platform validates the alias's class (its validation facts are MINIMAX_M3_SPARSE's; vLLM's
answers: tests/golden/test_rocm_oracle.py and test_cuda_pinned.py)."""

from __future__ import annotations

import pytest

from selector.catalog import load_catalog
from selector.inputs.serve import parse_serve_command
from selector.solver import select, solve
from selector.solver.compiled import compiled_for

FACTS = {"cc": 94, "head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto",
         "block_size": None, "use_mla": False}
RELEASE = "vllm==0.33.0"


@pytest.mark.parametrize("platform", ["rocm", "cuda"])
@pytest.mark.parametrize("alias", ["CUTLASS_MSA", "TRITON_MSA"])
def test_an_msa_alias_through_attention_config_is_auto_selection(alias: str, platform: str) -> None:
    catalog = load_catalog()
    engine = catalog.engine(RELEASE, platform)
    assert engine.backends[alias].pin_selects_auto
    compiled = compiled_for(engine, catalog=catalog)
    facts = {**compiled.defaults, **FACTS, "cc": 94 if platform == "rocm" else 90}
    pinned = select(compiled, facts, alias)
    auto = select(compiled, facts, None)
    assert pinned.selected == auto.selected is not None
    assert pinned.error is None


@pytest.mark.parametrize("platform", ["rocm", "cuda"])
@pytest.mark.parametrize("alias", ["CUTLASS_MSA", "TRITON_MSA"])
def test_an_msa_alias_through_the_flag_is_validated_as_its_class(alias: str, platform: str) -> None:
    catalog = load_catalog()
    engine = catalog.engine(RELEASE, platform)
    facts = {**FACTS, "cc": 94 if platform == "rocm" else 90}
    result = solve(facts, engine=engine, attention_backend=alias, catalog=catalog)
    assert result.selected is None and result.error is not None
    # the class's answer for a dense layer with KV auto: no "auto" among its kv-cache
    # dtypes, not sparse (as vLLM answers for MINIMAX_M3_SPARSE pinned on CUDA)
    reasons = next(v for v in result.verdicts if v.backend == alias).reasons
    assert [r.message for r in reasons] == ["kv_cache_dtype not supported", "non-sparse not supported"]
    assert (f"Selected backend AttentionBackendEnum.{alias} is not valid for this configuration. "
            "Reason: ['kv_cache_dtype not supported', 'non-sparse not supported']") in result.error.message


def test_the_serve_paths_differ() -> None:
    catalog = load_catalog()
    base = ["vllm", "serve", "llama-3.1-8b"]
    flag = parse_serve_command([*base, "--attention-backend", "CUTLASS_MSA"], device="H200",
                               catalog=catalog, engine=RELEASE)
    config = parse_serve_command([*base, "--attention-config.backend", "CUTLASS_MSA"],
                                 device="H200", catalog=catalog, engine=RELEASE)
    assert flag.deployment.attention_backend == "CUTLASS_MSA"
    assert config.deployment.attention_backend is None
