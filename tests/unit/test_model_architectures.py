"""Architectures per engine version (vLLM's registry, extracted as data): refused
ones exit 1 in vLLM's words naming the architecture and the engine, unmapped
ones warn (a failure with --strict); `list models`; errors name the config line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.models import load_model
from selector.models.arch_registry import load_model_registry
from selector.models.families import families
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
LLAMA = json.loads((ROOT / "schemas" / "models" / "llama-3.1-8b.json").read_text())
ENGINE_VERSIONS = sorted(p.name.removeprefix("vllm-") for p in (ROOT / "schemas" / "engines").iterdir()
                         if p.is_dir())


def _deployment(tmp_path: Path, architecture: str, engine: str | None = None) -> Path:
    config = dict(LLAMA, architectures=[architecture])
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    lines = ["device: H100", "model: ./config.json"]
    if engine:
        lines.append(f"engine: {engine}")
    path = tmp_path / "deploy.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("architecture", "last"), [
    ("MllamaForConditionalGeneration", "0.10.2"),
    ("BaichuanForCausalLM", "0.23.0"),
    ("QWenLMHeadModel", "0.23.0"),
])
@pytest.mark.parametrize("engine", [f"vllm=={v}" for v in ENGINE_VERSIONS])
def test_removed_architectures_exit_1_in_vllms_words(
    tmp_path: Path, architecture: str, last: str, engine: str
) -> None:
    path = _deployment(tmp_path, architecture, engine)
    code, out, err = run_cli(["check", str(path), "--format", "json"])
    assert code == 1, err
    document = json.loads(out)
    assert document["passed"] is False
    finding = next(f for f in document["findings"] if f["code"] == "AS131")
    assert architecture in finding["message"] and engine in finding["message"]
    # vLLM's own sentence (vllm/model_executor/models/registry.py _raise_for_unsupported)
    assert (f"Model architecture {architecture} was supported in vLLM until v{last}, "
            "and is not supported anymore.") in finding["message"]
    assert last in finding["hint"]


def test_made_up_architecture_exits_1(tmp_path: Path) -> None:
    path = _deployment(tmp_path, "TotallyMadeUpForCausalLM")
    code, out, _ = run_cli(["check", str(path)])
    assert code == 1
    text = " ".join(out.split())
    assert "Model architectures ['TotallyMadeUpForCausalLM'] are not supported for now." in text
    assert "vllm==0.33.0" in text and "INVALID" in text


def test_unmapped_supported_architecture_warns_and_fails_under_strict(tmp_path: Path) -> None:
    path = _deployment(tmp_path, "Olmo2ForCausalLM")
    code, out, _ = run_cli(["check", str(path)])
    assert code == 0
    assert "AS132" in out and "Olmo2ForCausalLM" in out
    code, _, _ = run_cli(["check", str(path), "--strict"])
    assert code == 1


def test_mapped_architecture_has_no_architecture_finding(tmp_path: Path) -> None:
    path = _deployment(tmp_path, "LlamaForCausalLM")
    code, out, _ = run_cli(["check", str(path), "--format", "json"])
    assert code == 0
    assert not [f for f in json.loads(out)["findings"] if f["code"].startswith("AS13")]


def test_every_family_module_is_a_vllm_module() -> None:
    catalog = load_catalog()
    modules: set[str] = set()
    architectures: set[str] = set()
    for name in catalog.engine_names:
        registry = load_model_registry(catalog.engine(name).directory)
        if registry is None:
            continue
        for table in registry.tables.values():
            modules.update(module for module, _ in table.values())
            architectures.update(table)
    for family in families().values():
        assert set(family.modules) <= modules, (family.name, set(family.modules) - modules)
        assert set(family.architectures) <= architectures, family.name


def test_registry_data_is_vllms(tmp_path: Path) -> None:
    """The committed registry equals a fresh extraction from the installed vLLM
    (when an oracle environment is present; CI compares the committed data)."""
    from tools.extract_model_registry import extract

    for version in ENGINE_VERSIONS:
        package = Path(f"/work/venvs/oracle-{version}/lib/python3.11/site-packages/vllm")
        committed = ROOT / "schemas" / "engines" / f"vllm-{version}" / "model_registry.json"
        assert committed.is_file()
        if not package.is_dir():
            continue
        assert extract(package) == json.loads(committed.read_text())


def test_list_models_per_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run_cli(["list", "models", "--format", "json"])
    assert code == 0
    rows = {row["architecture"]: row for row in json.loads(out)}
    assert rows["NemotronHForCausalLM"]["family"] == "nemotron_h"
    assert rows["Llama4ForConditionalGeneration"]["presets"] == "llama-4-scout"
    assert rows["MllamaForConditionalGeneration"]["status"] == "removed (last vllm==0.10.2)"
    code, out, _ = run_cli(["list", "models", "--engine", "vllm==0.25.1", "--format", "json"])
    old = {row["architecture"] for row in json.loads(out)}
    assert code == 0 and "LlamaForCausalLM" in old and len(old) < len(rows)
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run_cli(["list", "models"])
    assert code == 0 and "NemotronHForCausalLM" in out


def test_errors_name_the_field_and_its_line(tmp_path: Path) -> None:
    config = dict(LLAMA, num_key_value_heads="eight")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config, indent=2))
    with pytest.raises(InputError) as info:
        load_model(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if '"num_key_value_heads"' in text)
    assert (info.value.field, info.value.line) == ("num_key_value_heads", line)
    nested = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 2,
                              "hidden_size": "wide"}}
    path.write_text(json.dumps(nested, indent=2))
    with pytest.raises(InputError) as info:
        load_model(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if '"hidden_size"' in text)
    assert info.value.field == "text_config.hidden_size" and info.value.line == line
    code, _, err = run_cli(["check", str(_deployment_for(tmp_path, path))])
    assert code == 2 and f"{path}:{line}" in err and "text_config.hidden_size" in err


def _deployment_for(tmp_path: Path, config: Path) -> Path:
    path = tmp_path / "d.yaml"
    path.write_text(f"device: H100\nmodel: {config}\n")
    return path


def test_a_layout_vllm_refuses_exits_1_in_its_words(tmp_path: Path) -> None:
    config = ROOT / "tests" / "fixtures" / "hf_configs" / "edge" / "qwen2-window-mixed-shape.json"
    code, out, _ = run_cli(["check", str(_deployment_for(tmp_path, config)), "--format", "json"])
    assert code == 1
    finding = next(f for f in json.loads(out)["findings"] if f["code"] == "AS133")
    assert "Sliding window for some but all layers is not supported" in finding["message"]
    assert "vllm==0.33.0" in finding["message"]
