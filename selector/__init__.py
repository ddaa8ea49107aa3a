"""attn-select: validate and select attention backends of LLM serving engines.

The public API (everything else is internal)::

    from selector import load_catalog, load_deployment, deployment_facts, solve

    catalog = load_catalog()
    loaded = load_deployment("examples/llama-3.1-8b-h100.yaml")
    result = solve(deployment_facts(loaded, catalog), attention_backend=None)
    result.selected, result.verdicts, result.runtime

    # the whole pipeline (a single layer, or every layer of a model, its KV plan and
    # vLLM's start-up checks):
    solved = solve_deployment(loaded, catalog)
    solved.valid, solved.layer or solved.model
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

__all__ = [
    "BackendVerdict",
    "Catalog",
    "Diagnostic",
    "ExitCode",
    "InputError",
    "RequestFacts",
    "SolveResult",
    "Solved",
    "Suggestion",
    "__version__",
    "deployment_facts",
    "load_catalog",
    "load_deployment",
    "solve",
    "solve_deployment",
    "sweep_lines",
]

__version__ = "0.1.0"

_EXPORTS = {  # module -> the names this package exports from it (imported on first use)
    "selector.result": ("BackendVerdict", "Diagnostic", "SolveResult", "Suggestion"),
    "selector.catalog": ("Catalog", "load_catalog"),
    "selector.errors": ("ExitCode", "InputError"),
    "selector.inputs.config": ("deployment_facts", "load_deployment"),
    "selector.solver": ("solve",),
    "selector.request": ("RequestFacts",),
    "selector.pipeline.deployment": ("Solved", "solve_deployment"),
    "selector.sweep": ("sweep_lines",),
}
_LAZY = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:
    from selector.catalog import Catalog, load_catalog
    from selector.errors import ExitCode, InputError
    from selector.inputs.config import deployment_facts, load_deployment
    from selector.pipeline.deployment import Solved, solve_deployment
    from selector.request import RequestFacts
    from selector.result import BackendVerdict, Diagnostic, SolveResult, Suggestion
    from selector.solver import solve
    from selector.sweep import sweep_lines


__getattr__ = lazy_getattr(__name__, _LAZY)
