"""vLLM's own answers for real models (tools/vllm_model_reference.py, which builds
vLLM's model classes on CPU and records every layer's KV-cache spec, then the
KV-cache groups after the engine's block-size alignment) must agree with the
project's model reader layer by layer, and with its KV plan group by group (block
size, page bytes, layers); no vLLM is needed here.

Every config vLLM refused is listed in REFUSED with the reason, so a new refusal
(or a new config) fails until it is explained; a config the tool does not yet read
as vLLM builds it is in KNOWN_GAPS, which fails once the gap closes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.models import list_presets, load_model
from selector.models.arch_registry import architecture_status, load_model_registry
from tools import oracle
from tools.model_agreement import GOLDEN, agreements_of, encoder_only_record, load_answers, tool_groups

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
    "Qwen--Qwen-7B-Chat.json": (
        "was supported in vLLM until v0.23.0", "QWenLMHeadModel was removed from vLLM in 0.23.0"),
    "HYV4ForCausalLM-indexer-types-length.json": (
        "indexer_types must contain one entry per hidden layer: expected 4, got 3.",
        "HY-V4's compute_skip_topk_layers (attention.py:84-89): the family's "
        "sparse_layers.length_refusal in the same words"),
    "HYV4ForCausalLM-indexer-types-value.json": (
        "indexer_types only supports 'full' and 'shared', got ['skip'].",
        "HY-V4's compute_skip_topk_layers (attention.py:90-94): the family's "
        "sparse_layers.values_refusal in the same words"),
    "synthetic--Step5ForCausalLM-dense.json": (
        "Step5 requires a checkpoint with a sparse_config section; dense-only checkpoints are "
        "not supported.", "Step5DecoderLayer (models/step5/nvidia/model.py:1853-1857): "
        "model-driven.yaml's step5 selection refuses it in the same words (MD004; "
        "tests/golden/test_model_driven.py)"),
    "qwen2-window-mixed-shape.json": (
        "Sliding window for some but all layers is not supported", "AS133 with the same text"),
    "Step1ForCausalLM.json": (
        "use_alibi_sqrt is not supported by backend FLASH_ATTN",
        "vLLM's selector picks FLASH_ATTN and the layer refuses it (attention.py:365-369): the "
        "tool's LB001 in the same words; TRITON_ATTN builds it "
        "(tests/golden/test_layer_build_refusals.py)"),
    "Rnj1ForCausalLM.json": (
        "Chunked attention with lookback requires the Triton backend, but got FLASH_ATTN.",
        "vLLM's selector picks FLASH_ATTN for the chunk_lookback layers and the layer asserts "
        "TRITON_ATTN (attention.py:390-394): the tool's LB002 in the same words; TRITON_ATTN "
        "builds it (tests/golden/test_layer_build_refusals.py)"),
    "FlintForCausalLM.json": (
        "AssertionError: Flint requires FlashInfer attention",
        "on SM90 vLLM's selector picks FLASH_ATTN and Flint's layer asserts FlashInfer "
        "(flint/model.py:312-313): the tool's LB003 (the family's build_checks) in the same "
        "words; FLASHINFER builds it (tests/golden/test_layer_build_refusals.py)"),
    "MiniCPMV-4_6.json": (
        "Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0, 4.5. Got version: (4, 6)",
        "MiniCPMV.__new__ dispatches on the version (minicpmv.py:2464-2477): the minicpmv_lm "
        "family's by_version refusal, AS133 with the same text"),
    "MiniCPMV-2_x.json": (
        "invalid literal for int() with base 10: 'x'",
        "ModelConfig parses the version with minicpmv.py's get_version_by_config (:471-481): "
        "the minicpmv_lm family's by_version invalid refusal, AS133 with the same text"),
    "MiniCPMO-4.json": (
        "Currently, MiniCPMO only supports versions 2.6, 4.5. Got version: (4,)",
        "MiniCPMO.__new__ dispatches on the version (minicpmo.py:1014-1041): the minicpmo_lm "
        "family's by_version refusal, AS133 with the same text"),
    "MiniCPMO-v4_5.json": (
        "invalid literal for int() with base 10: 'v4'",
        "MiniCPMOProcessingInfo parses the version as MiniCPM-V's does (minicpmv.py:471-481) "
        "while the model config is built: the minicpmo_lm family's invalid refusal, AS133"),
    "falcon-h1-0.5b-shape.json": (
        "mamba_n_heads must divide mamba_expand * hidden_size",
        "transformers' FalconH1Config refuses it as vLLM loads it: AS133 with the same text"),
    "nemotron-parse-odd-heads-shape.json": (
        "ValueError: embed_dim must be divisible by num_heads (got `embed_dim`: 1000 and `num_heads`: 16).",
        "WhisperAttention refuses a decoder width its heads do not divide: the family's "
        "config_refusals, AS133 with the same text"),
    "parse-3.5-cross-attention-shape.json": (
        "ValueError: Parse 3.5 does not support decoder cross-attention",
        "a decoder config without add_cross_attention (getattr default true): the family's "
        "config_refusals, AS133 with the same text"),
    "cohere-asr-heads-mismatch-shape.json": (
        "Encoder and decoder must have the same number of kv heads",
        "CohereAsrModelArchConfigConvertor asserts the encoder's n_heads equal the decoder's: "
        "the family's config_refusals, AS133 with the same text"),
}

KNOWN_GAPS: dict[str, str] = {
    # config -> why the tool does not agree yet (DeepSeek-V4-Flash agrees since its layers'
    # own backend choice is data: schemas/engines/*/model-driven.yaml; JambaForSequenceClassification,
    # ModernBERT, NemotronHPuzzle, BAGEL, LongCat-Flash and Moondream-3 since their rules are data too;
    # Unlimited-OCR's RSWAAttention layers since the deepseek_v2 family's attention.rswa)
}


def _encoder_only(answer: dict[str, Any]) -> bool:
    """Every layer an EncoderOnlyAttention (BERT-like), or no layer at all (Terratorch:
    no AttentionLayerBase module): vLLM's model gives no spec and the engine's groups are
    empty (the runner appends an encoder-only group later)."""
    return all(encoder_only_record(r) for r in answer["layers"])


def _answers() -> list[dict[str, Any]]:
    return load_answers(ENGINE)


def test_the_answers_exist_and_cover_every_preset_and_config() -> None:
    path = GOLDEN / f"{ENGINE}.jsonl.gz"
    assert path.is_file(), f"{path} is missing: run tools/vllm_model_reference.py (goldens never write themselves)"
    covered = {str(a["config"]) for a in _answers()}
    presets = {f"schemas/models/{name}.json" for name in list_presets()}
    configs = {f"tests/fixtures/hf_configs/{p.name}" for p in CONFIGS.glob("*.json")
               if p.stem != "broken_layer_types"}
    edge = {f"tests/fixtures/hf_configs/edge/{p.name}" for p in (CONFIGS / "edge").glob("*.json")}
    synthetic = {f"tests/fixtures/hf_configs/synthetic/{p.name}"
                 for p in (CONFIGS / "synthetic").glob("*.json")}
    # an architecture only older registries have (Arctic, MPT, Persimmon, Fairseq2-Llama)
    # is answered by its release's venv in that release's file
    registry = load_model_registry(load_catalog().engine("vllm==0.33.0").directory)
    assert registry is not None
    older = {str(a["config"]) for a in _release_answers()
             if json.loads((ROOT / str(a["config"])).read_text())["architectures"][0]
             not in registry.supported}
    assert synthetic <= covered | older, sorted(synthetic - covered - older)
    assert presets <= covered, sorted(presets - covered)
    assert configs <= covered, sorted(configs - covered)
    assert edge <= covered, sorted(edge - covered)
    assert len(configs) >= 40


def test_every_mapped_architecture_has_an_answer_or_a_reason() -> None:
    """Issue 24: the agreement table covers every architecture vLLM 0.33.0 supports and a
    family maps, or tests/golden/vllm_models/not_built.yaml says why the reference has no
    answer for it; nothing listed there has one."""
    import yaml

    from selector.models.arch_registry import model_rows

    listed = yaml.safe_load((GOLDEN / "not_built.yaml").read_text())["not_built"]
    answered = {json.loads((ROOT / str(a["config"])).read_text())["architectures"][0]
                for a in _answers()}
    rows = [r for r in model_rows(load_catalog().engine("vllm==0.33.0"))
            if r["status"] == "supported" and r["family"] != "-"
            and r["table"] != "speculative_decoding_models"]
    missing = [r["architecture"] for r in rows
               if r["architecture"] not in answered and r["architecture"] not in listed]
    assert not missing, f"mapped, no reference answer and no reason in not_built.yaml: {missing}"
    stale = sorted(set(listed) & answered)
    assert not stale, f"answered now: drop from not_built.yaml: {stale}"


def test_every_answer_is_vllms() -> None:
    """An answer is vLLM's build or vLLM's refusal; a harness failure is never
    recorded (the reference exits 1 and writes nothing)."""
    for answer in _answers():
        assert answer["status"] in ("ok", "refused"), answer["config"]
        if answer["status"] == "ok":
            aligned = answer["aligned"]
            assert isinstance(aligned, dict), answer["config"]
            assert aligned["groups"] or _encoder_only(answer), answer["config"]


@pytest.mark.parametrize("answer", _answers(), ids=lambda a: Path(str(a["config"])).stem)
def test_vllm_and_the_tool_agree(answer: dict[str, Any]) -> None:
    name = Path(str(answer["config"])).name
    if answer["status"] != "ok":
        said, _why = REFUSED[name]
        assert said in str(answer["error"])
        return
    assert name not in REFUSED
    result = next(r for r in agreements_of([answer]))
    if name in KNOWN_GAPS:
        assert result.tool_error or result.differences or result.group_differences, (
            f"{name} agrees now: drop it from KNOWN_GAPS")
        return
    assert result.tool_error is None, result.tool_error
    assert result.differences == [], "\n".join(result.differences[:20])
    assert result.agreeing == result.layers
    assert result.layers > 0 or not answer["layers"]  # none only where vLLM built none
    assert result.group_differences == [], "\n".join(result.group_differences[:20])
    assert result.groups_agreeing == result.groups
    assert result.groups > 0 or _encoder_only(answer)


def test_the_hybrid_alignment_is_vllms() -> None:
    """vLLM 0.33.0 on SM90 (the reference's platform): GDN prefill runs FlashInfer, whose
    checkpoints align the Qwen3-Next / Qwen3.5 block to a multiple of 64 in align mode;
    the tool's plan gives the same block sizes (its own figures before the prefill
    checkpoint step were 544, 784 and 1056)."""
    aligned = {Path(str(a["config"])).stem: a["aligned"] for a in _answers() if a["status"] == "ok"}
    blocks = {name: aligned[name]["block_size"] for name in (
        "qwen3-next-80b-a3b", "Qwen--Qwen3.5-27B", "Qwen--Qwen3.5-35B-A3B", "Qwen--Qwen3.5-397B-A17B")}
    assert blocks == {"qwen3-next-80b-a3b": 576, "Qwen--Qwen3.5-27B": 832,
                      "Qwen--Qwen3.5-35B-A3B": 1088, "Qwen--Qwen3.5-397B-A17B": 2112}
    assert all(block % 64 == 0 for block in blocks.values())
    next_answer = next(a for a in _answers() if "qwen3-next" in str(a["config"]))
    assert tool_groups(next_answer) == [
        (576, 1179648, tuple(range(i, 48, 4))) for i in range(4)]
    v4 = next(a for a in _answers() if "DeepSeek-V4-Flash" in str(a["config"]))
    assert v4["status"] == "ok" and len(v4["layers"]) == 169
    groups = v4["aligned"]["groups"]
    assert len(groups) == 5 and {g["block_size"] for g in groups} == {4, 8, 64, 256}


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
        for record in answer["layers"]:
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
    model reader states the same sentence (AS133); so for the encoder-decoders' refusals
    (the families' config_refusals: Nemotron-Parse, Parse 3.5, Cohere-ASR)."""
    for name in ("qwen2-window-mixed-shape", "falcon-h1-0.5b-shape", "nemotron-parse-odd-heads-shape",
                 "parse-3.5-cross-attention-shape", "cohere-asr-heads-mismatch-shape"):
        answer = next(a for a in _answers() if name in str(a["config"]))
        model = load_model(CONFIGS / "edge" / f"{name}.json")
        assert model.refusals, name
        kind, _, text = model.refusals[0].partition(": ")
        error = str(answer["error"])
        # an AssertionError inside ModelConfig's validation reads "Assertion failed, ..."
        # in pydantic's ValidationError (Cohere-ASR's convertor)
        assert text in error and (kind in error or f"{kind.removesuffix('Error')} failed" in error), name
    windowed = load_model(CONFIGS / "edge" / "qwen2-window-all-shape.json")
    assert windowed.refusals == ()
    assert {layer.sliding_window for layer in windowed.layers} == {None}  # as vLLM builds it


