"""The release-history page: what changed between consecutive engine profiles.

Generated from the profiles alone (``docs/release-history.md``): per backend the
first and last profiled release it appears in and the releases that changed it,
then per release what changed from the previous one (validate_configuration
checks, priority lists, request inputs, derived facts, messages, backends added,
removed or changed, and which of their columns).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from selector.catalog import Catalog, EngineData

__all__ = ["release_changes", "release_history_page"]

_IGNORED_BACKEND_FIELDS = {"engine", "source", "description"}
_NESTED = ("features", "runtime")


def _backend_columns(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Names of the columns that differ (``features.sink``, ``runtime.kv_cache`` ...)."""
    out = []
    for key in sorted(set(before) | set(after)):
        if key in _IGNORED_BACKEND_FIELDS:
            continue
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key in _NESTED and isinstance(old, dict) and isinstance(new, dict):
            out += [f"{key}.{sub}" for sub in sorted(set(old) | set(new)) if old.get(sub) != new.get(sub)]
        else:
            out.append(key)
    return out


def _names(items: Iterable[Any], attr: str) -> list[str]:
    return [str(getattr(item, attr)) for item in items]


def release_changes(older: EngineData, newer: EngineData,
                    serve_flags: Mapping[str, frozenset[str]] | None = None) -> list[str]:
    """Bullet points: what ``newer`` changes relative to ``older`` (``serve_flags``: each
    release's `vllm serve` engine flags, :func:`selector.inputs.serve.flags.release_flags`)."""
    lines: list[str] = []
    a, b = older.profile, newer.profile
    old_checks, new_checks = _names(a.checks, "code"), _names(b.checks, "code")
    added = [c for c in new_checks if c not in old_checks]
    removed = [c for c in old_checks if c not in new_checks]
    if added or removed:
        lines.append("validate_configuration checks: "
                     + ", ".join([f"+{c}" for c in added] + [f"-{c}" for c in removed]))
    elif [c.model_dump() for c in a.checks] != [c.model_dump() for c in b.checks]:
        lines.append("validate_configuration checks: order or conditions changed")
    if [p.model_dump() for p in a.priorities] != [p.model_dump() for p in b.priorities]:
        lines.append("priority lists (_get_backend_priorities) changed")
    new_inputs = sorted(set(b.inputs) - set(a.inputs))
    gone_inputs = sorted(set(a.inputs) - set(b.inputs))
    if new_inputs or gone_inputs:
        lines.append("request inputs: " + ", ".join([f"+{n}" for n in new_inputs]
                                                    + [f"-{n}" for n in gone_inputs]))
    old_facts = {f.name: f.model_dump() for f in a.facts}
    new_facts = {f.name: f.model_dump() for f in b.facts}
    changed_facts = sorted(n for n in set(old_facts) | set(new_facts)
                           if old_facts.get(n) != new_facts.get(n))
    if changed_facts:
        lines.append("derived facts: " + ", ".join(changed_facts))
    if a.messages.model_dump() != b.messages.model_dump():
        keys = [k for k, v in b.messages.model_dump().items() if a.messages.model_dump().get(k) != v]
        lines.append("messages: " + ", ".join(keys))
    if set(a.environment) != set(b.environment):
        lines.append("environment probes: " + ", ".join(
            [f"+{n}" for n in sorted(set(b.environment) - set(a.environment))]
            + [f"-{n}" for n in sorted(set(a.environment) - set(b.environment))]))
    added_b = sorted(set(newer.backends) - set(older.backends))
    removed_b = sorted(set(older.backends) - set(newer.backends))
    if added_b:
        lines.append("backends added: " + ", ".join(added_b))
    if removed_b:
        lines.append("backends removed: " + ", ".join(removed_b))
    for name in sorted(set(older.backends) & set(newer.backends)):
        columns = _backend_columns(older.backends[name].model_dump(), newer.backends[name].model_dump())
        if columns:
            lines.append(f"{name}: " + ", ".join(columns))
    before = (serve_flags or {}).get(older.version.public)
    after = (serve_flags or {}).get(newer.version.public)
    if before is not None and after is not None and before != after:
        lines.append("vllm serve flags: " + ", ".join(
            [f"+{f}" for f in sorted(after - before)] + [f"-{f}" for f in sorted(before - after)]))
    return lines or ["no change to selection data"]


def release_history_page(catalog: Catalog, banner: str,
                         serve_flags: Mapping[str, frozenset[str]] | None = None) -> str:
    """The page (``serve_flags``: each release's `vllm serve` engine flags, for the
    flags each release added and removed)."""
    engines = [catalog.engine(n) for n in catalog.engine_names]
    lines = [banner, "", "# Release history", "",
             "Generated from the engine profiles in `schemas/engines/` (one per vLLM release; "
             "each states what changed from the previous one). The columns are those of the "
             "profiles; the agreement of each profile with the real vLLM release is measured "
             "by `tools/conformance.py` (see [new-engine-version.md](new-engine-version.md)).",
             "", "## Backends", "",
             "| backend | first profiled release | last profiled release | changed in |",
             "| --- | --- | --- | --- |"]
    names = sorted({n for e in engines for n in e.backends})
    for name in names:
        present = [e for e in engines if name in e.backends]
        changed = []
        for older, newer in itertools.pairwise(engines):
            if name in older.backends and name in newer.backends and _backend_columns(
                    older.backends[name].model_dump(), newer.backends[name].model_dump()):
                changed.append(newer.version.public)
        lines.append(f"| {name} | {present[0].version.public} | {present[-1].version.public} | "
                     f"{', '.join(changed) or '-'} |")
    lines += ["", "## What changed per release", ""]
    for older, newer in itertools.pairwise(engines):
        lines += [f"### {newer.engine} (from {older.engine})", ""]
        lines += [f"- {item}" for item in release_changes(older, newer, serve_flags)]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
