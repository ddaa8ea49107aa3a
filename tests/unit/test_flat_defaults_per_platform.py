"""A flat config's defaults are the profile's own, per release *and* platform.

Regression: the defaults were once cached by release only, so a CUDA check before a ROCm
one in the same process gave the ROCm check CUDA's environment defaults (and ROCm's
AITER switches were not in its vocabulary): the order of two checks changed an answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.inputs import flat

RELEASE = "vllm==0.33.0"


def _config() -> dict[str, Any]:
    return {"head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto",
            "block_size": None, "use_mla": False, "device_capability": "9.4"}


@pytest.mark.parametrize("first", ["cuda", "rocm"])
def test_the_defaults_of_one_platform_do_not_leak_into_the_other(first: str) -> None:
    catalog = load_catalog()
    profiles = {name: catalog.engine(RELEASE, name).profile for name in ("cuda", "rocm")}
    flat._DEFAULTS.clear()
    order = [first, "rocm" if first == "cuda" else "cuda"]
    seen = {name: flat._defaults(profiles[name]) for name in order}
    for name, (defaults, vocabulary) in seen.items():
        profile = profiles[name]
        assert vocabulary == frozenset({**profile.inputs, **profile.environment})
        assert set(profile.environment) <= set(defaults)
    assert "env_rocm_use_aiter" in seen["rocm"][1]
    assert "env_rocm_use_aiter" not in seen["cuda"][1]
    # both platforms state whether vLLM's FlashMLA extension is built: CUDA's wheel builds
    # it, ROCm never does (its backend files read the fact there too)
    assert (seen["cuda"][0]["env_flashmla_built"], seen["rocm"][0]["env_flashmla_built"]) \
        == (True, False)


def test_a_rocm_switch_in_a_flat_config_reaches_the_rocm_facts_after_a_cuda_check() -> None:
    catalog = load_catalog()
    flat._DEFAULTS.clear()
    cuda, rocm = (catalog.engine(RELEASE, name).profile for name in ("cuda", "rocm"))
    flat.facts_from_flat(_config(), cuda)
    facts, _ = flat.facts_from_flat({**_config(), "env_rocm_use_aiter": True}, rocm)
    assert facts.stated["env_rocm_use_aiter"] is True
    assert facts.stated["env_flashmla_built"] is False  # ROCm's default, not CUDA's
