#!/usr/bin/env python3
"""Read what one vLLM release's CUDA attention backends state about themselves.

Runs INSIDE a release's oracle environment (the interpreter decides the vLLM
version) with the vLLM oracle's mocks (``oracle.py``: vLLM believes it runs on
a CUDA GPU of a given compute capability; see the oracle's README):

    ORACLE_DIR/.venv-0.29.0/bin/python tools/release_probe.py --oracle ORACLE_DIR -o probe.json

Prints (or writes) one JSON object:

* ``vllm_version``; ``kv_cache_dtypes``: ``typing.get_args(vllm.config.cache.CacheDType)``;
* ``backends_evaluated``: every backend of any CUDA priority list (asked of
  ``_get_backend_priorities``, the oracle's default set); ``explicit_only``:
  registered backends outside those lists whose class imports on this host
  (reachable only with ``--attention-backend``); ``enum``: every
  ``AttentionBackendEnum`` member;
* ``signatures``: parameter names of ``validate_configuration``,
  ``_get_backend_priorities``, ``get_attn_backend`` and
  ``get_flash_attn_version``;
* ``backends``: per backend, the class-level answers of vLLM's own methods,
  called with the oracle's CUDA mocks and a default ``VllmConfig``:
  ``class_name``, ``is_mla``, ``is_sparse``, ``dtypes``, ``kv_cache_dtypes``
  (the ``CacheDType`` values ``supports_kv_cache_dtype`` accepts; ``null``: all),
  ``head_sizes`` (``get_supported_head_sizes``),
  ``kernel_block_sizes`` (``get_supported_kernel_block_sizes``; ``MultipleOf(n)``
  -> ``{"multiple_of": n}``), ``attn_types`` (``supports_attn_type``), the
  feature flags (``supports_sink`` ...), and ``compute_capability``: the
  capabilities (``"9.0"`` ...) whose ``supports_compute_capability`` is true.
  A method that takes arguments the class cannot answer alone, or raises, is
  recorded as ``"<Type>: <message>"``.  Where an answer depends on the emulated
  capability, ``by_capability`` holds one value per capability.

vLLM decides every value; the probe only calls it.  Standard library + the
release's own packages only.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import typing
from pathlib import Path
from typing import Any

import oracle

CAPABILITIES = list(oracle.cuda_capabilities())
ATTN_TYPES = ["decoder", "encoder", "encoder_only", "encoder_decoder"]
FEATURES = {
    "sink": "supports_sink", "mm_prefix": "supports_mm_prefix",
    "per_head_quant_scales": "supports_per_head_quant_scales",
    "sliding_window": "supports_sliding_window", "rswa": "supports_rswa",
    "non_causal": "supports_non_causal", "non_causal_dcp": "supports_non_causal_dcp",
    "batch_invariance": "supports_batch_invariance", "kv_connector": "supports_kv_connector",
    "pcp": "supports_pcp", "dcp": "supports_dcp", "alibi_sqrt": "supports_alibi_sqrt",
    "device_cpu_query_lens_mismatch": "supports_device_cpu_query_lens_mismatch",
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "base") and type(value).__name__ == "MultipleOf":
        return {"multiple_of": int(value.base)}
    if type(value).__module__ == "torch" and "dtype" in type(value).__name__:
        return str(value).removeprefix("torch.")
    if hasattr(value, "name") and hasattr(value, "value"):  # enums
        return str(value.name)
    return repr(value)


def _call(fn: Any, *args: Any) -> Any:
    try:
        return _jsonable(fn(*args))
    except Exception as exc:  # vLLM's answer is the exception
        return f"{type(exc).__name__}: {exc}"


def _accepted_kv_dtypes(cls: Any, kv_dtypes: list[str]) -> list[str] | str | None:
    """The CacheDType values ``supports_kv_cache_dtype`` accepts (``None``: all of them)."""
    try:
        accepted = [d for d in kv_dtypes if cls.supports_kv_cache_dtype(d) is True]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if accepted == kv_dtypes else accepted


def _params(fn: Any) -> list[str]:
    fn = getattr(fn, "__wrapped__", fn)
    try:
        return [p for p in inspect.signature(fn).parameters if p not in ("cls", "self")]
    except (TypeError, ValueError):
        return []


def probe(oracle_dir: str | Path | None = None) -> dict[str, Any]:
    orc = oracle.engine(oracle_dir=oracle_dir)
    from vllm.config import set_current_vllm_config
    from vllm.platforms.interface import DeviceCapability

    try:
        from vllm.config.cache import CacheDType
        kv_dtypes = list(typing.get_args(CacheDType))
    except ImportError:  # pragma: no cover - older layouts
        kv_dtypes = []
    out: dict[str, Any] = {
        "vllm_version": orc.vllm_version,
        "kv_cache_dtypes": kv_dtypes,
        "backends_evaluated": list(orc.backend_names),
        "enum": [m.name for m in orc.E],
    }
    import vllm.platforms.cuda as cuda_mod
    from vllm.v1.attention import selector
    from vllm.v1.attention.backend import AttentionBackend

    sigs: dict[str, list[str]] = {
        "validate_configuration": _params(AttentionBackend.validate_configuration),
        "_get_backend_priorities": _params(cuda_mod._get_backend_priorities),
        "get_attn_backend": _params(selector.get_attn_backend),
    }
    try:
        from vllm.v1.attention.backends import fa_utils
        sigs["get_flash_attn_version"] = _params(fa_utils.get_flash_attn_version)
    except ImportError:  # pragma: no cover
        pass
    out["signatures"] = sigs

    explicit: list[str] = []
    classes: dict[str, Any] = {}
    with oracle.instrument()._cuda_allocations_on_meta():
        for member in orc.E:
            name = member.name
            if name in orc.backend_names:
                classes[name] = member.get_class()
                continue
            try:
                path = member.get_path()
            except Exception:  # a placeholder member with no class registered
                continue
            other_platform = any(p in path for p in (".rocm", "rocm_", ".cpu_", "xpu"))
            if (not path or other_platform) and name not in ("CPU_ATTN", "XPU_MLA_SPARSE"):
                continue  # other platforms' backends: importing them has side effects
            try:
                classes[name] = member.get_class()
                explicit.append(name)
            except Exception:  # not importable here: not reachable on CUDA either
                continue
    out["explicit_only"] = explicit

    vc = orc._vllm_config("auto", None, False)
    backends: dict[str, Any] = {}
    for name, cls in classes.items():
        per_cap: dict[str, dict[str, Any]] = {}
        for cap in CAPABILITIES:
            major, minor = oracle.capability(cap)
            oracle.emulate((major, minor))
            with set_current_vllm_config(vc):
                row: dict[str, Any] = {
                    "dtypes": _jsonable(list(getattr(cls, "supported_dtypes", []))),
                    "kv_cache_dtypes": _accepted_kv_dtypes(cls, kv_dtypes),
                    "head_sizes": _call(cls.get_supported_head_sizes),
                    "kernel_block_sizes": _call(cls.get_supported_kernel_block_sizes),
                    "is_mla": _call(cls.is_mla),
                    "is_sparse": _call(cls.is_sparse),
                    "attn_types": [t for t in ATTN_TYPES
                                   if _call(cls.supports_attn_type, t) is True],
                    "compute_capability": _call(cls.supports_compute_capability,
                                                DeviceCapability(major, minor)),
                }
                for feature, method in FEATURES.items():
                    fn = getattr(cls, method, None)
                    if fn is not None and not _params(fn):
                        row[feature] = _call(fn)
            per_cap[cap] = row
        merged: dict[str, Any] = {"class_name": cls.__name__,
                                  "module": cls.__module__}
        keys = list(per_cap[CAPABILITIES[0]])
        varying: dict[str, dict[str, Any]] = {}
        for key in keys:
            if key == "compute_capability":
                continue
            values = {cap: per_cap[cap][key] for cap in CAPABILITIES}
            first = values[CAPABILITIES[0]]
            if all(v == first for v in values.values()):
                merged[key] = first
            else:
                varying[key] = values
        merged["compute_capability"] = [cap for cap in CAPABILITIES
                                         if per_cap[cap]["compute_capability"] is True]
        if varying:
            merged["by_capability"] = varying
        backends[name] = merged
    out["backends"] = backends
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--oracle", type=Path,
                    help="the oracle directory (holds oracle.py; default $ORACLE_DIR, ../shared/oracle)")
    ap.add_argument("-o", "--output", help="write the JSON here (default: stdout); a .json.gz "
                                           "file gets the compact, sorted golden form")
    a = ap.parse_args(argv)
    answer = probe(a.oracle)
    text = json.dumps(answer, indent=1, sort_keys=False) + "\n"
    if a.output and a.output.endswith(".gz"):
        oracle.write_gz(a.output, oracle.compact(json.loads(text)))  # the JSON answer, sorted
    elif a.output:
        oracle.write_bytes(a.output, text.encode("utf-8"))
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
