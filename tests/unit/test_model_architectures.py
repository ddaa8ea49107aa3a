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
from selector.models.hf_config import parse_config
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
    # every served architecture is mapped (unmapped.yaml lists none): a speculative draft
    # served on its own is supported and unmapped, with unmapped.yaml's speculative_draft reason
    path = _deployment(tmp_path, "DFlashDraftModel")
    code, out, _ = run_cli(["check", str(path), "--format", "json"])
    assert code == 0
    finding = next(f for f in json.loads(out)["findings"] if f["code"] == "AS132")
    # the reason unmapped.yaml gives is part of the warning
    assert "DFlashDraftModel" in finding["message"] and "speculative draft" in finding["message"]
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


def test_a_family_backend_is_a_backend_of_every_release_serving_it() -> None:
    """A family's ``attention.backend`` (the backend its attention module passes itself,
    openPangu's sink attention) names a backend of every profiled release whose registry
    has one of the family's architectures or modules."""
    catalog = load_catalog()
    for family in families().values():
        backend = family.attention.backend
        if backend is None:
            continue
        served = 0
        for name in catalog.engine_names:
            engine = catalog.engine(name)
            registry = load_model_registry(engine.directory)
            if registry is None:
                continue
            rows = {arch: module for table in registry.tables.values()
                    for arch, (module, _cls) in table.items()}
            if set(family.architectures) & set(rows) or set(family.modules) & set(rows.values()):
                served += 1
                assert backend in engine.backends, (family.name, name, backend)
        assert served, family.name


def _registry_architectures() -> dict[str, tuple[str, set[str]]]:
    """architecture -> (its table, the profiled releases whose registry has it)."""
    out: dict[str, tuple[str, set[str]]] = {}
    for version in ENGINE_VERSIONS:
        registry = load_model_registry(ROOT / "schemas" / "engines" / f"vllm-{version}")
        if registry is None:
            continue
        for table, rows in registry.tables.items():
            for arch in rows:
                out.setdefault(arch, (table, set()))[1].add(version)
    return out


def test_every_registered_architecture_is_mapped_or_has_a_reason() -> None:
    """Issue 24: every architecture of every profiled release's registry is mapped by a
    family, or unmapped.yaml says why; and nothing a family maps is listed there."""
    from selector.models.families import family_for, unmapped_reason

    unlisted, stale = [], []
    for arch, (table, _versions) in sorted(_registry_architectures().items()):
        mapped = family_for(arch) is not None
        reason = unmapped_reason(arch, table)
        if not mapped and reason is None:
            unlisted.append(arch)
        if mapped and reason is not None and table != "speculative_decoding_models":
            stale.append(arch)
    assert not unlisted, f"no family and no reason in schemas/models/unmapped.yaml: {unlisted}"
    assert not stale, f"mapped, yet listed in schemas/models/unmapped.yaml: {stale}"


def test_list_models_gives_the_unmapped_reason() -> None:
    code, out, _ = run_cli(["list", "models", "--format", "json"])
    assert code == 0
    rows = {row["architecture"]: row for row in json.loads(out)}
    assert rows["LlamaForCausalLM"]["unmapped_reason"] == ""
    assert rows["DeepseekV4ForCausalLM"]["unmapped_reason"] == ""  # mapped: model-driven
    assert rows["DeepseekV41ForCausalLM"]["unmapped_reason"] == ""  # mapped: model-driven
    assert rows["Dots3NoteForCausalLM"]["unmapped_reason"] == ""  # mapped: model-driven
    assert "speculative draft" in rows["DFlashDraftModel"]["unmapped_reason"]
    assert all(row["unmapped_reason"] != "not listed" for row in rows.values())


