"""The bench plot as a dependency-free SVG (pure Python; deterministic for golden tests).

Top panel: kernel time per shape and backend on a log axis -- the median as a dot, the
inter-quartile range as a bar through it -- and the roofline floor (the time at the
card's measured copy bandwidth / matmul peak) as a dashed segment per shape.
Bottom panel: each backend's fraction of that floor (100% = at the hardware limit).
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

from selector.bench.measurements import BenchResult, Measurements

__all__ = ["COLORS", "render_svg"]

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
WIDTH, HEIGHT = 960, 620
LEFT, RIGHT = 80, 24
TOP_Y, TOP_H = 64, 300
BOTTOM_Y, BOTTOM_H = 396, 110
LABEL_Y = BOTTOM_Y + BOTTOM_H + 14


def _f(value: float) -> str:
    return f"{value:.1f}"


def _text(x: float, y: float, content: str, *, size: int = 11, anchor: str = "start",
          extra: str = "") -> str:
    return (f'<text x="{_f(x)}" y="{_f(y)}" font-size="{size}" text-anchor="{anchor}"'
            f'{extra}>{escape(content)}</text>')


def _time_label(us: float) -> str:
    if us >= 1000:
        return f"{us / 1000:g} ms"
    return f"{us:g} us"


def _category(result: BenchResult, many_groups: bool) -> str:
    return f"{result.group}: {result.shape_name}" if many_groups else result.shape_name


def render_svg(measurements: Measurements) -> str:
    """The plot of ``measurements`` as an SVG document."""
    results = measurements.results
    ceilings = measurements.ceilings
    many_groups = len({r.group for r in results}) > 1
    categories = list(dict.fromkeys(_category(r, many_groups) for r in results))
    backends = measurements.backends()
    width_plot = WIDTH - LEFT - RIGHT
    band = width_plot / max(len(categories), 1)
    times: list[float] = []
    floors: dict[str, float] = {}
    for result in results:
        summary = result.summary
        if summary is not None and summary.median > 0:
            times.extend([summary.q1, summary.q3, summary.median])
        floor = ceilings.floor_us(result.work_model())
        if floor:
            floors.setdefault(_category(result, many_groups), floor)
            times.append(floor)
    positive = [t for t in times if t > 0]
    low = 10 ** math.floor(math.log10(min(positive))) if positive else 1.0
    high = 10 ** math.ceil(math.log10(max(positive))) if positive else 1000.0
    if high <= low:
        high = low * 10
    span = math.log10(high) - math.log10(low)

    def y_of(us: float) -> float:
        value = min(max(us, low), high)
        return TOP_Y + TOP_H - (math.log10(value) - math.log10(low)) / span * TOP_H

    def x_of(category: int, backend: int) -> float:
        offset = (backend - (len(backends) - 1) / 2) * min(band * 0.22, 18)
        return LEFT + (category + 0.5) * band + offset

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Arial, sans-serif">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    device = measurements.device.name
    title = f"attn-select bench: {measurements.deployment.source} on {device}"
    out.append(_text(LEFT, 22, title, size=14, extra=' font-weight="bold"'))
    bandwidth = ceilings.bandwidth_tbps
    compute = ceilings.compute_tflops
    roof = (f"roofline floor at {ceilings.source} peaks: "
            f"{bandwidth:.2f} TB/s copy, {compute:.0f} TFLOP/s bf16"
            if bandwidth and compute else "roofline: no ceilings measured")
    catalog = ""
    if ceilings.catalog_tbps and ceilings.catalog_tflops:
        catalog = (f" (catalog {measurements.device.catalog_name}: {ceilings.catalog_tbps:g} TB/s, "
                   f"{ceilings.catalog_tflops:g} TFLOP/s)")
    out.append(_text(LEFT, 40, roof + catalog, size=11))
    # top panel: axes, decade grid
    out.append('<g class="time-panel">')
    out.append(f'<rect x="{LEFT}" y="{TOP_Y}" width="{_f(width_plot)}" height="{TOP_H}" '
               f'fill="none" stroke="#333"/>')
    decade = low
    while decade <= high * 1.0001:
        for multiple in (1, 2, 5):
            value = decade * multiple
            if value > high * 1.0001:
                break
            y = y_of(value)
            stroke = "#bbb" if multiple == 1 else "#e4e4e4"
            out.append(f'<line class="grid" x1="{LEFT}" y1="{_f(y)}" x2="{_f(LEFT + width_plot)}"'
                       f' y2="{_f(y)}" stroke="{stroke}"/>')
            if multiple == 1:
                out.append(_text(LEFT - 6, y + 4, _time_label(value), size=10, anchor="end"))
        decade *= 10
    out.append(_text(18, TOP_Y + TOP_H / 2, "kernel time (median, IQR)", size=11,
                     anchor="middle",
                     extra=f' transform="rotate(-90 18 {_f(TOP_Y + TOP_H / 2)})"'))
    for index, category in enumerate(categories):
        floor = floors.get(category)
        if floor is None:
            continue
        center = LEFT + (index + 0.5) * band
        y = y_of(floor)
        out.append(f'<line class="roofline" x1="{_f(center - band * 0.42)}" y1="{_f(y)}" '
                   f'x2="{_f(center + band * 0.42)}" y2="{_f(y)}" stroke="black" '
                   f'stroke-width="1.5" stroke-dasharray="5,3"><title>{escape(category)}: floor '
                   f'{floor:.1f} us</title></line>')
    for result in results:
        column = categories.index(_category(result, many_groups))
        row = backends.index(result.backend)
        color = COLORS[row % len(COLORS)]
        x = x_of(column, row)
        summary = result.summary
        if summary is None or not result.ok:
            why = escape(result.error or (result.check.detail if result.check else "") or "failed")
            out.append(f'<text class="failed" x="{_f(x)}" y="{TOP_Y + 14}" font-size="13" '
                       f'text-anchor="middle" fill="{color}">\u00d7<title>{escape(result.backend)} '
                       f'{escape(result.shape_name)}: {why}</title></text>')
            continue
        out.append(f'<line class="iqr" x1="{_f(x)}" y1="{_f(y_of(summary.q1))}" x2="{_f(x)}" '
                   f'y2="{_f(y_of(summary.q3))}" stroke="{color}" stroke-width="3"/>')
        shape = "circle" if result.timing_mode == "eager" else "rect"
        y = y_of(summary.median)
        tooltip = (f"{escape(result.backend)} {escape(result.shape_name)}: {summary.median:.1f} us "
                   f"({result.timing_mode})")
        if shape == "circle":
            out.append(f'<circle class="median" cx="{_f(x)}" cy="{_f(y)}" r="4" fill="{color}">'
                       f'<title>{tooltip}</title></circle>')
        else:
            out.append(f'<rect class="median" x="{_f(x - 4)}" y="{_f(y - 4)}" width="8" '
                       f'height="8" fill="{color}"><title>{tooltip}</title></rect>')
    out.append("</g>")
    # bottom panel: fraction of the roofline
    out.append('<g class="fraction-panel">')
    out.append(f'<rect x="{LEFT}" y="{BOTTOM_Y}" width="{_f(width_plot)}" height="{BOTTOM_H}" '
               f'fill="none" stroke="#333"/>')
    for percent in (25, 50, 75, 100):
        y = BOTTOM_Y + BOTTOM_H * (1 - percent / 100)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{_f(y)}" x2="{_f(LEFT + width_plot)}" '
                   f'y2="{_f(y)}" stroke="#e4e4e4"/>')
        out.append(_text(LEFT - 6, y + 4, f"{percent}%", size=10, anchor="end"))
    out.append(_text(18, BOTTOM_Y + BOTTOM_H / 2, "of roofline", size=11, anchor="middle",
                     extra=f' transform="rotate(-90 18 {_f(BOTTOM_Y + BOTTOM_H / 2)})"'))
    bar = min(band * 0.2, 16)
    for result in results:
        achieved = result.achieved(ceilings) if result.ok else None
        if achieved is None or achieved.fraction_of_roofline is None:
            continue
        column = categories.index(_category(result, many_groups))
        row = backends.index(result.backend)
        fraction = min(achieved.fraction_of_roofline, 1.0)
        x = x_of(column, row)
        height = BOTTOM_H * fraction
        out.append(f'<rect class="fraction" x="{_f(x - bar / 2)}" '
                   f'y="{_f(BOTTOM_Y + BOTTOM_H - height)}" width="{_f(bar)}" '
                   f'height="{_f(height)}" fill="{COLORS[row % len(COLORS)]}">'
                   f'<title>{escape(result.backend)} {escape(result.shape_name)}: '
                   f'{achieved.fraction_of_roofline:.0%} of the roofline</title></rect>')
    out.append("</g>")
    for index, category in enumerate(categories):
        x = LEFT + (index + 0.5) * band
        out.append(_text(x, LABEL_Y, category, size=10, anchor="end",
                         extra=f' transform="rotate(-30 {_f(x)} {LABEL_Y})"'))
    # legend
    legend_y = HEIGHT - 22
    x = LEFT
    implementations = {r.backend: r.implementation for r in results if r.implementation}
    for row, backend in enumerate(backends):
        color = COLORS[row % len(COLORS)]
        label = backend + (f" ({implementations[backend]})" if backend in implementations else "")
        out.append(f'<circle class="legend" cx="{_f(x + 5)}" cy="{legend_y - 4}" r="5" '
                   f'fill="{color}"/>')
        out.append(_text(x + 14, legend_y, label, size=11))
        x += 24 + 6.2 * len(label)
    out.append(f'<line x1="{_f(x)}" y1="{legend_y - 4}" x2="{_f(x + 24)}" y2="{legend_y - 4}" '
               f'stroke="black" stroke-width="1.5" stroke-dasharray="5,3"/>')
    out.append(_text(x + 30, legend_y, "roofline floor; \u25cf eager, \u25a0 CUDA graph",
                     size=11))
    out.append("</svg>")
    return "\n".join(out) + "\n"
