"""One memory basis per device: ``schemas/device-memory.yaml`` gives the total CUDA
reports where a public vLLM log names it, each device keeps its own figure, a device
without one uses its nominal catalog figure and the report says which; the verdict
depends on the memory, not on the device's name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.memory.budget import memory_budget
from selector.memory.profile import startup_profile
from selector.memory.startup import device_total_memory, raw_config
from selector.memory.weights import estimate_weights
from selector.models import load_model
from selector.models.presets import preset_dir
from tests.fuzz.test_config_fuzz import run_cli

GIB = 1024**3
ROOT = Path(__file__).resolve().parents[2]
TABLE = preset_dir().parent / "device-memory.yaml"


def test_every_figure_names_a_catalog_device_and_a_public_log() -> None:
    names = {device.name for device in load_catalog().devices}
    rows = yaml.safe_load(TABLE.read_text(encoding="utf-8"))["devices"]
    for name, row in rows.items():
        assert name in names, name
        source = str(row["source"])
        if source.startswith("tests/golden/vllm_startups/logs/"):
            # a start-up this project recorded on the GPU: the log holds vLLM's own figure
            log = ROOT / source.split(" ", 1)[0]
            assert f"total_memory={row['total_gib']:g}GiB" in log.read_text(encoding="utf-8"), name
        else:
            # a public vLLM log, or (AMD) public rocm-smi / rocminfo output in a ROCm thread
            assert source.startswith(("https://github.com/vllm-project/vllm/",
                                      "https://github.com/ROCm/")), name
        nominal = next(d.memory_gib for d in load_catalog().devices if d.name == name)
        # CUDA reports less: HBM cards ~1 % under their GiB, GDDR cards are sold in GB
        # (L40S: 48 GB = 44.7 GiB; CUDA reports 44.31)
        assert 0.9 * nominal < row["total_gib"] < nominal, name


def test_h100_variants_and_h800_have_their_own_basis() -> None:
    """H100 SXM's figure is CUDA's; H100 PCIe, H100 NVL and H800 have no public log that
    names them, so each uses its own nominal figure and says so (none borrows H100's)."""
    devices = {d.name: d for d in load_catalog().devices}
    h100 = device_total_memory("H100", devices["H100"].memory_gib)
    assert h100 is not None and "as CUDA reports it" in h100[1]
    for name in ("H100-PCIe", "H100 NVL", "H800"):
        found = device_total_memory(name, devices[name].memory_gib)
        assert found is not None
        assert found[0] == int(devices[name].memory_gib * GIB)
        assert "nominal" in found[1], name


def test_the_report_says_which_basis_it_used() -> None:
    for device, words in (("H100", "as CUDA reports it"), ("H800", "nominal figure")):
        code, out, _ = run_cli(["check", "--device", device, "--format", "json", "--", "vllm",
                                "serve", "openai/gpt-oss-120b"])
        assert code in (0, 1)
        assert words in json.dumps(json.loads(out)), device


@settings(max_examples=25, deadline=None)
@given(total_gib=st.floats(min_value=60, max_value=100))
def test_gpt_oss_120b_gets_one_verdict_on_h100_and_h800_for_one_memory(total_gib: float) -> None:
    """With the same reported memory the budget, the KV memory and the start-up verdict
    of gpt-oss-120b are the same on an H100 and an H800 (same capability 9.0)."""
    catalog = load_catalog()
    profile = startup_profile(catalog)
    model = load_model("gpt-oss-120b")
    raw = raw_config(model)
    weights = estimate_weights(raw, layer_kinds=tuple(layer.kind for layer in model.layers), tp=1,
                               dtype_bytes=2, cc=90, profile=profile)
    budgets = [memory_budget(raw, weights, profile, device=device,
                             total_memory_bytes=int(total_gib * GIB), total_memory_source="x",
                             gpu_memory_utilization=0.92, num_layers=len(model.layers),
                             dtype_bytes=2, cudagraphs=True, max_num_batched_tokens=2048,
                             max_num_seqs=256)
               for device in ("H100", "H800")]
    assert budgets[0].available_kv_bytes == budgets[1].available_kv_bytes
    assert [line.bytes for line in budgets[0].lines] == [line.bytes for line in budgets[1].lines]


def test_l40s_uses_the_memory_cuda_reports(tmp_path: Path) -> None:
    devices = {d.name: d for d in load_catalog().devices}
    found = device_total_memory("L40S", devices["L40S"].memory_gib)
    assert found is not None and found[0] == int(44.31 * GIB)
    assert "vllm-project/vllm/issues/15196" in found[1]


@pytest.mark.parametrize("device", ["H100-PCIe", "H100 NVL", "H800"])
def test_a_device_without_a_log_is_labelled_nominal(device: str) -> None:
    code, out, _ = run_cli(["check", "--device", device, "--format", "json", "--", "vllm",
                            "serve", "meta-llama/Llama-3.1-8B-Instruct"])
    assert code in (0, 1)
    assert "the catalog's nominal figure" in json.dumps(json.loads(out))


def test_the_h200_uses_vllms_own_figure_from_a_recorded_startup() -> None:
    """vLLM 0.25.1 logged total_memory=139.8GiB on this project's H200 start-ups
    (tests/golden/vllm_startups/logs): the H200's basis is that figure, not 141."""
    devices = {d.name: d for d in load_catalog().devices}
    found = device_total_memory("H200", devices["H200"].memory_gib)
    assert found is not None and found[0] == int(139.8 * GIB)
    assert "as CUDA reports it" in found[1] and "vllm_startups/logs" in found[1]


@pytest.mark.parametrize("device", ["MI325X", "MI355X"])
def test_an_amd_device_is_nominal_in_hips_words(device: str) -> None:
    """No public figure was found for these AMD GPUs' totals (MI300X has one:
    test_amd_device_memory.py): the basis is the catalog's nominal figure, said in the ROCm
    runtime's name (schemas/platforms.yaml, rocm: runtime)."""
    rows = yaml.safe_load(TABLE.read_text(encoding="utf-8"))["devices"]
    assert device not in rows
    code, out, _ = run_cli(["check", "--device", device, "--format", "json", "--", "vllm",
                            "serve", "meta-llama/Llama-3.1-8B-Instruct"])
    assert code in (0, 1)
    text = json.dumps(json.loads(out))
    assert "the catalog's nominal figure (HIP reports a little less)" in text
    assert "CUDA reports" not in text
