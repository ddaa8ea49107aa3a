"""The GPU model runner rule (model-runner.yaml, selector/memory/runner.py): the one
statement the memory budget and the speculative draft both read. The runner of every
recorded draft case is vLLM's answer (tests/golden/test_draft_oracle.py); these cases
pin the branches of ``VllmConfig.use_v2_model_runner`` the recordings do not reach, each
read from the release's vllm/config/vllm.py (the lines in the data files)."""

from __future__ import annotations

import pytest

from selector.catalog import load_catalog
from selector.memory.runner import RunnerData, model_runner, runner_data, spec_decode_capture_sizes


def _data(release: str) -> RunnerData:
    data = runner_data(load_catalog(), release)
    assert data is not None
    return data


@pytest.mark.parametrize(("release", "architectures", "moe", "hybrid", "runner"), [
    # _is_default_v2_model_runner_model (0.25.1-0.28.0): an MoE architecture outside the
    # list and every hybrid start V1; 0.27.0 on, a listed hybrid starts V2
    ("vllm==0.25.1", ("DeepseekV3ForCausalLM",), True, False, "v1"),
    ("vllm==0.25.1", ("DeepseekV2ForCausalLM",), True, False, "v2"),
    ("vllm==0.25.1", ("LlamaForCausalLM",), False, False, "v2"),
    ("vllm==0.25.1", ("KimiK3ForConditionalGeneration",), True, True, "v1"),
    ("vllm==0.27.0", ("KimiK3ForConditionalGeneration",), True, True, "v2"),
    ("vllm==0.28.0", ("Qwen3NextForCausalLM",), True, True, "v1"),
    # 0.29.0 on: no model rule
    ("vllm==0.29.0", ("Qwen3NextForCausalLM",), True, True, "v2"),
    ("vllm==0.33.0", ("DeepseekV3ForCausalLM",), True, False, "v2"),
])
def test_the_model_rule(release: str, architectures: tuple[str, ...], moe: bool,
                        hybrid: bool, runner: str) -> None:
    choice = model_runner(_data(release), architectures=architectures, moe=moe, hybrid=hybrid)
    assert choice.runner == runner and choice.refusal is None


def test_a_forced_runner_that_lacks_the_method_refuses_in_vllms_words() -> None:
    """_validate_v2_model_runner of 0.25.1 (vllm/config/vllm.py:2137-2147) with
    VLLM_USE_V2_MODEL_RUNNER=1 and n-gram speculation; left to itself vLLM falls back to V1."""
    data = _data("vllm==0.25.1")
    forced = model_runner(data, architectures=("LlamaForCausalLM",), moe=False, hybrid=False,
                          method="ngram", environ={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert forced.runner == "v2"
    assert forced.refusal == "Model Runner V2 does not yet support: ngram/ngram_gpu speculative decoding"
    default = model_runner(data, architectures=("LlamaForCausalLM",), moe=False, hybrid=False,
                           method="ngram")
    assert default.runner == "v1" and default.refusal is None
    # 0.25.1 has no V1 validation: V1 refuses none of the draft's features
    v1 = model_runner(data, architectures=("LlamaForCausalLM",), moe=False, hybrid=False,
                      method="eagle3", keys={"enable_adaptive_verification": True},
                      environ={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert v1.runner == "v1" and v1.refusal is None


def test_the_v1_spec_decode_rounding_keeps_only_multiples() -> None:
    """adjust_cudagraph_sizes_for_spec_decode: sizes above the largest once rounded are
    dropped; none left: the decode query itself; V2 and PIECEWISE graphs keep the sizes."""
    data = _data("vllm==0.33.0")
    sizes = (1, 2, 4, 8)
    assert spec_decode_capture_sizes(data, sizes, runner="v1", cudagraph_mode="FULL_AND_PIECEWISE",
                                     decode_query_len=3) == (3, 6)
    assert spec_decode_capture_sizes(data, (1, 2), runner="v1", cudagraph_mode="FULL",
                                     decode_query_len=2) == (2,)
    assert spec_decode_capture_sizes(data, sizes, runner="v2", cudagraph_mode="FULL",
                                     decode_query_len=3) == sizes
    assert spec_decode_capture_sizes(data, sizes, runner="v1", cudagraph_mode="PIECEWISE",
                                     decode_query_len=3) == sizes


def test_step5_builds_on_model_runner_v2_only() -> None:
    """0.33.0's _get_v1_model_runner_unsupported_features (vllm/config/vllm.py:3145-3149)
    lists Step5: forced onto V1 it is refused in vLLM's words; left to itself it starts V2
    (the Step5 reference answers were recorded on V2: tools/model_driven_reference.py
    --gpu-runner)."""
    data = _data("vllm==0.33.0")
    for architecture in ("Step5ForCausalLM", "Step5ForConditionalGeneration"):
        default = model_runner(data, architectures=(architecture,), moe=False, hybrid=False)
        assert default.runner == "v2" and default.refusal is None
        forced = model_runner(data, architectures=(architecture,), moe=False, hybrid=False,
                              environ={"VLLM_USE_V2_MODEL_RUNNER": "0"})
        assert forced.runner == "v1"
        assert forced.refusal == "Model Runner V1 does not support: Step5"
    # the release before has no Step5 entry
    before = _data("vllm==0.32.0").v1_unsupported
    assert before is not None and not before.architectures
