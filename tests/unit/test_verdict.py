"""The check result knows its complete verdict: vLLM's refusal of the architecture (AS131,
AS133) and of the CUDA-graph mode make the result itself invalid, and ``check``'s record,
the JSON document, the public API and ``solve_to_run`` (smoke, bench) all read that one
verdict; ``check --measurements`` puts the policy into the JSON documents it renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.checkrun import CheckOptions
from selector.errors import InvalidDeploymentError
from selector.inputs.config import load_deployment
from selector.pipeline import record_of, solve_to_run
from selector.pipeline.deployment import solve_deployment
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
LLAMA = json.loads((ROOT / "schemas" / "models" / "llama-3.1-8b.json").read_text())


def _deployment(tmp_path: Path, architecture: str) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(dict(LLAMA, architectures=[architecture])))
    path = tmp_path / "deploy.yaml"
    path.write_text("device: H100\nmodel: ./config.json\n")
    return path


def test_a_refused_architecture_makes_the_result_invalid(tmp_path: Path) -> None:
    path = _deployment(tmp_path, "TotallyMadeUpForCausalLM")
    catalog = load_catalog()
    solved = solve_deployment(load_deployment(str(path)), catalog)
    assert solved.model is not None
    assert [n.code for n in solved.model.architecture] == ["AS131"]
    # every layer is selected and the KV plan holds: only the architecture refuses it
    assert all(s.result.valid for s in solved.model.selections)
    assert not solved.model.valid and not solved.valid
    record = record_of(solved, catalog, _options())
    assert record.status == "invalid" and not record.valid and record.failed
    with pytest.raises(InvalidDeploymentError, match=r"\[AS131\] vllm==.* refuses the model"):
        solve_to_run(load_deployment(str(path)), catalog, "smoke")
    code, out, _ = run_cli(["check", str(path), "--format", "json"])
    assert code == 1 and json.loads(out)["valid"] is False


def test_a_supported_architecture_stays_valid(tmp_path: Path) -> None:
    path = _deployment(tmp_path, "LlamaForCausalLM")
    solved = solve_deployment(load_deployment(str(path)), load_catalog())
    assert solved.model is not None and solved.model.architecture == ()
    assert solved.valid
    code, out, _ = run_cli(["check", str(path), "--format", "json"])
    assert code == 0 and json.loads(out)["valid"] is True


def test_a_cudagraph_refusal_is_the_layer_results_verdict(tmp_path: Path) -> None:
    """FULL CUDA graphs with a backend that supports none (CPU_ATTN): vLLM raises, and the solved
    deployment says so itself (not only check's record)."""
    path = tmp_path / "deploy.yaml"
    path.write_text("engine: vllm==0.25.1\ndevice: H100\nattention_backend: CPU_ATTN\n"
                    "cudagraph_mode: FULL\n"
                    "layer: {num_heads: 32, num_kv_heads: 8, head_size: 128}\n")
    catalog = load_catalog()
    solved = solve_deployment(load_deployment(str(path)), catalog)
    assert solved.layer is not None and solved.layer.runtime is not None
    assert solved.layer.runtime.cudagraph_mode == "ERROR"
    assert solved.layer.valid and not solved.valid
    assert record_of(solved, catalog, _options()).status == "invalid"


def _options() -> CheckOptions:
    return CheckOptions()


def test_the_solver_evaluates_the_catalog_it_is_given(schemas: Path) -> None:
    """``solve(catalog=...)`` compiles that catalog's profile, not the shipped one (the
    compiled evaluator used to be looked up in the shipped catalog whatever was given)."""
    import yaml

    from selector.catalog import _load_catalog_files
    from selector.solver import solve

    shipped = load_catalog()
    name = shipped.default_engine
    facts = {"cc": 90, "head_size": 128, "dtype": "bfloat16"}
    assert solve(facts, engine=name, catalog=shipped).selected == "FLASH_ATTN"
    catalog = _load_catalog_files(schemas)
    path = catalog.engine_dirs[name] / "platforms" / "cuda.yaml"
    if not path.is_file():  # the release inherits its platform file: state a change
        path.parent.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump({"engine": name, "platform": "cuda"}))
    document = yaml.safe_load(path.read_text())
    document["priorities"] = [*document.get("priorities", []), {
        "id": "default", "order": ["TRITON_ATTN", "FLASH_ATTN", "FLASHINFER"]}]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    catalog = _load_catalog_files(schemas)
    assert catalog.engine(name).profile.priorities[-1].order[0] == "TRITON_ATTN"
    result = solve(facts, engine=name, catalog=catalog)
    assert result.selected == "TRITON_ATTN" and result.platform == "cuda"
    assert solve(facts, engine=name, catalog=shipped).selected == "FLASH_ATTN"
