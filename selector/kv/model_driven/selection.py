"""What the model's layer code does with the request: the backend it chooses for the
``--attention-backend`` given (or its refusal), the KV-cache dtype its layout resolves,
and a layer whose build (or KV-cache spec) vLLM refuses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selector import expr as expr_lang
from selector.catalog import CatalogError
from selector.kv.model_driven.backends import exact_kernel_sizes
from selector.kv.model_driven.environment import config_env, layer_envs
from selector.kv.model_driven.expressions import evaluate
from selector.kv.model_driven.rules import DrivenBackend, DrivenModel, DrivenRecord, ModelDrivenData

__all__ = [
    "DrivenSelection",
    "driven_backend",
    "layer_refusal",
    "resolve_cache_dtype",
    "select_driven",
]


class DrivenSelection(DrivenRecord):
    """What the model's layer code does with the request: the backend, or its error."""

    requested: str | None
    backend: str | None
    error: str | None = None
    exc_type: str | None = None
    code: str = "MD001"
    """The refusal's reason code (``SelectionRule.code``)."""
    ignored: bool = False
    """A name was given and the layer code took its default anyway."""


def driven_backend(data: ModelDrivenData, rule: DrivenModel, name: str, cc_major: int = 0
                   ) -> DrivenBackend:
    """The backend a selection names, as its layers are built on a GPU of ``cc_major``
    (``DrivenBackend.on_gpu``): the enum's model-driven member, or one the rule's layers
    pin without the enum (its ``layer_backends``: Dots3Note's
    ``DOTS3_NOTE_PADDED_MLA_SPARSE``, Step5's ``STEP5_DSA``), as a backend of the rule's
    architectures."""
    if name in data.backends:
        return data.backends[name].on_gpu(cc_major)
    helper = rule.layer_backends[name]
    return DrivenBackend(class_path=helper.class_name or name, platform="cuda",
                         models=rule.architectures,
                         kernel_block_sizes=exact_kernel_sizes(helper.kernel_block_sizes),
                         cudagraph_support=helper.cudagraph_support, source=helper.source)


def select_driven(rule: DrivenModel, requested: str | None, cc_major: int, *,
                  config: Mapping[str, Any] | None = None, cc: int | None = None,
                  tp_size: int = 1, pcp_size: int = 1, probes: Mapping[str, bool] | None = None
                  ) -> DrivenSelection:
    """The layer code's choice for ``requested`` on a GPU of ``cc_major`` (``cc``: the
    capability as 90, 103; default ``cc_major`` x 10) at ``tp_size`` and ``pcp_size``
    (prefill context parallelism); ``probes`` overrides the rule's probed facts."""
    cc = cc_major * 10 if cc is None else cc
    env: dict[str, Any] = {**config_env(rule, config or {}), **rule.probes, **(probes or {}),
                           "requested": requested or "none", "cc_major": cc_major, "cc": cc,
                           "cc_minor": cc % 10, "tp_size": tp_size, "pcp_size": pcp_size}
    for step in rule.selection:
        if evaluate(step.when, env):
            if step.refuse is not None:
                return DrivenSelection(requested=requested, backend=None,
                                       error=step.refuse.format(**env),
                                       exc_type=step.exc_type, code=step.code)
            return DrivenSelection(requested=requested, backend=step.backend,
                                   ignored=requested is not None and requested != step.backend
                                   and "requested" not in _names(step.when))
    raise CatalogError(f"{rule.source}: no selection rule matched {requested!r}")


def _names(when: str | bool) -> set[str]:
    return set() if isinstance(when, bool) else expr_lang.names_in(expr_lang.parse(when))


def resolve_cache_dtype(rule: DrivenModel, backend: DrivenBackend, kv_cache_dtype: str,
                        cc_major: int = 0) -> tuple[str, int | None] | tuple[None, str]:
    """(cache dtype string, plain row element bytes or None when packed), or (None,
    vLLM's error). The rules read ``packed``, ``packed_cache_dtype`` (the record the
    layer resolves ``auto`` / ``fp8`` to), ``kv_cache_dtype``, ``kv_fp8`` and
    ``cc_major``."""
    env = {"packed": backend.packed_layout, "kv_cache_dtype": kv_cache_dtype,
           "kv_fp8": kv_cache_dtype.startswith("fp8"),
           "packed_cache_dtype": backend.packed_cache_dtype, "cc_major": cc_major}
    for step in rule.cache_dtype:
        if evaluate(step.when, env):
            if step.refuse is not None:
                return None, f"{step.exc_type}: " + step.refuse.format(kv_cache_dtype=kv_cache_dtype)
            return str(evaluate(step.cache_dtype, env)), step.element_bytes
    raise CatalogError(f"{rule.source}: no cache dtype rule matched {kv_cache_dtype!r}")


def layer_refusal(rule: DrivenModel, config: Mapping[str, Any], *, kv_cache_dtype: str = "auto",
                  cc: int = 0, tp_size: int = 1, element_bytes: int | None = None,
                  cache_block: int = 16, specs: bool = True) -> DrivenSelection | None:
    """vLLM's refusal of a layer (None: every layer builds): the first layer whose build
    fails (the rule's ``layer_refusals``, in layer order), then (``specs``: the KV-cache
    dtype resolved) the first whose KV-cache spec fails once every layer is built
    (``spec_refusals``). Conditions read the layer's environment (as the caches'
    expressions do), ``kv_cache_dtype``, ``kv_fp8``, ``cc``, ``cc_major`` and ``cc_minor``;
    the message may name any of it (``{layer_index}``, ``{compress_ratio}``)."""
    extra = {"tp_size": tp_size, "kv_cache_dtype": kv_cache_dtype,
             "kv_fp8": kv_cache_dtype.startswith("fp8"), "cc": cc, "cc_major": cc // 10,
             "cc_minor": cc % 10, "packed": element_bytes is None, "kv_bytes": element_bytes or 1,
             "cache_block": cache_block}
    checked = (rule.layer_refusals, rule.spec_refusals if specs else ())
    envs = layer_envs(rule, config, extra) if any(checked) else []
    for rules in checked:
        for env in envs:
            for step in rules:
                if evaluate(step.when, env) and step.refuse is not None:
                    return DrivenSelection(requested=None, backend=None,
                                           error=step.refuse.format(**env),
                                           exc_type=step.exc_type, code=step.code)
    return None
