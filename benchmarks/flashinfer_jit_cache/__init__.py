"""attn-select's stand-in for FlashInfer's ``flashinfer-jit-cache`` package: the
interface FlashInfer 0.6.13 reads of it (flashinfer/jit/env.py:100-132 ``_get_aot_dir``):
importable as ``flashinfer_jit_cache`` (``has_flashinfer_jit_cache``, env.py:27-36), a
``__version__`` that starts with FlashInfer's version, and ``get_jit_cache_dir()``, the
folder FlashInfer's loader looks in for ``<module>/<module>.so`` (``JitSpec.aot_path``,
flashinfer/jit/core.py:256-261). It holds only the reduced modules the smoke asks for
(``<module>_attn_select_<tag>``), built by ``benchmarks/prebuild_flashinfer.py`` for SM90
(9.0a); ``benchmarks/gpu_setup.sh`` unpacks them beside this file.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["__version__", "get_jit_cache_dir"]

__version__ = "0.6.13+attnselect.sm90a"


def get_jit_cache_dir() -> str:
    """The AOT folder: ``jit_cache`` beside this file."""
    return str(Path(__file__).resolve().parent / "jit_cache")
