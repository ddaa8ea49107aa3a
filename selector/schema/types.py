"""Shared vocabularies: each is one ``Literal``; every other list derives from it."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from selector import expr as expr_lang

__all__ = [
    "ATTN_TYPES",
    "CG_SUPPORT_LEVELS",
    "CUDAGRAPH_MODES",
    "DTYPES",
    "KV_CACHE_DTYPES",
    "KV_LAYOUTS",
    "AttnType",
    "CGSupport",
    "Condition",
    "CudaGraphMode",
    "DType",
    "KVCacheDType",
    "KVLayout",
    "MultipleOf",
    "StrictModel",
    "parse_condition",
]

DType = Literal["float16", "bfloat16", "float32"]
DTYPES: tuple[str, ...] = get_args(DType)

KVCacheDType = Literal[
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
    "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
    "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3", "octave_k3v3_compact",
    "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head",
    "nvfp4", "nvfp4_4over6",
]
KV_CACHE_DTYPES: tuple[str, ...] = get_args(KVCacheDType)

AttnType = Literal["decoder", "encoder", "encoder_only", "encoder_decoder"]
ATTN_TYPES: tuple[str, ...] = get_args(AttnType)

CGSupport = Literal["NEVER", "UNIFORM_SINGLE_TOKEN_DECODE", "UNIFORM_BATCH", "ALWAYS"]
CG_SUPPORT_LEVELS: tuple[str, ...] = get_args(CGSupport)
"""Ordered by vLLM's ``AttentionCGSupport`` value (0..3)."""

CudaGraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
CUDAGRAPH_MODES: tuple[str, ...] = get_args(CudaGraphMode)

KVLayout = Literal["LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"]
KV_LAYOUTS: tuple[str, ...] = get_args(KVLayout)


class StrictModel(BaseModel):
    """Base of every model: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def parse_condition(value: object) -> object:
    """Validate that a string or bool is a well-formed condition; keep the text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            expr_lang.parse(value)
        except expr_lang.ExprSyntaxError as exc:
            raise ValueError(f"bad condition: {exc}") from exc
        return value
    raise ValueError("a condition is a string expression or true/false")


Condition = Annotated[bool | str, BeforeValidator(parse_condition)]
"""A condition in the expression language of :mod:`selector.expr` (or a constant)."""


class MultipleOf(StrictModel):
    """A kernel block size rule: any multiple of ``multiple_of`` tokens (vLLM's ``MultipleOf``)."""

    multiple_of: int = Field(gt=0)

    def __repr__(self) -> str:
        return f"MultipleOf({self.multiple_of})"

    def __str__(self) -> str:
        return repr(self)
