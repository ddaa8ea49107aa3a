"""``attn-select bench``: measure every valid backend on the user's workload.

Pure CPU parts (importable anywhere, no torch): the workload model and parser
(:mod:`~selector.bench.workload`), statistics (:mod:`~selector.bench.stats`), roofline
arithmetic (:mod:`~selector.bench.roofline`), the measurements file
(:mod:`~selector.bench.measurements`), the policy (:mod:`~selector.bench.policy`), the
benchmark targets derived from a check (:mod:`~selector.bench.targets`), tables
(:mod:`~selector.bench.render`) and the SVG plot (:mod:`~selector.bench.plot`).

GPU parts (torch and the kernel libraries are imported inside functions only):
:mod:`~selector.bench.timing` and :mod:`~selector.bench.runner`.
"""

from __future__ import annotations
