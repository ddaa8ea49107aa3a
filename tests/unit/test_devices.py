"""The device catalog: the GPUs users name, and the names nvidia-smi prints.

Expected figures are NVIDIA's spec sheets (compute capability from NVIDIA's CUDA GPU
list; memory as sold), not the catalog itself."""

from __future__ import annotations

import pytest

from selector.catalog import load_catalog
from selector.errors import InputError
from tests.fuzz.test_config_fuzz import run_cli

SPEC_SHEETS = {  # name: (compute capability, memory GB)
    "RTX A6000": ("8.6", 48),
    "L20": ("8.9", 48),
    "H800": ("9.0", 80),
    "A800": ("8.0", 80),
    "GH200": ("9.0", 96),
    "H100 NVL": ("9.0", 94),
}


@pytest.mark.parametrize("name", sorted(SPEC_SHEETS))
def test_new_devices_match_nvidias_spec_sheets(name: str) -> None:
    device = load_catalog().device(name)
    assert (device.capability, device.memory_gib) == SPEC_SHEETS[name]


@pytest.mark.parametrize(("smi_name", "device"), [
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H100 PCIe", "H100-PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
    ("NVIDIA A800-SXM4-80GB", "A800"),
    ("Tesla V100-SXM2-32GB", "V100"),
    ("Tesla T4", "T4"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA RTX A6000", "RTX A6000"),
    ("NVIDIA L20", "L20"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA H800", "H800"),
    ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000"),
])
def test_nvidia_smi_names(smi_name: str, device: str) -> None:
    assert load_catalog().device(smi_name).name == device


@pytest.mark.parametrize("name", ["RTX 6000", "H1000", "A6", "NVIDIA"])
def test_only_whole_words_match(name: str) -> None:
    with pytest.raises(InputError):
        load_catalog().device(name)


def test_an_nvidia_smi_name_on_the_command_line() -> None:
    code, out, err = run_cli(["check", "--device", "NVIDIA H100 NVL", "--format", "github", "--",
                              "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"])
    assert code == 0, err
    assert "on H100 NVL" in out