RELEASE_FILES = sorted(p for p in GOLDEN.glob("vllm-*.jsonl.gz") if not p.name.startswith(ENGINE))
"""vLLM's answers for the hybrid configs in the older profiled releases (the same
reference with each release's oracle venv)."""


def _release_answers() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in RELEASE_FILES:
        out.extend(oracle.read_jsonl(path))
    return out


@pytest.mark.parametrize("answer", _release_answers(),
                         ids=lambda a: f"{a['vllm_version']}{'-apc' if a.get('enable_prefix_caching') else ''}"
                                       f"-{Path(str(a['config'])).stem}")
def test_each_release_aligns_hybrids_as_vllm(answer: dict[str, Any]) -> None:
    """The release's own steps (profile ``hybrid_alignment``): before 0.28.0 no prefix
    caching for hybrids by default (Mamba mode none, the Mamba block max_model_len), the
    MLA floor from 0.27.0, the backend LCM from 0.32.0, the GDN prefill checkpoints in
    0.33.0 only; with --enable-prefix-caching before 0.28.0 a model with
    SupportsMambaPrefixCaching gets mode ``all``, aligned to its Mamba chunk size
    (``vllm-0.26.0-prefix-caching``)."""
    assert answer["status"] == "ok", answer.get("error")
    result = next(r for r in agreements_of([answer]))
    assert result.tool_error is None, result.tool_error
    assert result.differences == [], "\n".join(result.differences[:20])
    assert result.group_differences == [], "\n".join(result.group_differences[:20])
    assert result.groups_agreeing == result.groups
    assert result.groups > 0 or _encoder_only(answer)


