"""The variables of a ``vllm serve`` command line (and the process's ``VLLM_*`` ones)
-> :class:`Settings`, with notes on the ones vLLM no longer reads."""

from __future__ import annotations

import re
from collections.abc import Mapping

from selector.catalog import Catalog, EngineData, close_matches
from selector.inputs.serve.command import ServeNote
from selector.inputs.serve.flags import ServeFlags
from selector.inputs.serve.settings import Settings
from selector.inputs.serve.values import parse_bool
from selector.platforms import PLATFORM_MODULES, platform_module

__all__ = ["read_environment"]


def _switches(platform: str) -> dict[str, str]:
    """A platform's ``VLLM_*`` switches -> the environment fact each sets (its module's
    ``ENVIRONMENT_VARIABLES``)."""
    return platform_module(platform).ENVIRONMENT_VARIABLES


def read_environment(env: Mapping[str, str], settings: Settings, notes: list[ServeNote],
                     catalog: Catalog, engine: str | EngineData | None, table: ServeFlags,
                     platform: str | None = None) -> None:
    """The variables of the command line (and the process's ``VLLM_*`` ones), for a
    device of ``platform`` (default: the catalog's default platform)."""
    platform = platform or catalog.default_platform
    own = _switches(platform)
    others = {name: other for other in PLATFORM_MODULES if other != platform
              for name in _switches(other)}
    for name, value in env.items():
        if name in own:
            on = bool(platform_module(platform).read_switch(value))
            settings.environment[own[name].removeprefix("env_")] = on
            notes.append(ServeNote("info", "AS107", name,
                                   f"{name}={value}: {'on' if on else 'off'}"))
        elif name in others:
            notes.append(ServeNote("info", "AS104", name,
                                   f"{name}={value} has no effect on a {platform} device: "
                                   f"vLLM's {others[name]} platform reads it"))
        elif name in table.removed_environment:
            removed = table.removed_environment[name]
            level, replacement = removed.level, removed.use
            shown = value
            if name == "VLLM_ATTENTION_BACKEND":
                shown = re.sub(r"_VLLM_V1$", "", value.strip().upper())
                backends = catalog.engine_of(engine).backends
                if shown not in backends:
                    hint = close_matches(shown, sorted(backends))
                    replacement = "--attention-backend NAME (" + hint + ")"
            if name == "VLLM_USE_TRTLLM_ATTENTION" and shown.strip() in ("0", "1"):
                shown = "true" if shown.strip() == "1" else "false"
            flag = replacement.format(value=shown) if replacement else ""
            label = catalog.engine_of(engine).label
            message = f"{name}={value} has no effect: {label} does not read it"
            if name == "VLLM_USE_V1":
                message = f"{name}={value} has no effect: V1 is {label}'s only engine"
            notes.append(ServeNote(level, "AS101", name, message,
                                   hint=f"use {flag}" if flag else ""))
        elif name == "VLLM_BATCH_INVARIANT":
            settings.batch_invariant = parse_bool(name, value)
            notes.append(ServeNote("info", "AS107", name,
                                   f"{name}={value}: batch-invariant mode "
                                   f"{'on' if settings.batch_invariant else 'off'}"))
        elif name == "VLLM_HAS_FLASHINFER_CUBIN":
            settings.environment["flashinfer_cubin"] = parse_bool(name, value)
        elif name == "VLLM_KV_CACHE_LAYOUT":
            settings.kv_options["kv_cache_layout"] = value.strip()
            notes.append(ServeNote("info", "AS107", name, f"{name}={value}: KV-cache layout forced"))
        elif name.startswith("VLLM_"):
            notes.append(ServeNote("info", "AS104", name,
                                   f"{name} does not change backend selection in attn-select's "
                                   "model; passed over"))