@pytest.mark.parametrize(("architecture", "family"), [
    # multimodal wrappers: the family of the language model they build from text_config
    ("LlavaForConditionalGeneration", "llama"),
    ("InternVLChatModel", "qwen2"),
    ("Glm4vMoeForConditionalGeneration", "llama"),
    ("NemotronH_Nano_VL_V2", "nemotron_h"),
])
def test_a_wrapper_reads_its_language_model(architecture: str, family: str) -> None:
    text = {"InternVLChatModel": dict(LLAMA, model_type="qwen2", architectures=["Qwen2ForCausalLM"]),
            "NemotronH_Nano_VL_V2": {
                "model_type": "nemotron_h", "num_hidden_layers": 4, "hidden_size": 512,
                "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
                "hybrid_override_pattern": "M*M-", "mamba_num_heads": 8, "mamba_head_dim": 64,
                "n_groups": 1, "ssm_state_size": 128}}.get(architecture, dict(LLAMA, model_type="llama"))
    text.pop("architectures", None) if architecture != "InternVLChatModel" else None
    section = "llm_config" if architecture == "InternVLChatModel" else "text_config"
    raw = {"architectures": [architecture], "model_type": "wrapper", section: text}
    if architecture == "Glm4vMoeForConditionalGeneration":
        raw["model_type"] = "glm4v_moe"
    model = parse_config(raw, file="config.json")
    assert model.family == family and model.architecture == architecture
    assert model.num_layers == text["num_hidden_layers"]


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


def test_an_attention_free_model_gets_its_state_only_plan(tmp_path: Path) -> None:
    """Mamba (IsAttentionFree): every layer a Mamba-1 state, one state group, no
    attention layer and no AS132; the groups are vLLM's (the reference's answer for the
    same config, tests/golden/vllm_models/vllm-0.33.0.jsonl.gz)."""
    config = ROOT / "tests" / "fixtures" / "hf_configs" / "synthetic" / "MambaForCausalLM.json"
    model = load_model(config)
    assert model.family == "mamba" and {layer.kind for layer in model.layers} == {"mamba"}
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text(f"device: H200\nmodel: {config}\nmax_model_len: 4096\n")
    code, out, _ = run_cli(["check", str(deployment), "--format", "json"])
    assert code == 0, out
    document = json.loads(out)
    assert not [f for f in document["findings"] if f["code"].startswith("AS13")]


def test_a_cache_less_model_is_read_without_layers_and_checks_from_a_serve_line(
        tmp_path: Path) -> None:
    """Terratorch (terratorch family, cacheless): a config without model_type read as
    transformers' timm_wrapper, no layer, and a `vllm serve` line of it is checked (the
    KV plan has no group, the start-up report no KV cache), as a deployment file is."""
    config = ROOT / "tests" / "fixtures" / "hf_configs" / \
        "ibm-nasa-geospatial--Prithvi-EO-2.0-300M-TL-Sen1Floods11.json"
    model = load_model(config)
    assert (model.family, model.model_type, model.layers) == ("terratorch", "timm_wrapper", ())
    folder = tmp_path / "prithvi"
    folder.mkdir()
    (folder / "config.json").write_text(config.read_text())
    code, out, err = run_cli(["check", "--device", "H200", "--format", "json", "--",
                              "vllm", "serve", str(folder)])
    assert code == 0, err or out
    document = json.loads(out)
    assert document["plan"]["groups"] == []
    assert document["memory"]["no_kv_cache"] and document["memory"]["kv_cache"]["num_blocks"] == 1


def test_rswa_layers_are_deepseek_attentions_of_a_config_that_sets_the_window(tmp_path: Path) -> None:
    """vLLM 0.33.0's DeepseekV2DecoderLayer builds DeepseekAttention where both qk head dims
    are 0 (deepseek_v2.py:1276-1292), an RSWAAttention of the config's rswa_window
    (:208-218); an MLA layer keeps its MLA cache. model_config.rswa_window is the top-level
    config's whatever the layers (model_arch_config_convertor.py:368-372): every layer is
    selected with use_rswa. Unlimited-OCR's recorded answer (RSWASpec on every layer):
    tests/golden/test_vllm_model_agreement.py."""
    source = ROOT / "tests" / "fixtures" / "hf_configs" / "synthetic" / "UnlimitedOCRForCausalLM.json"
    raw = json.loads(source.read_text())
    model = load_model(source)
    assert {layer.rswa_window for layer in model.layers} == {128}
    mla = {**raw, "language_config": {**raw["language_config"], "kv_lora_rank": 512,
                                      "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                                      "v_head_dim": 128}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(mla))
    mla_model = load_model(path)
    assert {(layer.kind, layer.rswa_window) for layer in mla_model.layers} == {("mla", None)}
    assert mla_model.rswa_window == 128
    path.write_text(json.dumps({**raw, "rswa_window": None}))
    plain = load_model(path)
    assert {layer.rswa_window for layer in plain.layers} == {None} and plain.rswa_window is None
