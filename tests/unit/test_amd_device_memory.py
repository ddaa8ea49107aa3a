"""MI300X's total memory is the one ROCm reports (schemas/device-memory.yaml), not the nominal 192."""

from __future__ import annotations

import json

from selector.memory.startup import device_total_memory
from tests.unit.test_device_memory import run_cli


def test_mi300x_uses_reported_bytes() -> None:
    total = device_total_memory("MI300X", 192.0, "HIP")
    assert total is not None
    assert total[0] == int(191.98 * 2**30)
    assert "as HIP reports it" in total[1] and "legacy-rocm-build/issues/4750" in total[1]


def test_amd_device_without_public_figure_stays_nominal() -> None:
    total = device_total_memory("MI355X", 288.0, "HIP")
    assert total is not None and "nominal" in total[1]


def test_mi300x_check_states_the_reported_figure_and_source() -> None:
    code, out, _ = run_cli(["check", "--device", "MI300X", "--format", "json", "--", "vllm",
                            "serve", "meta-llama/Llama-3.1-8B-Instruct"])
    assert code in (0, 1)
    text = json.dumps(json.loads(out))
    assert "191.98 GiB as HIP reports it" in text and "nominal" not in text.split("191.98")[0][-80:]
