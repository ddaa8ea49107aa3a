"""tools/vllm_model_reference.py tells vLLM's refusal from the harness failing: a
refusal is a ValueError / AssertionError / NotImplementedError raised by vLLM's (or
transformers', pydantic's validating vLLM's config) own code; anything else is a
harness failure, which is never recorded (no vLLM needed here)."""

from __future__ import annotations

import pytest

from tools.vllm_model_reference import _refusal


def _raised(code: str, filename: str) -> BaseException:
    try:
        exec(compile(code, filename, "exec"), {})
    except BaseException as exc:
        return exc
    raise AssertionError("nothing raised")


SITE = "/venv/lib/python3.11/site-packages"


@pytest.mark.parametrize(
    ("code", "filename", "refused"),
    [
        ("assert False, 'Sliding window for some but all layers is not supported'",
         f"{SITE}/vllm/model_executor/models/qwen2.py", True),
        ("raise ValueError('mamba_n_heads must divide mamba_expand * hidden_size')",
         f"{SITE}/transformers/models/falcon_h1/configuration_falcon_h1.py", True),
        ("raise ValueError('not supported for now')", f"{SITE}/pydantic/_internal/_dataclasses.py", True),
        ("raise ImportError('tilelang is required for mhc')", f"{SITE}/vllm/tilelang_utils/__init__.py", False),
        ("raise RuntimeError('Cannot access accelerator device')", f"{SITE}/torch/utils/_device.py", False),
        ("raise ValueError('a stub answered')", "/repo/tools/vllm_model_reference.py", False),
        ("raise AttributeError('_InertOp')", f"{SITE}/vllm/model_executor/layers/linear.py", False),
    ],
)
def test_refusal_or_harness_failure(code: str, filename: str, refused: bool) -> None:
    assert _refusal(_raised(code, filename)) is refused


class _StrictValidationError(Exception):
    """Stands in for huggingface_hub's StrictDataclassClassValidationError (no ValueError)."""


def test_a_wrapped_config_class_refusal_is_vllms() -> None:
    """transformers' strict config validation raises its ValueError inside
    huggingface_hub's own error type: the cause decides."""
    cause = _raised("raise ValueError('mamba_n_heads must divide mamba_expand * hidden_size')",
                    f"{SITE}/transformers/models/falcon_h1/configuration_falcon_h1.py")
    wrapped = _StrictValidationError("Class validation error for validator 'validate_architecture'")
    wrapped.__cause__ = cause
    assert _refusal(wrapped)
    assert not _refusal(_StrictValidationError("no cause"))