def test_the_kda_hybrids_align_as_vllm() -> None:
    """Issue 24 item 3 for the KDA hybrids (BailingMoeV3 and KimiLinear beside MLA,
    AliceAI beside attention): vLLM 0.33.0's blocks after update_block_size_for_backend
    on SM90 (no GDN prefill checkpoint: their mixers are not Qwen's
    QwenGatedDeltaNetAttention), and the tool's plan gives the same groups."""
    answers = {Path(str(a["config"])).stem: a for a in _answers() if a["status"] == "ok"}
    blocks = {name: answers[name]["aligned"]["block_size"] for name in (
        "BailingMoeV3ForCausalLM", "KimiLinearForCausalLM", "AliceAIForCausalLM")}
    assert blocks == {"BailingMoeV3ForCausalLM": 512, "KimiLinearForCausalLM": 1920,
                      "AliceAIForCausalLM": 544}
    for name in blocks:
        answer = answers[name]
        want = sorted((g["block_size"], g["page_size_bytes"], tuple(sorted(g["layers"])))
                      for g in answer["aligned"]["groups"])
        assert sorted(tool_groups(answer)) == want, name


def _without_kv_cache() -> list[dict[str, Any]]:
    return [a for path in sorted(GOLDEN.glob("vllm-*.jsonl.gz")) for a in oracle.read_jsonl(path)
            if a["status"] == "ok" and "kv_cache_config" in a]


