"""A bench run's files: the raw samples (``bench.json``, reusable by ``check
--measurements``) and the plot (``bench.svg``)."""

from __future__ import annotations

from pathlib import Path

from selector.bench.measurements import Measurements
from selector.bench.plot import render_svg
from selector.errors import InputError

__all__ = ["write_outputs"]


def write_outputs(measurements: Measurements, output: Path) -> dict[str, str]:
    """Write ``bench.json`` and ``bench.svg`` into ``output``; returns their paths by role."""
    try:
        output.mkdir(parents=True, exist_ok=True)
        data_path = output / "bench.json"
        plot_path = output / "bench.svg"
        data_path.write_text(measurements.dumps(), encoding="utf-8")
        plot_path.write_text(render_svg(measurements), encoding="utf-8")
    except OSError as error:
        raise InputError(f"cannot write the results: {error}", file=str(output),
                         field="--output") from None
    return {"measurements": str(data_path), "plot": str(plot_path)}
