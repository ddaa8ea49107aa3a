"""vLLM's own answers for real models (tools/vllm_model_reference.py, which builds
vLLM's model classes on CPU and records every layer's KV-cache spec) must agree
with the project's model reader, layer by layer; no vLLM is needed here.

Every config vLLM could not build on the CPU harness is listed in REFUSED with
the reason, so a new refusal (or a new config) fails until it is explained.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.models import list_presets, load_model
from selector.models.arch_registry import architecture_status, load_model_registry
from tools.model_agreement import GOLDEN, compare, load_answers

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "fixtures" / "hf_configs"
ENGINE = "vllm-0.33.0"

REFUSED: dict[str, tuple[str, str]] = {
    # config -> (what vLLM said, why / what the project answers)
    "MiniMaxAI--MiniMax-M3.json": (
        "Transformers does not recognize", "transformers has no minimax_m3 config and "
        "MiniMaxM3ForCausalLM is not in vLLM 0.33.0's registry: AS131 here too"),
    "stepfun-ai--Step-3.7-Flash.json": (
        "are not supported for now", "Step3p7FlashForCausalLM is unknown to 0.33.0: AS131 here too"),
    "XiaomiMiMo--MiMo-7B-Base.json": (
        "Transformers does not recognize", "needs the model's remote code (trust_remote_code), "
        "not available offline; MiMoForCausalLM is read with the llama family"),
    "deepseek-ai--DeepSeek-V4-Flash.json": (
        "tilelang", "the CPU harness lacks tilelang; DeepSeek-V4 is unmapped (AS132)"),
    "Qwen--Qwen-7B-Chat.json": (
        "was supported in vLLM until v0.23.0", "QWenLMHeadModel was removed from vLLM in 0.23.0"),
    "qwen2-window-mixed-shape.json": (
        "Sliding window for some but all layers is not supported", "AS133 with the same text"),
    "moonshotai--Kimi-K2.5.json": (
        "accelerator", "the vision tower touches the device on CPU; its text model is DeepSeek-V3 MLA"),
}


def _answers() -> list[dict[str, object]]:
    return load_answers(ENGINE)


def test_the_answers_exist_and_cover_every_preset_and_config() -> None:
    path = GOLDEN / f"{ENGINE}.jsonl.gz"
    assert path.is_file(), f"{path} is missing: run tools/vllm_model_reference.py (goldens never write themselves)"
    covered = {str(a["config"]) for a in _answers()}
    presets = {f"schemas/models/{name}.json" for name in list_presets()}
    configs = {f"tests/fixtures/hf_configs/{p.name}" for p in CONFIGS.glob("*.json")
               if p.stem != "broken_layer_types"}
    edge = {f"tests/fixtures/hf_configs/edge/{p.name}" for p in (CONFIGS / "edge").glob("*.json")}
    assert presets <= covered, sorted(presets - covered)
    assert configs <= covered, sorted(configs - covered)
    assert edge <= covered, sorted(edge - covered)
    assert len(configs) >= 40


@pytest.mark.parametrize("answer", _answers(), ids=lambda a: Path(str(a["config"])).stem)
def test_vllm_and_the_tool_agree(answer: dict[str, object]) -> None:
    name = Path(str(answer["config"])).name
    if answer["status"] != "ok":
        said, _why = REFUSED[name]
        assert said in str(answer["error"])
        return
    assert name not in REFUSED
    result = compare(answer)
    assert result.tool_error is None, result.tool_error
    assert result.differences == [], "\n".join(result.differences[:20])
    assert result.agreeing == result.layers > 0


def test_architectures_vllm_refuses_are_refused_here() -> None:
    catalog = load_catalog()
    data = catalog.engine("vllm==0.33.0")
    registry = load_model_registry(data.directory)
    assert registry is not None
    for answer in _answers():
        error = str(answer.get("error", ""))
        if "not supported for now" in error or "Transformers does not recognize" in error:
            raw = json.loads((ROOT / str(answer["config"])).read_text())
            status = architecture_status(raw["architectures"], registry, data.engine)
            if status.supported:  # remote-code refusals name a supported architecture
                assert "Transformers does not recognize" in error
                continue
            assert status.status == "unknown"
            assert status.architecture in status.message


def test_hybrid_models_get_vllm_state_pages() -> None:
    """Nemotron-H / Qwen3-Next / Qwen3.5 / Jamba: the state layers and their
    page sizes are vLLM's (checked layer by layer above); spot-check the figures."""
    pages = {}
    for answer in _answers():
        if answer["status"] != "ok":
            continue
        for record in answer["layers"]:  # type: ignore[union-attr]
            if record.get("spec") == "MambaSpec":
                pages[Path(str(answer["config"])).stem] = record["page_size_bytes"]
                break
    assert pages["nvidia--Nemotron-H-56B-Base-8K"] == 16900096
    assert pages["nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"] == 2134016
    assert pages["qwen3-next-80b-a3b"] == 1097728
    assert pages["jamba-v0.1"] == 311296
    assert pages["falcon-h1-7b-shape"] == 1594368
    assert pages["granite-4-h-shape"] > 0
    model = load_model(CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json")
    kinds = [layer.kind for layer in model.layers]
    assert (kinds.count("attention"), kinds.count("mamba"), kinds.count("none")) == (10, 54, 54)
    falcon = load_model(CONFIGS / "edge" / "falcon-h1-7b-shape.json")
    assert all(layer.has_parallel_state for layer in falcon.layers)
    assert len(falcon.state_layers) == falcon.num_layers == 44


def test_start_up_refusals_read_from_the_config_are_vllms() -> None:
    """vLLM's Qwen2Model refuses layer_types mixing sliding and full layers; the
    model reader states the same sentence (AS133)."""
    answer = next(a for a in _answers() if "qwen2-window-mixed" in str(a["config"]))
    model = load_model(CONFIGS / "edge" / "qwen2-window-mixed-shape.json")
    assert model.refusals and model.refusals[0] in str(answer["error"])
    windowed = load_model(CONFIGS / "edge" / "qwen2-window-all-shape.json")
    assert windowed.refusals == ()
    assert {layer.sliding_window for layer in windowed.layers} == {None}  # as vLLM builds it
