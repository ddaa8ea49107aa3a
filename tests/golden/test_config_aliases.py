"""The config fields the model parser reads are the ones vLLM reads, per release.

``tests/golden/oracle/releases/vllm-X/config_aliases.json`` is vLLM X's own answer
(``tools/config_aliases_oracle.py``: its ``get_total_num_kv_heads`` and the other
``ModelArchConfigConvertorBase`` getters asked with recording ``PretrainedConfig``
objects, and every config class of the release asked through vLLM's getters). Every
profiled engine must have one: goldens never write themselves.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.memory import default_max_model_len, startup_profile
from selector.models.families import families, kv_heads_fields
from selector.models.hf_config import parse_config

ROOT = Path(__file__).parent / "oracle" / "releases"
GOLDEN = "config_aliases.json"
ENGINES = load_catalog().engine_names
REGENERATE = ("python tools/config_aliases_oracle.py all --golden tests/golden/oracle/releases "
              "<version>")


@cache
def _golden(engine: str) -> dict[str, Any]:
    path = ROOT / engine.replace("==", "-", 1) / GOLDEN
    if not path.is_file():
        pytest.fail(f"no vLLM answer for {engine}: {path} is missing ({REGENERATE})")
    answer: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert answer["vllm_version"] == engine.split("==", 1)[1], path
    return answer


def _claims() -> list[tuple[str, str, str]]:
    """(families, canonical field, alias) for every alias families.yaml states (the
    generic family's aliases apply to every family: stated once)."""
    stated: dict[tuple[str, str], list[str]] = {}
    for name, family in families().items():
        for field, names in family.aliases.items():
            for alias in names:
                stated.setdefault((field, alias), []).append(name)
    return [(",".join(names) if len(names) < len(families()) else "every family", field, alias)
            for (field, alias), names in sorted(stated.items())]


def test_every_profiled_engine_has_vllms_answer() -> None:
    have = {p.parent.name.replace("vllm-", "vllm==", 1) for p in ROOT.glob(f"vllm-*/{GOLDEN}")}
    missing = [engine for engine in ENGINES if engine not in have]
    assert not missing, f"no {GOLDEN} for {missing} ({REGENERATE})"


@pytest.mark.parametrize("engine", ENGINES)
def test_kv_head_fields_are_the_ones_vllm_reads_in_its_order(engine: str) -> None:
    answer = _golden(engine)["total_num_kv_heads"]
    assert answer["fallback"] == "num_attention_heads"
    assert list(kv_heads_fields()) == answer["precedence"], answer["names_source"]
    # vLLM asked the config for these and nothing else before its fallback
    assert answer["asked"] == [*answer["precedence"], "num_attention_heads"]


def _llama(**fields: Any) -> dict[str, Any]:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2,
            "hidden_size": 1024, "num_attention_heads": 16, **fields}


def _parsed_kv_heads(config: dict[str, Any]) -> int:
    facts = parse_config(config, file="config.json")
    return facts.layers[0].total_kv_heads


@pytest.mark.parametrize("engine", ENGINES)
def test_the_parser_picks_the_kv_head_field_vllm_picks(engine: str) -> None:
    """The oracle's elimination, replayed on the parser: every field set to a distinct
    value, the first in vLLM's precedence wins; without it the next; without any,
    one KV head per query head."""
    precedence = _golden(engine)["total_num_kv_heads"]["precedence"]
    values = {name: i + 1 for i, name in enumerate(precedence)}
    for first in precedence:
        assert _parsed_kv_heads(_llama(**values)) == values[first]
        del values[first]
    assert _parsed_kv_heads(_llama()) == 16


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("family", "field", "alias"), _claims(),
                         ids=[f"{field}<-{alias}" for _, field, alias in _claims()])
def test_every_alias_claim_is_vllms(engine: str, family: str, field: str, alias: str) -> None:
    """vLLM reads the field itself under that name (its own list: the maximum
    length), or some config class of the release maps the alias to the field that
    vLLM's getter reads (transformers' ``attribute_map`` or the class's ``__init__``)."""
    answer = _golden(engine)
    read = answer["fields"].get(field)
    assert read is not None, f"{family}: the oracle does not ask vLLM for {field!r} (extend it)"
    assert field in read["asked"], read["source"]
    if alias in read["asked"]:
        return
    confirmed = answer["config_classes"]["aliases"][field]["model_types"].get(alias)
    assert confirmed is not None, f"{family}: {alias!r} was not asked (re-run the oracle)"
    assert confirmed, f"{family}: no config class of {engine} gives vLLM {field} from {alias!r}"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_maximum_length_is_the_smallest_length_field(engine: str) -> None:
    """vLLM runs with the smallest of its length fields; so does a deployment's KV plan
    (``default_max_model_len``), whatever ``max_position_embeddings`` the facts keep."""
    read = _golden(engine)["fields"]["max_position_embeddings"]
    assert read["rule"] == "smallest"
    config = _llama(max_position_embeddings=32768, seq_length=8192)
    assert default_max_model_len(config, startup_profile(load_catalog(), engine)) == 8192


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.xfail(strict=True, reason="open: transformers' NemotronHConfig (the oracle "
                   "interpreters' transformers) keeps head_dim (default 128) and does not map "
                   "attention_head_dim, which families.yaml's nemotron_h alias reads")
def test_nemotron_h_config_class_maps_attention_head_dim(engine: str) -> None:
    claims = _golden(engine)["config_classes"]["aliases"]["head_dim"]["model_types"]
    assert "nemotron_h" in claims["attention_head_dim"]
