"""The family's ``attention.conv_cache`` (Inkling's ``InklingConvState``): every decoder layer
registers a short-convolution state as a sliding-window cache of its own before its
attention, on the backend its module returns. vLLM 0.33.0's answers for the same configs
(tests/golden/vllm_models/vllm-0.33.0-inkling.jsonl.gz) are compared cache by cache and
group by group in tests/golden/test_vllm_model_agreement.py; these pin the rule's parts
the agreement does not reach (the plan's registration order and the TP bound)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selector.errors import InputError
from selector.models import load_model
from selector.models.tensor_parallel import shard_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
SYNTHETIC = FIXTURES / "synthetic" / "InklingForCausalLM.json"


def test_the_conv_view_is_a_sliding_cache_of_its_own_block() -> None:
    layer = load_model(SYNTHETIC).layers[0]  # a local layer: 2 KV heads of 64
    assert layer.conv_cache is not None
    view = layer.conv_view()
    # 2 * 64 + 2 * (1536 // 2) = 1664, rounded up to 2048 (sconv_swa_attn.py:151-157)
    assert (view.head_size, view.head_size_v, view.num_kv_heads) == (2048, 0, 2)
    assert (view.sliding_window, view.own_block_size) == (4, 4)
    assert view.model_backend == "INKLING_SCONV_SWA"
    assert view.kv_cache_dtype == "auto"  # the model's dtype, not --kv-cache-dtype
    assert view.conv_cache is None


def test_tensor_parallel_beyond_the_kv_heads_is_refused_in_vllms_words() -> None:
    model = load_model(SYNTHETIC)
    assert shard_model(model, 2).layers[0].conv_cache.num_kv_heads == 1  # type: ignore[union-attr]
    with pytest.raises(InputError, match=r"sconv SWA cache supports tp_size <= num_kv_heads \(2\), got 4"):
        shard_model(model, 4)
