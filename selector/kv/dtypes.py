"""Element sizes of KV-cache and state dtypes (vLLM's ``STR_DTYPE_TO_TORCH_DTYPE``)."""

from __future__ import annotations

from selector.errors import InputError

__all__ = [
    "DS_MLA_CONTENT_BYTES",
    "dtype_bytes",
    "is_nvfp4",
    "resolve_kv_dtype",
]

_BYTES: dict[str, int] = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
    "fp8_ds_mla": 1,
    "nvfp4_ds_mla": 1,
    "nvfp4": 1,
    "nvfp4_4over6": 1,
}

DS_MLA_CONTENT_BYTES: dict[str, int] = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}
"""Opaque per-token MLA blobs (NoPE + RoPE + scales), ``mla_attention.py``."""

_UNMODELED_PREFIXES = ("turboquant_", "octave_", "ultraquant_")
_UNMODELED = frozenset({"int4_per_token_head", "int8_per_token_head", "fp8_per_token_head"})


def resolve_kv_dtype(kv_cache_dtype: str, model_dtype: str) -> str:
    """``auto`` becomes the model dtype; other known names stay."""
    name = model_dtype if kv_cache_dtype == "auto" else kv_cache_dtype
    if name in _UNMODELED or name.startswith(_UNMODELED_PREFIXES):
        raise InputError(
            f"the page size of kv_cache_dtype {kv_cache_dtype!r} (backend-packed) is not "
            "modelled yet",
            field="kv_cache_dtype",
            hint="use auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, nvfp4 or *_ds_mla",
        )
    if name not in _BYTES:
        raise InputError(f"unknown kv_cache_dtype {kv_cache_dtype!r}", field="kv_cache_dtype")
    return name


def dtype_bytes(name: str) -> int:
    """Bytes of one element of ``name`` (a resolved KV or state dtype)."""
    if name not in _BYTES:
        raise InputError(f"unknown dtype {name!r}", field="dtype")
    return _BYTES[name]


def is_nvfp4(name: str) -> bool:
    return name.startswith("nvfp4") and name != "nvfp4_ds_mla"
