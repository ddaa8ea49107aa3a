"""``bench`` on model deployments answers as ``check`` and ``smoke`` do: a hybrid model's
attention layers are timed (its Mamba / GDN state layers have no attention backend), and a
tensor-parallel size vLLM refuses is an invalid deployment (exit 1) in vLLM's words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError, InvalidDeploymentError
from selector.pipeline.bench import bench_targets
from tests.fuzz.test_config_fuzz import run_cli

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "tests" / "fixtures" / "models"
SCHEMAS = REPO / "schemas" / "models"


def _preset(name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((SCHEMAS / f"{name}.json").read_text(encoding="utf-8"))
    return config


def _jamba_attention(config: dict[str, Any]) -> list[int]:
    # vllm/model_executor/models/jamba.py (JambaForCausalLM): layer i is attention when
    # i % attn_layer_period == attn_layer_offset, Mamba otherwise
    return [i for i in range(config["num_hidden_layers"])
            if i % config["attn_layer_period"] == config["attn_layer_offset"]]


def _qwen3_next_attention(config: dict[str, Any]) -> list[int]:
    # transformers Qwen3NextConfig.layer_types (read by vllm/model_executor/models/
    # qwen3_next.py): "linear_attention" if (i + 1) % full_attention_interval else
    # "full_attention"
    return [i for i in range(config["num_hidden_layers"])
            if (i + 1) % config["full_attention_interval"] == 0]


HYBRIDS = [("jamba-v0.1", _jamba_attention), ("qwen3-next-80b-a3b", _qwen3_next_attention)]


def _layers(name: str) -> list[int]:
    return [int(part) for part in name.split(" layers ")[1].split(",")]


@pytest.mark.parametrize(("preset", "attention_layers"), HYBRIDS, ids=[h[0] for h in HYBRIDS])
@pytest.mark.parametrize("device", ["h100", "b200"])
def test_a_hybrid_model_benches_its_attention_layers(preset: str, attention_layers: Any,
                                                     device: str) -> None:
    # the Mamba-1 / GDN state groups once reached the attention lookup: KeyError, exit 70
    config = _preset(preset)
    targets = bench_targets(MODELS / f"{preset}@{device}.yaml", catalog=load_catalog())
    timed = sorted(layer for group in targets.groups for layer in _layers(group.name))
    assert timed == attention_layers(config)
    assert sum(group.layers for group in targets.groups) == len(timed)
    tp = 4  # the fixtures' tensor_parallel_size
    # vllm/config/model.py get_num_attention_heads / get_num_kv_heads: heads // tp, the KV
    # heads at least 1 (replicated when tp exceeds them)
    heads = (config["num_attention_heads"] // tp,
             max(1, config["num_key_value_heads"] // tp),
             config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])
    for plan in targets.plans:
        assert plan.backend in ("FLASH_ATTN", "FLASHINFER")
        assert (plan.num_q_heads, plan.num_kv_heads, plan.head_size) == heads


def test_bench_and_smoke_of_a_hybrid_model_agree_on_its_attention_groups() -> None:
    code, out, err = run_cli(["smoke", "--dry-run", "--format", "json",
                              str(MODELS / "jamba-v0.1@h100.yaml")])
    assert code == 0, err
    smoked = {(entry["plan"]["backend"], entry["plan"]["name"])
              for entry in json.loads(out)["plans"]}
    benched = {(plan.backend, plan.name) for plan in
               bench_targets(MODELS / "jamba-v0.1@h100.yaml", catalog=load_catalog()).plans}
    assert smoked <= benched and smoked


def _tiny_workload(tmp_path: Path) -> Path:
    workload = tmp_path / "tiny.yaml"
    workload.write_text("decode: {batch_sizes: [2], context_lengths: [40]}\n"
                        "prefill: {lengths: [24]}\n"
                        "settings: {min_repeats: 3, max_repeats: 3, warmup: 1, "
                        "builder_repeats: 1}\n", encoding="utf-8")
    return workload


@pytest.mark.parametrize("preset", [h[0] for h in HYBRIDS])
def test_cli_bench_of_a_hybrid_model_runs_on_the_cpu_stand_ins(
        preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from cpu_env import cpu_environment

    import selector.bench.runner

    monkeypatch.setattr(selector.bench.runner, "device_environment",
                        lambda plans, notify, catalog, device=None: cpu_environment())
    code, out, err = run_cli(["bench", str(MODELS / f"{preset}@h100.yaml"), "--format", "json",
                              "--workload", str(_tiny_workload(tmp_path)),
                              "--output", str(tmp_path / "out")])
    assert code == 0, err
    document = json.loads(out)
    assert document["passed"] is True
    assert {row["backend"] for row in document["rows"]} == {"FLASH_ATTN", "FLASHINFER"}
    assert document["decision"]["chosen"] == "FLASH_ATTN"  # vLLM's choice (priority policy)
    saved = json.loads((tmp_path / "out" / "bench.json").read_text(encoding="utf-8"))
    assert [_layers(g["name"]) for g in saved["deployment"]["groups"]] == [
        dict(HYBRIDS)[preset](_preset(preset))]


def _split_heads(tmp_path: Path) -> Path:
    path = tmp_path / "llama-tp3.yaml"
    path.write_text("device: H100\nmodel: llama-3.1-8b\nparallel: {tensor_parallel_size: 3}\n",
                    encoding="utf-8")
    return path


def test_bench_of_heads_tp_cannot_split_is_invalid_as_check_says(tmp_path: Path) -> None:
    # 32 heads over TP 3: vLLM refuses at start-up (vllm/config/model.py, SU003); bench
    # once exited 2 (bad input) where check and smoke exit 1
    path = _split_heads(tmp_path)
    code, out, _ = run_cli(["check", str(path), "--format", "json"])
    assert code == 1
    refusal = next(f for f in json.loads(out)["findings"] if f["code"] == "SU003")
    assert refusal["message"] == ("Total number of attention heads (32) must be divisible by "
                                  "tensor parallel size (3).")
    said = f"[SU003] {refusal['message'].rstrip('.')}; `attn-select check {path}` says more"
    for argv in (["bench", str(path), "--output", str(tmp_path / "out")],
                 ["smoke", str(path)], ["smoke", str(path), "--dry-run"]):
        code, _, err = run_cli(argv)
        assert code == 1, (argv, err)
        assert f"{path}: vLLM would reject this deployment: {said}" in err, (argv, err)
        assert "Traceback" not in err
    with pytest.raises(InvalidDeploymentError):
        bench_targets(path, catalog=load_catalog())


def test_a_model_without_attention_layers_names_why_nothing_runs(tmp_path: Path) -> None:
    # Jamba cut to 4 layers: attention sits at layer 4 (attn_layer_offset), so every layer
    # is Mamba; check finds it valid, and there is no attention kernel to time or smoke
    config = _preset("jamba-v0.1")
    config["num_hidden_layers"] = 4
    assert _jamba_attention(config) == []
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    path = tmp_path / "mamba-only.yaml"
    path.write_text("device: H100\nmodel: ./config.json\n", encoding="utf-8")
    assert run_cli(["check", str(path)])[0] == 0
    for command in ("bench", "smoke"):
        code, _, err = run_cli([command, str(path)])
        assert code == 2, err
        assert f"{path}: the model has no attention layer (its layers are mamba)" in err
        assert f"`{command}` has no attention kernel to run" in err
    with pytest.raises(InputError):
        bench_targets(path, catalog=load_catalog())