@pytest.mark.parametrize("answer", _without_kv_cache(),
                         ids=lambda a: f"{a['vllm_version']}-{Path(str(a['config'])).stem}")
def test_a_model_without_a_kv_cache_spec_starts_as_vllm(answer: dict[str, Any], tmp_path: Path) -> None:
    """A model none of whose layers has a KV-cache spec (Terratorch's attention-free
    tower, BERT's encoder-only layers): vLLM profiles no KV memory and its KV-cache config
    holds the null block alone (the reference's ``kv_cache_config``: what
    ``get_kv_cache_configs`` returned for the engine's zero memory); the tool's start-up
    report states the same: 0 KV bytes, that many blocks, no "Available KV cache memory"."""
    from tests.fuzz.test_config_fuzz import run_cli

    recorded = answer["kv_cache_config"]
    assert recorded["kv_cache_tensors"] == 0 and recorded["kv_cache_groups"] == 0
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text(f"device: H200\nmodel: {ROOT / str(answer['config'])}\n"
                          f"engine: vllm=={answer['vllm_version']}\n")
    code, out, err = run_cli(["check", str(deployment), "--format", "json"])
    assert code == 0, err or out
    memory = json.loads(out)["memory"]
    assert memory["no_kv_cache"] and memory["available_kv_bytes"] == 0
    assert memory["kv_cache"]["num_blocks"] == recorded["num_blocks"]
    assert memory["kv_cache"]["bytes_per_block"] == 0
    assert not any("Available KV cache memory" in line for line in memory["log"])
