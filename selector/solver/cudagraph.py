"""CUDA-graph mode resolution (vLLM 0.33.0 ``resolve_cudagraph_mode_and_sizes``)."""

from __future__ import annotations

from dataclasses import dataclass

from selector.schema.types import CG_SUPPORT_LEVELS

__all__ = ["CudaGraphResolution", "resolve_cudagraph_mode"]

_DECODE_MIXED = {
    "NONE": ("NONE", "NONE"),
    "PIECEWISE": ("PIECEWISE", "PIECEWISE"),
    "FULL": ("FULL", "FULL"),
    "FULL_DECODE_ONLY": ("FULL", "NONE"),
    "FULL_AND_PIECEWISE": ("FULL", "PIECEWISE"),
}


@dataclass(frozen=True)
class CudaGraphResolution:
    mode: str
    messages: tuple[str, ...]
    error: str | None = None


def _level(support: str) -> int:
    return CG_SUPPORT_LEVELS.index(support)


def resolve_cudagraph_mode(
    requested: str,
    support: str,
    backend_class: str,
    num_speculative_tokens: int = 0,
    attention_in_splitting_ops: bool = True,
    vllm_compile: bool = True,
) -> CudaGraphResolution:
    """Resolve the requested mode against the minimum support level of every
    attention group, with vLLM's exact warning and error texts."""
    mode = requested
    messages: list[str] = []
    support_text = f"AttentionCGSupport.{support}"
    if mode == "NONE":
        return CudaGraphResolution("NONE", ())
    decode, mixed = _DECODE_MIXED[mode]
    prefix = f"CUDAGraphMode.{mode} is not supported with {backend_class} backend (support: {support_text})"
    if mixed == "FULL" and support != "ALWAYS":
        if support == "NEVER":
            return CudaGraphResolution(
                mode, (),
                error=prefix + "; please try cudagraph_mode=PIECEWISE, and make sure compilation mode is VLLM_COMPILE",
            )
        mode = "FULL_AND_PIECEWISE" if attention_in_splitting_ops else "FULL_DECODE_ONLY"
        messages.append(prefix + f"; setting cudagraph_mode={mode}")
        decode, mixed = _DECODE_MIXED[mode]
    if decode == "FULL" and support == "NEVER":
        prefix = f"CUDAGraphMode.{mode} is not supported with {backend_class} backend (support: {support_text})"
        if vllm_compile and attention_in_splitting_ops:
            mode = "PIECEWISE"
            messages.append(prefix + "; setting cudagraph_mode=PIECEWISE because attention is compiled piecewise")
        else:
            mode = "NONE"
            messages.append(prefix + "; setting cudagraph_mode=NONE because attention is not compiled piecewise")
        decode, mixed = _DECODE_MIXED[mode]
    if (
        decode == "FULL"
        and num_speculative_tokens > 0
        and _level(support) < _level("UNIFORM_BATCH")
    ):
        target = "PIECEWISE" if attention_in_splitting_ops else "NONE"
        messages.append(
            f"CUDAGraphMode.{mode} is not supported with spec-decode for attention backend "
            f"{backend_class} (support: {support_text}); setting cudagraph_mode={target}"
        )
        mode = target
    return CudaGraphResolution(mode, tuple(messages))
