"""``bench`` through the stages: a deployment solved (and, for a model, its KV cache
planned), then per attention group every valid backend that has a kernel runner."""

from __future__ import annotations

from pathlib import Path

from selector.bench.targets import (
    BenchTargets,
    layer_groups,
    model_groups,
    targets_from_groups,
)
from selector.catalog import Catalog
from selector.inputs.config import LoadedDeployment, load_deployment
from selector.pipeline.check import solve_to_run
from selector.platforms import DEFAULT_PLATFORM, platform_module

__all__ = ["bench_targets"]


def bench_targets(config: Path | LoadedDeployment, catalog: Catalog) -> BenchTargets:
    """The benchmark groups of a deployment file (or one already loaded).

    Raises :class:`InvalidDeploymentError` (exit 1) when vLLM would reject the deployment
    (as ``check`` reports it) and :class:`InputError` (exit 2) when no valid backend has a
    kernel runner or the model has no attention layer. A model's state (Mamba, GDN) and
    side-cache groups have no attention backend to time; its attention groups are timed.
    """
    loaded = config if isinstance(config, LoadedDeployment) else load_deployment(str(config))
    path = Path(loaded.path)
    deployment = loaded.deployment
    solved = solve_to_run(loaded, catalog, "bench")
    platform = (solved.layer.platform if solved.layer is not None
                else solved.model.platform if solved.model is not None else None)
    if platform is not None and platform != DEFAULT_PLATFORM:  # its GPU, before any runner
        platform_module(platform).probe_torch(f"the bench of {path.name} (a {platform} deployment)")
    if solved.model is not None:
        groups = model_groups(solved.model, catalog)
        mode = "explicit" if deployment.attention_backend else "auto"
    else:
        result = solved.layer
        assert result is not None
        groups = layer_groups(result, catalog, name=path.stem,
                              sliding_window=deployment.layer.sliding_window,
                              logits_soft_cap=deployment.layer.logits_soft_cap)
        mode = result.mode
    device = deployment.device if isinstance(deployment.device, str) else None
    return targets_from_groups(str(path), engine=solved.engine, device=device, mode=mode,
                               groups=groups)
