"""The MLA prefill-backend selection of one engine version, as written in
``schemas/engines/<engine>/mla_prefill.yaml``.

vLLM picks the kernel that runs MLA *prefill* with a second selector, after the
attention (decode) backend: a registry of prefill backends, each with dtypes,
supported ``(qk_nope_head_dim, qk_rope_head_dim, v_head_dim)`` tuples, a
compute-capability rule and an availability probe, and per-capability priority
lists.  Everything here is data; :mod:`selector.solver.mla_prefill` evaluates it.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from selector.schema.engine import BRANCH_ID, CheckSpec, FactSpec
from selector.schema.types import Condition, DType, StrictModel

__all__ = [
    "MLAPrefillBackendSpec",
    "MLAPrefillBranch",
    "MLAPrefillMessages",
    "MLAPrefillProfile",
    "PrefillReasonRule",
]

Dimensions = tuple[int, int, int]
"""``(qk_nope_head_dim, qk_rope_head_dim, v_head_dim)``, vLLM's ``MLADimensions``."""


class PrefillReasonRule(StrictModel):
    """A reason a backend appends after the base checks when ``when`` holds."""

    code: str
    when: Condition
    note: str = ""


class MLAPrefillBackendSpec(StrictModel):
    """One member of vLLM's ``MLAPrefillBackendEnum``."""

    name: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    class_name: str
    source: str = ""
    description: str = ""
    dtypes: tuple[DType, ...] = ("float16", "bfloat16")
    """``supported_dtypes``."""
    dimensions: tuple[Dimensions, ...] = ()
    """Supported MLA dimension tuples (empty: any)."""
    dimensions_listed: bool = True
    """Whether the rejection names the supported tuples (vLLM lists them only when the
    class attribute ``supported_mla_dimensions`` is non-empty)."""
    compute_capability: Condition = True
    """``supports_compute_capability``."""
    available: Condition = True
    """``is_available()`` (a package probe: read environment facts)."""
    extra_reasons: tuple[PrefillReasonRule, ...] = ()
    """Reasons an overriding ``validate_configuration`` appends."""
    replace_reasons: dict[str, str] = {}
    """Base reason code -> the code an override reports instead."""
    import_error: Condition = False
    """``get_class()`` raises ImportError (the reason list is then ``["ImportError"]``)."""
    raises: str | None = None
    """``get_class()`` raises this (not caught by vLLM: the lookup aborts)."""
    oracle: bool = True
    """Whether the oracle can ask vLLM about this backend."""
    note: str = ""


class MLAPrefillBranch(StrictModel):
    """The priority list used when ``when`` holds (first matching branch)."""

    id: str = Field(pattern=BRANCH_ID)
    """Names the branch, so that a newer profile can replace this one alone."""
    when: Condition = True
    order: tuple[str, ...]
    note: str = ""


class MLAPrefillMessages(StrictModel):
    """vLLM's texts (``str.format`` templates)."""

    config_repr: str
    no_valid_backend: str
    selected_invalid: str
    reasons_item: str = "{name}: [{reasons}]"
    reasons_join: str = ", "
    unknown_backend: str


class MLAPrefillProfile(StrictModel):
    """The whole MLA prefill selector of one engine version."""

    engine: str = Field(pattern=r"^[a-z][a-z0-9_-]*==\d+(\.\d+)*$")
    source: str = ""
    facts: tuple[FactSpec, ...] = ()
    """Derived facts (over the request facts), evaluated in order."""
    dimensions_repr: str
    """``str(MLADimensions)`` with ``{0}``, ``{1}``, ``{2}`` for the three sizes."""
    dimensions_join: str = ", "
    checks: tuple[CheckSpec, ...]
    """The base ``validate_configuration`` checks in order (``cap.*``: the backend's answers)."""
    backends: tuple[MLAPrefillBackendSpec, ...]
    priorities: tuple[MLAPrefillBranch, ...]
    consulted: Condition = True
    """Whether an MLA layer runs this selector (may read ``decode_backend``)."""
    auto_failure_fatal: Condition = True
    """Whether "no valid prefill backend" aborts start-up (else the layer falls back)."""
    auto_failure_warning: str | None = None
    """The code of the warning given when a non-fatal automatic selection finds none."""
    messages: MLAPrefillMessages

    @field_validator("backends")
    @classmethod
    def _unique_names(cls, value: tuple[MLAPrefillBackendSpec, ...]) -> tuple[MLAPrefillBackendSpec, ...]:
        names = [b.name for b in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate backend name(s): {duplicates}")
        return value
