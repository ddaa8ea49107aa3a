"""LFM2's ShortConv layers (``layer_types`` 'conv', or every layer not in
``full_attn_idxs``) are state-only layers: one conv state of
``(conv_L_cache - 1, conv_dim / TP)`` in the model dtype, wired to SHORT_CONV_ATTN.
vLLM's answers: tests/golden/vllm_models (``lfm2-1.2b-shape``, ``lfm2-vl-1.6b-shape``:
layers and groups compared in tests/golden/test_vllm_model_agreement.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from selector.kv.ssm_state import ssm_state_shapes
from selector.models import load_model
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
EDGE = ROOT / "tests" / "fixtures" / "hf_configs" / "edge"
GOLDEN = ROOT / "tests" / "golden" / "vllm_models" / "vllm-0.33.0.jsonl.gz"


def _answer(name: str) -> dict[str, object]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as handle:
        return next(a for line in handle if name in (a := json.loads(line))["config"])


def test_the_conv_state_is_vllms() -> None:
    answer = _answer("lfm2-1.2b-shape")
    record = next(r for r in answer["layers"] if r.get("spec") == "MambaSpec")  # type: ignore[attr-defined]
    model = load_model(EDGE / "lfm2-1.2b-shape.json")
    state = model.state_layers[0].ssm
    assert state is not None and state.ssm_type == "short_conv"
    assert [list(s) for s in ssm_state_shapes(state, 1)] == record["shapes"] == [[2, 2048]]
    assert record["backend"] == "SHORT_CONV_ATTN"
    assert [list(s) for s in ssm_state_shapes(state, 2)] == [[2, 1024]]


def test_full_attn_idxs_and_layer_types_pick_the_same_layers() -> None:
    by_index = load_model(EDGE / "lfm2-1.2b-shape.json")
    by_types = load_model(EDGE / "lfm2-vl-1.6b-shape.json")
    attention = [layer.index for layer in by_index.layers if layer.is_attention]
    assert attention == [2, 5, 8, 10, 12, 14]
    assert [layer.kind for layer in by_types.layers] == [layer.kind for layer in by_index.layers]


def test_no_index_list_means_every_layer_attends(tmp_path: Path) -> None:
    raw = json.loads((EDGE / "lfm2-1.2b-shape.json").read_text())
    del raw["full_attn_idxs"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    model = load_model(tmp_path / "config.json")
    assert all(layer.is_attention for layer in model.layers) and not model.is_hybrid


def test_check_plans_the_short_conv_groups(tmp_path: Path) -> None:
    deployment = tmp_path / "lfm2.yaml"
    deployment.write_text(f"model: {EDGE / 'lfm2-1.2b-shape.json'}\ndevice: H200\n")
    code, out, err = run_cli(["check", str(deployment), "-f", "json"])
    assert code == 0, err
    assert '"SHORT_CONV_ATTN"' in out
