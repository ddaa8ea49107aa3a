"""A conv cache keeps the model's dtype under ``--kv-cache-dtype fp8`` while the attention
beside it is fp8 (Inkling: ``InklingConvState`` reads ``model_config.dtype``,
vllm/models/inkling/nvidia/sconv_swa_attn.py:168-172, ``InklingAttention`` the cache
dtype, attention.py:161-167). vLLM 0.33.0's answer on the emulated SM90
(tools/model_driven_reference.py --capability 9.0 --kv-cache-dtype fp8 --backends, the
synthetic Inkling config): tests/golden/vllm_models/kv_dtype/vllm-0.33.0-inkling-fp8.jsonl.gz,
compared cache by cache and group by group as tests/golden/test_vllm_model_agreement.py does."""

from __future__ import annotations

from tools import oracle
from tools.model_agreement import GOLDEN, agreements_of

ANSWERS = GOLDEN / "kv_dtype" / "vllm-0.33.0-inkling-fp8.jsonl.gz"


def test_the_conv_cache_keeps_the_models_dtype_under_an_fp8_kv_cache() -> None:
    answers = [a for a in oracle.read_jsonl(ANSWERS) if "layers" in a]
    assert answers and all(a["kv_cache_dtype"] == "fp8" for a in answers)
    conv = [r for a in answers for r in a["layers"] if r["module"] == "InklingConvState"]
    assert conv and {r["dtype"] for r in conv} == {"bfloat16"}
    for result in agreements_of(answers):
        assert result.ok, (result.config, result.differences, result.group_differences)
        assert result.agreeing == result.layers and result.groups_agreeing == result.groups
