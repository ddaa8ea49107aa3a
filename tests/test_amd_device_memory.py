"""MI300X's total memory is the one ROCm reports (schemas/device-memory.yaml), not the nominal 192."""
from selector.memory.startup import device_total_memory


def test_mi300x_uses_reported_bytes() -> None:
    total = device_total_memory("MI300X", 192.0, "HIP")
    assert total is not None
    assert total[0] == int(191.98 * 2**30)
    assert "as HIP reports it" in total[1] and "legacy-rocm-build/issues/4750" in total[1]


def test_amd_device_without_public_figure_stays_nominal() -> None:
    total = device_total_memory("MI355X", 288.0, "HIP")
    assert total is not None and "nominal" in total[1]
