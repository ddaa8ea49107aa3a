"""Text rendering of bench results (rich renderables; the CLI prints them)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from selector.bench.measurements import BenchResult, Measurements
from selector.bench.policy import PolicyDecision
from selector.report.plain import PlainTable

__all__ = ["render_bench", "render_decision", "result_row"]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def result_row(result: BenchResult, measurements: Measurements) -> dict[str, Any]:
    """One row of the results table as plain values (also used by the JSON output)."""
    summary = result.summary
    achieved = result.achieved(measurements.ceilings) if result.ok else None
    builder = result.builder_summary
    kind = str(result.shape.get("kind", ""))
    row: dict[str, Any] = {
        "group": result.group, "shape": result.shape_name, "kind": kind,
        "backend": result.backend, "implementation": result.implementation,
        "mode": result.timing_mode, "ok": result.ok,
        "median_us": summary.median if summary else None,
        "rel_iqr": summary.rel_iqr if summary else None,
        "rel_ci": summary.rel_ci if summary else None,
        "repeats": summary.n if summary else 0,
        "outliers": len(summary.outliers) if summary else 0,
        "noise": summary.noise if summary else None,
        "builder_us": builder.median if builder else None,
        "error": result.error,
        "check_max_abs": result.check.max_abs if result.check else None,
    }
    if achieved is not None:
        row.update(achieved.to_json())
    return row


def _rate(row: dict[str, Any]) -> tuple[str, str]:
    if row.get("tbps") is None:
        return "-", "-"
    if row["kind"] == "decode":
        return f"{row['kv_tbps']:.2f} TB/s", _pct(row.get("kv_fraction_of_bandwidth"))
    return f"{row['tflops']:.0f} TFLOP/s", _pct(row.get("fraction_of_compute"))


def render_bench(measurements: Measurements) -> Group:
    """Ceilings, then one row per group, shape and backend."""
    ceilings = measurements.ceilings
    device = measurements.device
    peaks = PlainTable(title=f"Ceilings on {device.name} (sm {device.capability})", title_justify="left")
    for column in ("ceiling", "measured", "spread (IQR)", "catalog", "measured / catalog"):
        peaks.add_column(column)
    for label, peak, catalog in (("copy bandwidth", measurements.copy_peak, ceilings.catalog_tbps),
                                 ("bf16 matmul", measurements.matmul_peak,
                                  ceilings.catalog_tflops)):
        if peak is None:
            peaks.add_row(label, "not measured", "-", f"{catalog:g}" if catalog else "-", "-")
            continue
        unit = peak.unit
        value = peak.value
        peaks.add_row(label, f"{value:.2f} {unit}" if unit == "TB/s" else f"{value:.0f} {unit}",
                      f"{peak.summary.rel_iqr:.1%}", f"{catalog:g} {unit}" if catalog else "-",
                      _pct(value / catalog) if catalog else "-")
    many_groups = len(measurements.deployment.groups) > 1
    table = PlainTable(title="Kernel time per shape (CUDA events; L2 flushed between repeats)",
                  title_justify="left")
    columns = (["group"] if many_groups else []) + [
        "shape", "backend", "mode", "median", "IQR", "n", "achieved", "of peak",
        "of roofline", "builder (CPU)", "check"]
    for column in columns:
        table.add_column(column, justify="right" if column in (
            "median", "IQR", "n", "achieved", "of peak", "of roofline", "builder (CPU)") else "left")
    for result in measurements.results:
        row = result_row(result, measurements)
        rate, of_peak = _rate(row)
        check: str | Text
        if result.ok:
            check = "ok"
        elif result.error:
            check = Text(f"error: {result.error}"[:60], style="red")
        else:
            check = Text("mismatch", style="red")
        median = row["median_us"]
        cells: list[Any] = ([result.group] if many_groups else []) + [
            row["shape"], result.backend, row["mode"],
            "-" if median is None else f"{median:.1f} us",
            "-" if row["rel_iqr"] is None else f"\u00b1{row['rel_iqr'] / 2:.1%}",
            str(row["repeats"]), rate, of_peak, _pct(row.get("fraction_of_roofline")),
            "-" if row["builder_us"] is None else f"{row['builder_us'] / 1000:.2f} ms",
            check]
        table.add_row(*cells)
    parts: list[Any] = [peaks, table]
    unmeasured = [(g.name, backend, why) for g in measurements.deployment.groups
                  for backend, why in g.unmeasured.items()]
    if unmeasured:
        skipped = PlainTable(title="Valid backends not measured", title_justify="left")
        for column in ("group", "backend", "why"):
            skipped.add_column(column)
        for name, backend, why in unmeasured:
            skipped.add_row(name, backend, why)
        parts.append(skipped)
    implementations = sorted({f"{r.backend}: {r.implementation}" for r in measurements.results
                              if r.implementation})
    notes = [*implementations, *measurements.device.notes, *measurements.notes]
    notes += sorted({n for r in measurements.results for n in r.notes
                     if not n.startswith("host enqueue")})
    if notes:
        parts.append(Text("\n".join(f"note: {n}" for n in notes)))
    return Group(*parts)


def render_decision(decision: PolicyDecision, *, title: str = "Policy") -> Group:
    """The policy's choice, the flag that pins it, and each backend's total."""
    parts: list[Any] = []
    style = "bold green" if decision.applicable and decision.chosen else "bold yellow"
    parts.append(Text(f"{title} ({decision.policy}): {decision.summary()}", style=style))
    if decision.scores:
        table = PlainTable(title=f"Workload total over {len(decision.shapes)} shape(s)",
                      title_justify="left")
        for column in ("backend", "total", "\u00b1", "vs fastest", ""):
            table.add_column(column, justify="left" if column in ("backend", "") else "right")
        best = decision.scores[0].total_us
        for score in decision.scores:
            marks = []
            if score.backend == decision.current:
                marks.append("vLLM's choice")
            if score.backend == decision.chosen:
                marks.append("chosen")
            table.add_row(score.backend, f"{score.total_us:.1f} us",
                          f"{score.uncertainty_us:.1f} us", f"{score.total_us / best:.2f}x",
                          ", ".join(marks))
        parts.append(table)
    if decision.chosen:
        parts.append(Text(f"pin it: vllm serve ... {' '.join(decision.flags)}"))
    for backend, why in decision.excluded.items():
        parts.append(Text(f"not compared: {backend}: {why}"))
    for note in decision.notes:
        parts.append(Text(f"note: {note}"))
    return Group(*parts)
