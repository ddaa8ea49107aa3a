"""State-space mixer dimensions from a config.json, by the family's ``ssm``
rules in ``schemas/models/families.yaml``."""

from __future__ import annotations

from typing import Any

from selector import expr as expr_lang
from selector.models.config_reader import ConfigReader
from selector.models.facts import GDNDims, LinearAttnDims, Mamba1Dims, Mamba2Dims, ShortConvDims
from selector.models.families import Family

__all__ = ["read_ssm", "ssm_refusal"]


def _field(text: ConfigReader, family: Family, name: str) -> int:
    assert family.ssm is not None
    spec: list[Any] = family.ssm.fields[name]
    if spec[0] is None:  # a constant the model class passes (PLaMo-2's n_groups=0)
        return int(spec[1])
    key = str(spec[0])
    if len(spec) > 1:
        return text.int_(key, spec[1])
    return text.int_(key)


def read_ssm(
    text: ConfigReader, family: Family, hidden_size: int
) -> Mamba1Dims | Mamba2Dims | GDNDims | ShortConvDims | LinearAttnDims:
    """The family's state mixer: Mamba-1 (Jamba: ``intermediate = expand *
    hidden_size``), Mamba-2 (``MambaStateShapeCalculator.mamba2_state_shape``
    inputs), Gated DeltaNet (the ``linear_*`` keys), a short convolution
    (``short_conv_state_shape``: LFM2's ``conv_dim`` and ``conv_L_cache``) or a linear
    (lightning) attention (``linear_attention_state_shape``: heads and head size)."""
    if family.ssm is None:
        raise text.error(
            "architectures",
            f"family {family.name!r} has state-space layers but no ssm rules",
        )
    kind = family.ssm.type
    state_dtype = _state_dtype(text, family)
    mixer_class = family.ssm.mixer_class
    if kind == "mamba1":
        intermediate = (text.int_(str(family.ssm.fields["intermediate_size"][0]))
                        if "intermediate_size" in family.ssm.fields
                        and text.has(str(family.ssm.fields["intermediate_size"][0]))
                        else _field(text, family, "expand") * hidden_size)
        return Mamba1Dims(
            intermediate_size=intermediate,
            state_size=_field(text, family, "state_size"),
            conv_kernel=_field(text, family, "conv_kernel"),
            state_dtype=state_dtype,
            mixer_class=mixer_class,
        )
    if kind == "mamba2":
        return Mamba2Dims(
            d_ssm=_d_ssm(text, family, hidden_size),
            num_heads=_field(text, family, "num_heads"),
            head_dim=_field(text, family, "head_dim"),
            n_groups=_field(text, family, "n_groups"),
            state_size=_field(text, family, "state_size"),
            conv_kernel=_field(text, family, "conv_kernel"),
            state_dtype=state_dtype,
            mixer_class=mixer_class,
        )
    if kind == "short_conv":
        return ShortConvDims(
            conv_dim=_field(text, family, "conv_dim"),
            conv_kernel=_field(text, family, "conv_kernel"),
            mixer_class=mixer_class,
        )
    if kind == "linear":
        return LinearAttnDims(
            num_heads=_field(text, family, "num_heads"),
            head_dim=_field(text, family, "head_dim"),
            group_norm_size=(_field(text, family, "group_norm_size")
                             if "group_norm_size" in family.ssm.fields else 1),
            mixer_class=mixer_class,
        )
    return GDNDims(
        num_k_heads=_field(text, family, "num_k_heads"),
        num_v_heads=_field(text, family, "num_v_heads"),
        head_k_dim=_field(text, family, "head_k_dim"),
        head_v_dim=_field(text, family, "head_v_dim"),
        conv_kernel=_field(text, family, "conv_kernel"),
        state_dtype=state_dtype,
        mixer_class=mixer_class,
        spec_checkpoint=tuple(family.ssm.spec_checkpoint),
        spec_checkpoint_since=family.ssm.spec_checkpoint_since,
    )


_STATE_DTYPES = frozenset({"float32", "float16", "bfloat16"})


def _state_dtype(text: ConfigReader, family: Family) -> str | None:
    assert family.ssm is not None
    spec = family.ssm.state_dtype
    if not spec:
        return None
    key = str(spec[0])
    value = text.str_(key, str(spec[1]) if len(spec) > 1 else None)
    if value is not None and value not in _STATE_DTYPES:
        raise text.error(key, f"unknown dtype {value!r}", hint="float32, float16 or bfloat16")
    return value


def _d_ssm(text: ConfigReader, family: Family, hidden_size: int) -> int | None:
    """Falcon-H1: ``mamba_d_ssm`` when set, else ``mamba_expand * hidden_size``
    (vllm/model_executor/models/falcon_h1.py); None: ``num_heads * head_dim``."""
    assert family.ssm is not None
    fields = family.ssm.fields
    if "d_ssm" in fields:
        key = str(fields["d_ssm"][0])
        explicit_null = key in text.data and text.data[key] is None
        if not explicit_null and (text.has(key) or len(fields["d_ssm"]) > 1):
            return _field(text, family, "d_ssm")  # the config's, else the class default
    if "expand" in fields and family.ssm.type == "mamba2":
        return int(_field(text, family, "expand") * hidden_size)
    return None


def ssm_refusal(text: ConfigReader, family: Family, hidden_size: int) -> str | None:
    """The first of the family's ``ssm.refusals`` whose condition holds over the mixer's
    dimensions (e.g. transformers' FalconH1Config: ``mamba_n_heads`` must divide the
    mixer's intermediate size)."""
    if family.ssm is None or not family.ssm.refusals:
        return None
    dims = read_ssm(text, family, hidden_size)
    scope: dict[str, expr_lang.Value] = {
        key: value for key, value in dims.model_dump().items()
        if isinstance(value, int | str) or value is None
    }
    scope["intermediate_size"] = (
        dims.intermediate_size if isinstance(dims, Mamba1Dims | Mamba2Dims) else None)
    for refusal in family.ssm.refusals:
        if expr_lang.evaluate(expr_lang.parse(refusal.when), scope):
            return refusal.message
    return None
