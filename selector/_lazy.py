"""Package exports imported on first use, so importing one submodule stays light."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["START_UP_IMPORTS", "lazy_getattr"]


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` (a module path) on first use."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


START_UP_IMPORTS: Mapping[str, tuple[str, ...]] = {
    # The command line: a command imports what it runs when it runs, so `check` loads no
    # smoke, bench, fleet, docs or diff code, and `--help` none of them.
    "selector.cli.catalog_commands": ("selector.catalog", "selector.checkrun",
                                      "selector.cli.check", "selector.cli.console",
                                      "selector.models.arch_registry",
                                      "selector.models.presets", "selector.pipeline.check",
                                      "selector.pipeline.explain", "selector.report",
                                      "selector.report.plain", "selector.sweep"),
    "selector.cli.bench": ("selector.bench.measurements", "selector.bench.outputs",
                           "selector.bench.policy", "selector.bench.render",
                           "selector.bench.runner", "selector.bench.workload", "selector.catalog",
                           "selector.cli.console", "selector.cli.progress", "selector.pipeline.bench"),
    "selector.cli.check": ("selector.bench.measurements", "selector.checkrun", "selector.cli.bench",
                           "selector.cli.console", "selector.pipeline.check", "selector.inputs.serve"),
    "selector.cli.diff": ("selector.catalog", "selector.checkrun", "selector.cli.check",
                          "selector.cli.console", "selector.compare.diff", "selector.pipeline.diff",
                          "selector.report.diff"),
    "selector.cli.docs": ("selector.catalog", "selector.docsgen"),
    "selector.cli.verify": ("selector.catalog", "selector.pipeline.verify", "selector.report.verify"),
    "selector.cli.fleet": ("selector.bench.measurements", "selector.bench.outputs",
                           "selector.bench.policy", "selector.bench.render",
                           "selector.bench.workload", "selector.catalog", "selector.fleet.render",
                           "selector.fleet.run",
                           "selector.report.formats.sarif"),
    "selector.cli.shards": ("selector.parallel.distributed", "selector.parallel.simulate",
                            "selector.smoke.report"),
    "selector.cli.smoke": ("selector.catalog", "selector.cli.shards", "selector.inputs.config",
                           "selector.parallel.dry_run",
                           "selector.parallel.plan", "selector.pipeline.smoke",
                           "selector.smoke.dry_run",
                           "selector.smoke.plan", "selector.smoke.render",
                           "selector.smoke.report", "selector.smoke.runner"),
    # A fleet run: Ray is imported only under --ray, and a Ray task imports only the stage it runs.
    "selector.fleet.entry": ("selector", "selector.bench.runner", "selector.bench.workload",
                             "selector.catalog",
                             "selector.inputs.config", "selector.pipeline.bench", "selector.pipeline.smoke",
                             "selector.smoke", "selector.smoke.deployment"),
    "selector.fleet.run": ("selector.fleet.cluster", "selector.fleet.dispatch"),
    # A single-layer check reads no model file, shards no model, never asks the architecture
    # registry, and its report never loads the model view; a check of a layer that is not
    # MLA (and pins no MLA prefill backend) loads no MLA prefill selector.
    "selector.check.model": ("selector.models.arch_registry", "selector.models.families"),
    "selector.inputs.config": ("selector.memory", "selector.solver.mla_prefill", "selector.models",
                               "selector.models.arch_registry"),
    # the shard code only for a deployment that splits attention over ranks
    "selector.pipeline.smoke": ("selector.parallel.from_deployment",),
    "selector.report.formats.json": ("selector.report.model",),
    "selector.solver": ("selector.solver.mla_prefill",),
    "selector.report.formats.text": ("selector.report.model",),
    # The on-disk cache (tempfile, pickle, hashlib) only when an engine is first loaded.
    "selector.catalog": ("selector.util.cache",),
    "selector.solver.compiled": ("selector.util.cache",),
}
"""The only function-level imports of ``selector`` modules: importer -> the modules it
imports inside functions, each kept so that a command loads only what it runs (none
dodges an import cycle: the layers in pyproject.toml's ``[tool.importlinter]`` hold for
these imports too; ``tests/unit/test_layering.py`` checks the list is exact)."""
