"""The Mamba layers' prefill-checkpoint alignment of a deployment
(``get_mamba_prefill_checkpoint_alignment``): each state layer's mixer declares one
by the rules of its state backend (``prefill_checkpoint`` of the wired backend file),
evaluated with the deployment's compute capability; the answer feeds
``KVOptions.mamba_prefill_checkpoint_alignment``."""

from __future__ import annotations

import math

from selector import expr as expr_lang
from selector.catalog import EngineData
from selector.models.facts import ModelFacts, engine_at_least
from selector.schema.backend import PrefillCheckpoint, PrefillCheckpointRule

__all__ = ["prefill_checkpoint_alignment", "prefill_kernel", "spec_checkpoint_alignment"]


def prefill_kernel(
    rules: PrefillCheckpoint, *, cc: int, head_k_dim: int | None, requested: str = "auto"
) -> PrefillCheckpointRule | None:
    """The first rule whose condition holds (the prefill kernel the mixer resolves)."""
    scope: dict[str, expr_lang.Value] = {
        "cc": cc,
        "cc_major": cc // 10,
        "head_k_dim": head_k_dim,
        "cuda_runtime_major": rules.cuda_runtime_major,
        "requested": requested,
    }
    for rule in rules.rules:
        if rule.when is True or (
            isinstance(rule.when, str) and expr_lang.evaluate(expr_lang.parse(rule.when), scope)
        ):
            return rule
    return None


def prefill_checkpoint_alignment(
    model: ModelFacts, engine: EngineData, *, cc: int | None, requested: str = "auto"
) -> int | None:
    """The LCM of every state layer's checkpoint alignment; None when the release
    takes no such step, the model has no state layer, or one layer declares none
    (its mixer is in no rule, or its kernel exports no checkpoints)."""
    if cc is None or not engine.profile.hybrid_alignment.prefill_checkpoint:
        return None
    layers = model.state_layers
    if not layers:
        return None
    alignment = 1
    for layer in layers:
        ssm = layer.ssm
        assert ssm is not None
        spec = engine.wired.get(ssm.ssm_type)
        rules = spec.prefill_checkpoint if spec is not None else None
        if rules is None or ssm.mixer_class not in rules.mixers:
            return None
        rule = prefill_kernel(rules, cc=cc, head_k_dim=getattr(ssm, "head_k_dim", None),
                              requested=requested)
        if rule is None or rule.alignment is None:
            return None
        alignment = math.lcm(alignment, rule.alignment)
    return alignment


def spec_checkpoint_alignment(model: ModelFacts, *, cc: int | None, engine: str,
                              requested: str = "auto") -> int | None:
    """The checkpoint alignment the state layers stamp on their own specs (the family's
    ``ssm.spec_checkpoint``: GLM-5.3's ``Glm5NextLinearAttention.get_kv_cache_spec``,
    vllm/models/glm5next/common/kda.py:166-176 in 0.33.0, 16 with FlashKDA), in every
    Mamba cache mode; None: no such layer, no device, or the kernel exports none."""
    if cc is None:
        return None
    for layer in model.state_layers:
        rules: tuple[PrefillCheckpointRule, ...] = getattr(layer.ssm, "spec_checkpoint", ())
        if not rules or not engine_at_least(engine, getattr(layer.ssm, "spec_checkpoint_since", None)):
            continue
        scope: dict[str, expr_lang.Value] = {
            "cc": cc, "cc_major": cc // 10, "head_k_dim": getattr(layer.ssm, "head_k_dim", None),
            "model_dtype": model.runtime_dtype, "requested": requested}
        for rule in rules:
            if rule.when is True or (
                    isinstance(rule.when, str)
                    and expr_lang.evaluate(expr_lang.parse(rule.when), scope)):
                return rule.alignment
        return None
    return None
