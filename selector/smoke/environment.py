"""Find what can run here: torch with a CUDA GPU, FlashInfer, and a FlashAttention build.

Every import happens inside a function, so importing :mod:`selector.smoke` stays free
of torch and the kernel libraries. Anything missing raises :class:`CannotRunHereError`
saying exactly what is missing and how to install it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from selector.errors import CannotRunHereError
from selector.platforms import GPU_EXTRA_HINT

__all__ = [
    "INSTALL_HINT",
    "FlashAttentionImpl",
    "find_flash_attention",
    "import_flashinfer",
    "package_version",
]

INSTALL_HINT = GPU_EXTRA_HINT


def package_version(*distributions: str) -> str:
    """The installed version of the first distribution found, else ``"unknown"``."""
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def import_flashinfer() -> Any:
    """The flashinfer module; else :class:`CannotRunHereError`."""
    try:
        return importlib.import_module("flashinfer")
    except Exception as error:  # a broken install raises more than ImportError
        raise CannotRunHereError(
            f"the FLASHINFER plan needs the flashinfer-python package, which cannot be "
            f"imported ({type(error).__name__}: {error}); install it: {INSTALL_HINT}"
        ) from None


FlashAttentionCall = Callable[..., Any]
"""``call(q, key_cache, value_cache, *, cu_seqlens_q, seqused_k, block_table, max_q, max_k,
scale, window_left, softcap) -> out`` over a paged cache in logical (pages, block, heads,
head) views."""


@dataclass(frozen=True)
class FlashAttentionImpl:
    """One installed FlashAttention implementation behind a common varlen paged call."""

    fa_version: int
    module: str
    package: str
    version: str
    call: FlashAttentionCall
    min_block_multiple: int = 1
    """Page sizes must be a multiple of this (upstream FA2: 256)."""

    @property
    def label(self) -> str:
        return f"FA{self.fa_version} ({self.module} {self.version})"


def _window(window_left: int | None, unbounded: Any) -> Any:
    return unbounded if window_left is None else (window_left, 0)


def _fa4() -> FlashAttentionImpl:
    module = importlib.import_module("flash_attn.cute")
    varlen = module.flash_attn_varlen_func

    def call(q: Any, key_cache: Any, value_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
             block_table: Any, max_q: int, max_k: int, scale: float, window_left: int | None,
             softcap: float | None) -> Any:
        result = varlen(q, key_cache, value_cache, cu_seqlens_q=cu_seqlens_q,
                        seqused_k=seqused_k, page_table=block_table, max_seqlen_q=max_q,
                        max_seqlen_k=max_k, softmax_scale=scale, causal=True,
                        window_size=_window(window_left, (None, None)),
                        softcap=softcap or 0.0, num_splits=1)
        return result[0] if isinstance(result, tuple) else result

    return FlashAttentionImpl(4, "flash_attn.cute", "flash-attn-4",
                              package_version("flash-attn-4", "flash_attn_4"), call)


def _fa3() -> FlashAttentionImpl:
    module = importlib.import_module("flash_attn_interface")
    with_kvcache = module.flash_attn_with_kvcache

    def call(q: Any, key_cache: Any, value_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
             block_table: Any, max_q: int, max_k: int, scale: float, window_left: int | None,
             softcap: float | None) -> Any:
        del max_k  # FA3 reads the lengths from cache_seqlens
        result = with_kvcache(q, key_cache, value_cache, cache_seqlens=seqused_k,
                              page_table=block_table, cu_seqlens_q=cu_seqlens_q,
                              max_seqlen_q=max_q, softmax_scale=scale, causal=True,
                              window_size=_window(window_left, (-1, -1)),
                              softcap=softcap or 0.0)
        return result[0] if isinstance(result, tuple) else result

    return FlashAttentionImpl(3, "flash_attn_interface", "flash-attn-3",
                              package_version("flash_attn_3", "flash-attn-3", "flashattn-hopper"),
                              call)


def _vllm(fa_version: int) -> FlashAttentionImpl:
    module = importlib.import_module("vllm.vllm_flash_attn")
    varlen = module.flash_attn_varlen_func

    def call(q: Any, key_cache: Any, value_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
             block_table: Any, max_q: int, max_k: int, scale: float, window_left: int | None,
             softcap: float | None) -> Any:
        window = [-1, -1] if window_left is None else [window_left, 0]
        return varlen(q=q, k=key_cache, v=value_cache, cu_seqlens_q=cu_seqlens_q,
                      max_seqlen_q=max_q, seqused_k=seqused_k, max_seqlen_k=max_k,
                      softmax_scale=scale, causal=True, window_size=window,
                      block_table=block_table, softcap=softcap or 0.0, fa_version=fa_version)

    return FlashAttentionImpl(fa_version, "vllm.vllm_flash_attn", "vllm",
                              package_version("vllm"), call)


def _fa2() -> FlashAttentionImpl:
    module = importlib.import_module("flash_attn")
    varlen = module.flash_attn_varlen_func

    def call(q: Any, key_cache: Any, value_cache: Any, *, cu_seqlens_q: Any, seqused_k: Any,
             block_table: Any, max_q: int, max_k: int, scale: float, window_left: int | None,
             softcap: float | None) -> Any:
        cu_seqlens_k = seqused_k.new_zeros(seqused_k.shape[0] + 1)
        cu_seqlens_k[1:] = seqused_k.cumsum(0)
        return varlen(q, key_cache, value_cache, cu_seqlens_q, cu_seqlens_k, max_q, max_k,
                      softmax_scale=scale, causal=True,
                      window_size=_window(window_left, (-1, -1)), softcap=softcap or 0.0,
                      block_table=block_table)

    return FlashAttentionImpl(2, "flash_attn", "flash-attn", package_version("flash-attn",
                                                                            "flash_attn"),
                              call, min_block_multiple=256)


_LOADERS: dict[str, Callable[[], FlashAttentionImpl]] = {
    "FA4 flash_attn.cute": _fa4,
    "FA3 flash_attn_interface": _fa3,
    "FA3 vllm.vllm_flash_attn": lambda: _vllm(3),
    "FA2 vllm.vllm_flash_attn": lambda: _vllm(2),
    "FA2 flash_attn": _fa2,
}


def _candidates(requested: int | None) -> list[str]:
    names = list(_LOADERS)
    if requested is None:
        return names
    return [n for n in names if n.startswith(f"FA{requested} ")] + [
        n for n in names if not n.startswith(f"FA{requested} ")]


def find_flash_attention(requested: int | None, *, strict: bool) -> tuple[FlashAttentionImpl,
                                                                          list[str]]:
    """The installed implementation closest to ``requested`` and notes on what was skipped."""
    problems: list[str] = []
    for name in _candidates(requested):
        if strict and requested is not None and not name.startswith(f"FA{requested} "):
            continue
        try:
            implementation = _LOADERS[name]()
        except Exception as error:
            problems.append(f"{name}: {type(error).__name__}: {error}".splitlines()[0][:160])
            continue
        notes = []
        if requested is not None and implementation.fa_version != requested:
            notes.append(f"the plan negotiated FA{requested}, which is not installed here; "
                         f"ran {implementation.label} instead")
        return implementation, notes
    wanted = f"FlashAttention {requested}" if requested else "FlashAttention"
    raise CannotRunHereError(
        f"the FLASH_ATTN plan needs {wanted} (flash_attn.cute, flash_attn_interface, "
        f"vllm.vllm_flash_attn or flash_attn), and none could be imported: "
        f"{'; '.join(problems) or 'nothing matched'}; install it: {INSTALL_HINT}")
