"""The config-class defaults the parser gives omitted fields are vLLM's (its
``AutoConfig`` classes'), recorded per release by tools/config_defaults_oracle.py.

* ``schemas/models/config_defaults.yaml`` is what the recorder derives from the
  committed answers (every release's class agrees on each applied default);
* the published LLaVA configs that leave the text model's sizes to LlamaConfig /
  MistralConfig parse to the layers, heads and head size vLLM reads from them
  (``get_config`` + its convertor, recorded in the same answers);
* a field no config class gives a default still stops the parse with the file, field
  and line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from selector.errors import InputError
from selector.models.config_defaults import class_defaults
from selector.models.hf_config import omitted_defaults, parse_config, resolve_family
from selector.models.loader import load_config_file
from tools import config_defaults_oracle as recorder

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "schemas" / "models" / "config_defaults.yaml"


def _data() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    return loaded


def _answers() -> list[dict[str, Any]]:
    return recorder.read_answers()


def test_the_data_is_what_the_recorded_answers_give() -> None:
    answers = _answers()
    assert answers, "no recorded answers: run tools/config_defaults_oracle.py --out"
    assert _data() == json.loads(json.dumps(recorder.data_from(answers))), (
        "schemas/models/config_defaults.yaml is stale: python tools/config_defaults_oracle.py --data")


def test_every_mapped_text_model_type_was_asked() -> None:
    for answer in _answers():
        assert sorted(answer["model_types"]) == recorder.model_types(), answer["vllm_version"]


def test_the_releases_transformers_disagree_where_the_data_says() -> None:
    """A default the recorded releases' classes disagree on is not applied."""
    data = _data()["model_types"]
    for model_type, row in data.items():
        assert not set(row["differs"]) & set(row["defaults"]), model_type
        for name, values in row["differs"].items():
            assert len({json.dumps(v) for v in values.values()}) > 1, (model_type, name)


@pytest.mark.parametrize("folder", recorder.CONFIGS)
def test_a_published_config_reads_as_vllm_reads_it(folder: str) -> None:
    path = ROOT / folder / "config.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    for answer in _answers():
        if folder not in answer.get("configs", {}):
            continue
        expected = answer["configs"][folder]
        model = parse_config(raw, file=str(path))
        layers = [layer for layer in model.layers if layer.is_attention]
        assert model.num_layers == len(layers) == expected["num_hidden_layers"], answer["vllm_version"]
        assert model.hidden_size == expected["hidden_size"]
        assert model.max_position_embeddings == expected["max_position_embeddings"]
        assert {(layer.total_q_heads, layer.total_kv_heads, layer.head_size, layer.sliding_window)
                for layer in layers} == {
            (expected["total_num_attention_heads"], expected["total_num_kv_heads"],
             expected["head_size"], expected["sliding_window"])}
        section = {**raw, **raw["text_config"], **omitted_defaults(raw)}
        assert section["intermediate_size"] == expected["intermediate_size"]
        assert section["vocab_size"] == expected["vocab_size"]
        assert class_defaults(expected["text_model_type"]) is not None
        assert class_defaults(expected["text_model_type"]).config_class == expected["text_config_class"]


def test_the_report_names_the_defaults_it_used() -> None:
    folder = recorder.CONFIGS[0]
    path = ROOT / folder / "config.json"
    model = parse_config(json.loads(path.read_text(encoding="utf-8")), file=str(path))
    used = {line.split(" = ", 1)[0]: line for line in model.config_defaults}
    assert "text_config.num_hidden_layers" in used
    assert "(LlamaConfig default, transformers/models/llama/configuration_llama.py:" in used[
        "text_config.num_hidden_layers"]
    assert "text_config.max_position_embeddings" not in used  # the config gives it


def test_an_explicit_null_keeps_null() -> None:
    """MistralConfig's sliding_window default (4096) is for an omitted field only: the
    LLaVA-NeXT config's explicit null stays null, as transformers keeps it."""
    path = ROOT / recorder.CONFIGS[1] / "config.json"
    model = parse_config(json.loads(path.read_text(encoding="utf-8")), file=str(path))
    assert all(layer.sliding_window is None for layer in model.layers)
    assert not any(line.startswith("text_config.sliding_window") for line in model.config_defaults)


