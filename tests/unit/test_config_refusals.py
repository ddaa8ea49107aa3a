"""The families' ``config_refusals`` (schemas/models/families.yaml): each condition parses,
each message's ``{field}`` is filled in from the config, and the first that holds is the
refusal (vLLM stops at the first check that fails). vLLM's own words for the edge configs
are checked in tests/golden/test_vllm_model_agreement.py."""

from __future__ import annotations

import re
from typing import Any

from selector import expr
from selector.models.families import families
from selector.models.hf_config import parse_config


def test_every_condition_parses() -> None:
    for family in families().values():
        for refusal in family.config_refusals:
            expr.parse(refusal.when)
            assert re.fullmatch(r"vllm/\S+:\d+(-\d+)?.*", refusal.source), refusal.source


def _parse35(**decoder: Any) -> dict[str, Any]:
    return {"architectures": ["RadioMBartPrefixForCausalLM"], "model_type": "nemotron_parse",
            "navit_packing": True,
            "decoder": {"model_type": "mbart", "d_model": 1024, "decoder_layers": 2,
                        "decoder_attention_heads": 16, **decoder}}


def test_the_first_refusal_that_holds_is_the_refusal() -> None:
    built = parse_config(_parse35(causal_vision_prefix=True, add_cross_attention=False), file="c")
    assert built.refusals == ()
    # add_cross_attention absent: getattr's default true
    assert parse_config(_parse35(causal_vision_prefix=True), file="c").refusals == (
        "ValueError: Parse 3.5 does not support decoder cross-attention",)
    # both wrong: vLLM checks the causal prefix first
    assert parse_config(_parse35(), file="c").refusals == (
        "ValueError: Parse 3.5 requires a causal visual prefix",)


def test_a_message_names_the_configs_values() -> None:
    raw = {"architectures": ["NemotronParseForConditionalGeneration"], "model_type": "nemotron_parse",
           "decoder": {"model_type": "mbart", "d_model": 1000, "decoder_layers": 2,
                       "decoder_attention_heads": 16}}
    assert parse_config(raw, file="c").refusals == (
        "ValueError: embed_dim must be divisible by num_heads (got `embed_dim`: 1000 and "
        "`num_heads`: 16).",)
