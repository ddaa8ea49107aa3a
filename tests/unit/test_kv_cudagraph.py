"""CUDA-graph mode resolution (reference section 9): the summary matrix, the
exact warning and error texts, and the plain-language cost."""

from __future__ import annotations

import pytest

from selector.kv import resolve_cudagraph_mode
from selector.kv.cudagraph import minimum_support

FI = "FlashInferBackend"


@pytest.mark.parametrize(
    ("support", "spec", "resolved"),
    [
        ("ALWAYS", 1, "FULL_AND_PIECEWISE"),
        ("UNIFORM_BATCH", 1, "FULL_AND_PIECEWISE"),
        ("UNIFORM_BATCH", 3, "FULL_AND_PIECEWISE"),
        ("UNIFORM_SINGLE_TOKEN_DECODE", 1, "FULL_AND_PIECEWISE"),
        ("UNIFORM_SINGLE_TOKEN_DECODE", 2, "PIECEWISE"),
        ("NEVER", 1, "PIECEWISE"),
    ],
)
def test_default_mode_matrix(support: str, spec: int, resolved: str) -> None:
    result = resolve_cudagraph_mode(
        "FULL_AND_PIECEWISE",
        support,
        FI,
        uniform_decode_query_len=spec,  # type: ignore[arg-type]
    )
    assert result.resolved == resolved and result.error is None


@pytest.mark.parametrize(
    ("support", "split", "resolved"),
    [
        ("ALWAYS", True, "FULL"),
        ("UNIFORM_BATCH", True, "FULL_AND_PIECEWISE"),
        ("UNIFORM_SINGLE_TOKEN_DECODE", True, "FULL_AND_PIECEWISE"),
        ("UNIFORM_BATCH", False, "FULL_DECODE_ONLY"),
    ],
)
def test_requested_full_matrix(support: str, split: bool, resolved: str) -> None:
    result = resolve_cudagraph_mode(
        "FULL",
        support,
        FI,
        attention_in_splitting_ops=split,  # type: ignore[arg-type]
    )
    assert result.resolved == resolved


def test_full_with_uniform_batch_warning_text() -> None:
    result = resolve_cudagraph_mode("FULL", "UNIFORM_BATCH", FI)
    assert result.warnings == (
        "CUDAGraphMode.FULL is not supported with FlashInferBackend backend (support: "
        "AttentionCGSupport.UNIFORM_BATCH); setting cudagraph_mode=FULL_AND_PIECEWISE",
    )
    assert result.cost[0].startswith("prefill and mixed batches run piecewise instead of full")
    assert result.severity == "minor"


def test_full_with_never_is_an_error() -> None:
    result = resolve_cudagraph_mode("FULL", "NEVER", "FlexAttentionBackend")
    assert result.resolved is None and result.severity == "fatal"
    assert result.error == (
        "CUDAGraphMode.FULL is not supported with FlexAttentionBackend backend (support: "
        "AttentionCGSupport.NEVER); please try cudagraph_mode=PIECEWISE, and make sure "
        "compilation mode is VLLM_COMPILE"
    )


def test_never_downgrades_to_piecewise_or_none() -> None:
    backend = "ChunkedLocalAttention_8192_FlashAttentionBackend"
    result = resolve_cudagraph_mode("FULL_AND_PIECEWISE", "NEVER", backend)
    assert result.warnings == (
        "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with "
        "ChunkedLocalAttention_8192_FlashAttentionBackend backend (support: "
        "AttentionCGSupport.NEVER); setting cudagraph_mode=PIECEWISE because attention is "
        "compiled piecewise",
    )
    assert (result.decode_graphs, result.mixed_graphs) == ("piecewise", "piecewise")
    assert result.severity == "minor"
    eager = resolve_cudagraph_mode("FULL_AND_PIECEWISE", "NEVER", backend, vllm_compile=False)
    assert eager.resolved == "NONE"
    assert eager.warnings[0].endswith(
        "setting cudagraph_mode=NONE because attention is not compiled piecewise"
    )
    assert eager.severity == "major"
    partition = resolve_cudagraph_mode(
        "FULL_DECODE_ONLY",
        "NEVER",
        backend,
        attention_in_splitting_ops=False,
        inductor_graph_partition=True,
    )
    assert partition.resolved == "PIECEWISE"


def test_spec_decode_warning_text() -> None:
    result = resolve_cudagraph_mode(
        "FULL_AND_PIECEWISE", "UNIFORM_SINGLE_TOKEN_DECODE", FI, uniform_decode_query_len=3
    )
    assert result.warnings == (
        "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with spec-decode for attention "
        "backend FlashInferBackend (support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); "
        "setting cudagraph_mode=PIECEWISE",
    )
    not_split = resolve_cudagraph_mode(
        "FULL_DECODE_ONLY",
        "UNIFORM_SINGLE_TOKEN_DECODE",
        FI,
        uniform_decode_query_len=3,
        attention_in_splitting_ops=False,
    )
    assert not_split.resolved == "NONE" and not_split.severity == "major"


def test_no_piecewise_capture() -> None:
    result = resolve_cudagraph_mode(
        "FULL_AND_PIECEWISE", "ALWAYS", FI, piecewise_capture_available=False
    )
    assert result.resolved == "FULL_DECODE_ONLY"
    assert result.warnings == (
        "Cudagraph mode FULL_AND_PIECEWISE requires piecewise capture, but the loaded model "
        "provides neither a compiled submodule nor breakable CUDA graphs. Overriding to "
        "FULL_DECODE_ONLY.",
    )
    assert result.severity == "major"  # mixed batches lose every graph
    assert (
        resolve_cudagraph_mode(
            "PIECEWISE", "ALWAYS", FI, piecewise_capture_available=False
        ).resolved
        == "NONE"
    )


def test_none_and_unset() -> None:
    assert resolve_cudagraph_mode("NONE", "NEVER", None).resolved == "NONE"
    assert resolve_cudagraph_mode(None, "ALWAYS", None).resolved == "NONE"


def test_cost_mentions_single_token_decode_graphs() -> None:
    result = resolve_cudagraph_mode("FULL_AND_PIECEWISE", "UNIFORM_SINGLE_TOKEN_DECODE", FI)
    assert result.severity == "none"
    assert "q_len == 1" in result.cost[0]


def test_minimum_support_names_the_first_backend_at_the_minimum() -> None:
    assert minimum_support([]) == ("ALWAYS", None)
    pairs = [("ALWAYS", "A"), ("UNIFORM_BATCH", "B"), ("UNIFORM_BATCH", "C"), ("ALWAYS", "D")]
    assert minimum_support(pairs) == ("UNIFORM_BATCH", "B")  # type: ignore[arg-type]