def test_a_field_without_a_default_still_errors(tmp_path: Path) -> None:
    """A text model type no recorded class gives (an unknown model_type) keeps the
    missing-field error with its file, field and line."""
    raw = json.loads((ROOT / recorder.CONFIGS[0] / "config.json").read_text(encoding="utf-8"))
    raw["text_config"] = {**raw["text_config"], "model_type": "not_a_model_type"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw, indent=2), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_config_file(path)
    assert caught.value.field == "text_config.num_hidden_layers"
    assert caught.value.file == str(path)
    assert caught.value.line == 10  # the text_config object the field belongs in
    assert "missing required field" in str(caught.value)


def test_a_derived_field_is_no_default() -> None:
    """LlamaConfig derives head_dim and num_key_value_heads in __post_init__: neither is
    applied as a default (the parser derives them as vLLM does)."""
    llama = class_defaults("llama")
    assert llama is not None
    assert llama.default("head_dim") is None and llama.default("num_key_value_heads") is None
    assert llama.default("num_hidden_layers") == ("num_hidden_layers", 32)


def test_the_check_command_reads_the_published_configs(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ATTN_SELECT_NO_CACHE": "1"}
    for folder in recorder.CONFIGS:
        deployment = tmp_path / "d.yaml"
        deployment.write_text(f"device: H100\nmodel: {ROOT / folder / 'config.json'}\n",
                              encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "selector", "check", str(deployment),
                               "--engine", "vllm==0.33.0", "-f", "json"],
                              capture_output=True, text=True, check=False, cwd=ROOT, env=env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert report["model"]["num_layers"] == 32
        assert any(line.startswith("text_config.num_hidden_layers = 32 (")
                   for line in report["model"]["config_defaults"])


def test_the_families_written_defaults_are_the_recorded_ones() -> None:
    """A family's ``defaults`` (families.yaml, written before the recorder) equal the
    recorded default of every model type the family reads, where one is recorded."""
    from selector.models.config_defaults import recorded_model_types
    from selector.models.families import causal_lm_architecture, family_for

    checked = 0
    for model_type, recorded in recorded_model_types().items():
        architecture = causal_lm_architecture(model_type)
        family = family_for(architecture) if architecture else None
        if family is not None and family.defaults_class not in (None, model_type):
            continue  # the family's defaults are another config class's
        for name, value in (family.defaults if family is not None else {}).items():
            found = recorded.default(name)
            if found is not None:
                assert found[1] == value, (model_type, family.name if family else None, name)
                checked += 1
    assert checked >= 15


@pytest.mark.parametrize("model_type", ["llama", "mistral", "qwen3", "gemma3_text"])
def test_a_top_level_config_of_only_its_type_reads_as_the_class_builds_it(model_type: str) -> None:
    """A config.json naming only its architecture and model type: every layer as the
    class's no-argument instance has it (the recorded defaults, and the derived fields'
    recorded values: Llama's head_dim = 4096 // 32, num_key_value_heads = 32). Gemma-3's
    family writes the same defaults itself (families.yaml), so none is reported as the
    class's."""
    from selector.models.families import causal_lm_architecture

    row = next(a for a in _answers() if a["vllm_version"] == "0.33.0")["model_types"][model_type]
    built = {name: value for name, (value, _line) in row["defaults"].items()}
    built |= {name: d["no_argument_value"] for name, d in row["derived"].items()}
    raw = {"architectures": [causal_lm_architecture(model_type)], "model_type": model_type}
    model = parse_config(raw, file="config.json")
    assert model.num_layers == built["num_hidden_layers"]
    assert model.hidden_size == built["hidden_size"]
    attention = [layer for layer in model.layers if layer.is_attention]
    assert len(attention) == built["num_hidden_layers"]
    assert {(layer.total_q_heads, layer.total_kv_heads, layer.head_size) for layer in attention} == {
        (built["num_attention_heads"], built["num_key_value_heads"], built["head_dim"])}
    written = "num_hidden_layers" in resolve_family(raw["architectures"][0])[0].defaults
    assert written or any(line.startswith("num_hidden_layers = ") for line in model.config_defaults)
