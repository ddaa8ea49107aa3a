"""The layer rules the text-generation families of vLLM 0.33.0 added (families.yaml):
the interval rule's trailing layers (BailingMoeV3), a 1-based index list of state layers
(KimiLinear), a family's own layer_types values (Dory), per-layer head sizes and windows
(DomynEdge) and a looped stack (IQuest-LoopCoder). vLLM's answers for the same configs
are compared layer by layer in tests/golden/test_vllm_model_agreement.py; these pin the
rules on the configs themselves."""

from __future__ import annotations

from pathlib import Path

from selector.models import load_model

SYNTHETIC = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "synthetic"


def _kinds(name: str) -> list[str]:
    return [layer.kind for layer in load_model(SYNTHETIC / f"{name}.json").layers]


def test_bailing_moe_v3_attends_every_group_end_and_the_tail() -> None:
    # layer_group_size 6 over 8 layers: MLA at 5 (group end) and 6, 7 (after the last group)
    assert _kinds("BailingMoeV3ForCausalLM") == ["gdn"] * 5 + ["mla"] * 3


def test_kimi_linear_kda_layers_are_one_based() -> None:
    # kda_layers [1, 2, 3, 5, 6, 7]: layers 3 and 7 (0-based) are MLA
    assert _kinds("KimiLinearForCausalLM") == ["gdn"] * 3 + ["mla"] + ["gdn"] * 3 + ["mla"]


def test_dory_mlp_layers_have_no_cache() -> None:
    assert _kinds("DoryForCausalLM") == ["attention", "none", "attention", "none"]


def test_domyn_edge_per_layer_head_sizes_and_windows() -> None:
    layers = load_model(SYNTHETIC / "DomynEdgeForCausalLM.json").layers
    assert [layer.head_size for layer in layers] == [64, 128, 64, 128]
    assert [layer.sliding_window for layer in layers] == [513, None, 513, None]


def test_iquest_loopcoder_loops_add_sliding_caches() -> None:
    layers = load_model(SYNTHETIC / "IQuestLoopCoderForCausalLM.json").layers
    assert [layer.index for layer in layers] == list(range(8))
    assert [layer.sliding_window for layer in layers] == [None] * 4 + [64] * 4
