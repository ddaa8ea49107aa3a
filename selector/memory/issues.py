"""A start-up refusal (:class:`StartupIssue`) and the checks that need no model: kept
apart from :mod:`selector.memory.startup` so a single-layer check imports little."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, get_args

from pydantic import BaseModel, ConfigDict

from selector import expr as E
from selector.catalog import Catalog
from selector.memory.dcp import DcpCheck, dcp_refusals
from selector.memory.profile import StartupProfile

if TYPE_CHECKING:
    from selector.models.facts import BuildCheck

__all__ = ["MODEL_BUILD_CODE", "StartupIssue", "dcp_issue", "dtype_issue", "kv_heads_issue",
           "layer_build_issues", "startup_issue"]

_ALL_DCP_CHECKS: frozenset[DcpCheck] = frozenset(get_args(DcpCheck))

MODEL_BUILD_CODE = "LB003"
"""The code of a model class's own refusal once its layer is built (a family's
``build_checks``: the message is the model's, word for word)."""


class StartupIssue(BaseModel):
    """A start-up refusal: vLLM raises with ``message`` and the server does not come up."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    code: str
    name: str
    message: str
    hint: str
    field: tuple[str, ...] = ()
    """The deployment field it is about (to locate it in the file)."""


def startup_issue(catalog: Catalog, code: str, field: tuple[str, ...], **values: Any) -> StartupIssue:
    """The refusal ``code`` with its registered message and hint filled in."""
    entry = catalog.code(code)
    return StartupIssue(code=code, name=entry.name, message=entry.message.format(**values),
                        hint=entry.hint.format(**values), field=field)


def dtype_issue(catalog: Catalog, profile: StartupProfile, *, dtype: str, explicit: bool,
                cc: int, device: str) -> StartupIssue | None:
    """``--dtype bfloat16`` on a GPU below compute capability 8.0."""
    spec = profile.checks.bfloat16
    if dtype != "bfloat16" or not explicit or spec.min_cc is None or cc >= spec.min_cc:
        return None
    return startup_issue(catalog, spec.code, ("dtype",), gpu_name=device,
                  capability=f"{cc // 10}.{cc % 10}")


def dcp_issue(catalog: Catalog, profile: StartupProfile, *, tp_size: int, dcp_size: int,
              num_heads: int, num_kv_heads: int, use_mla: bool, pcp_size: int = 1,
              checks: Collection[DcpCheck] = _ALL_DCP_CHECKS) -> StartupIssue | None:
    """vLLM's first refusal of the TP / DCP split among ``checks`` (the predicate is
    :func:`selector.memory.dcp.dcp_refusals`), with the release's code and words."""
    for refusal in dcp_refusals(tp_size=tp_size, dcp_size=dcp_size, num_heads=num_heads,
                                num_kv_heads=num_kv_heads, use_mla=use_mla, pcp_size=pcp_size):
        spec = profile.checks.decode_context_parallel.spec(refusal.check)
        if refusal.check in checks and spec is not None:
            return startup_issue(catalog, spec.code, ("parallel", "decode_context_parallel_size"),
                                 **refusal.values)
    return None


def kv_heads_issue(catalog: Catalog, profile: StartupProfile, *, num_kv_heads: int,
                   tp_size: int) -> StartupIssue | None:
    """vLLM's assertion on the KV heads by the TP size while it builds an attention layer
    (``num_kv_heads``: the model's): at least as many KV heads as ranks must divide by the
    TP size, fewer must divide it."""
    spec = profile.checks.tensor_parallel_kv_heads
    if num_kv_heads < 1 or tp_size <= 1:
        return None
    if num_kv_heads >= tp_size and num_kv_heads % tp_size:
        code = spec.code
    elif num_kv_heads < tp_size and tp_size % num_kv_heads:
        code = spec.replicate_code
    else:
        return None
    return startup_issue(catalog, code, ("parallel", "tensor_parallel_size"),
                         num_kv_heads=num_kv_heads, tensor_parallel_size=tp_size)


def layer_build_issues(catalog: Catalog, engine: str, platform: str | None, backend: str,
                       scope: Mapping[str, Any],
                       model_checks: Sequence[BuildCheck] = ()) -> list[StartupIssue]:
    """What stops vLLM building a layer ``backend`` was selected for, in vLLM's order: the
    attention layer's own refusals of the selected backend (the profile's ``layer_build``,
    ``Attention.__init__``: ``cap.<feature>`` is the backend's feature column), then the
    backend's ``layer_checks`` (its ``AttentionImpl.__init__``), then the model class's
    ``model_checks`` (its asserts once the layer is built). Each condition reads the layer's
    facts ``scope`` (the profile's input defaults under them) and ``backend``; each message
    is filled from them."""
    data = catalog.engine(engine, platform)
    spec = data.backends.get(backend)
    if spec is None:  # a backend the model's own layers choose (model-driven.yaml)
        return []
    local: dict[str, Any] = {name: entry.default for name, entry in data.profile.inputs.items()}
    local.update({k: v for k, v in scope.items() if isinstance(k, str)})
    local["backend"] = backend
    features = spec.features.model_dump()
    caps = {f"cap.{name}": bool(E.evaluate(E.parse(value), local)) if isinstance(value, str)
            else bool(value) for name, value in features.items()}
    found = [startup_issue(catalog, rule.code, ("attention_backend",), **local)
             for rule in data.profile.layer_build
             if E.evaluate(E.parse(rule.fails_when), {**local, **caps})]
    found += [startup_issue(catalog, rule.code, ("model",), **local)
              for rule in spec.layer_checks if E.evaluate(E.parse(rule.when), local)]
    found += [startup_issue(catalog, MODEL_BUILD_CODE, ("model",), detail=check.message,
                            fix=check.fix or f"see {check.source}")
              for check in model_checks if E.evaluate(E.parse(check.when), local)]
    return found
