#!/usr/bin/env python3
"""Entries of an engine profile that restate its parent (safe to delete).

A child profile should state only what changed. For ``vllm==X`` this tool removes,
one at a time, every entry of ``profile.yaml`` and ``platforms/*.yaml`` (a key of ``inputs`` /
``environment`` / ``messages``, an entry of ``facts`` / ``checks`` / ``priorities``,
any other top-level key) and of each ``backends/NAME.yaml`` patch (a top-level key,
or the whole file), reloads the catalog from a scratch copy of ``schemas/`` and
reports the entries whose removal leaves the validated engine unchanged:

    python tools/profile_redundancy.py vllm==0.33.0

It never edits the data; delete the reported entries by hand (comments and source
citations stay yours) and re-run it, ``tools/conformance.py`` and the tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import oracle  # noqa: F401  (the checkout's selector/ first on sys.path)
import yaml

from selector.catalog import _load_catalog_files
from selector.util.resources import schemas_dir

KEYED = {"facts": "name", "checks": "code", "priorities": "id"}
MAPPINGS = ("inputs", "environment", "messages")
FIXED = ("engine", "extends", "description", "source", "platform")


def merged(base: Path, engine: str) -> str | None:
    """The validated engine as canonical JSON (None when the data does not load)."""
    try:
        data = _load_catalog_files(base).engine(engine)
    except Exception:
        return None
    profile = data.profile.model_dump(mode="json")
    for key in ("extends", "description", "source"):
        profile.pop(key, None)
    backends = {n: {k: v for k, v in b.model_dump(mode="json").items()
                    if k not in ("source", "description")} for n, b in data.backends.items()}
    return json.dumps({"profile": profile, "backends": backends,
                       "mla_prefill": data.mla_prefill}, sort_keys=True, default=str)


def _variants(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, the document without one entry) for every entry."""
    out = []
    for key, value in doc.items():
        if key in FIXED:
            continue
        if key in MAPPINGS and isinstance(value, dict):
            for name in value:
                out.append((f"{key}.{name}", {**doc, key: {k: v for k, v in value.items() if k != name}}))
        elif key in KEYED and isinstance(value, list):
            for i, entry in enumerate(value):
                ident = entry.get(KEYED[key]) if isinstance(entry, dict) else i
                rest = [e for j, e in enumerate(value) if j != i]
                out.append((f"{key}[{ident}]", {**doc, key: rest}))
        else:
            out.append((key, {k: v for k, v in doc.items() if k != key}))
    return out


def redundant(engine: str) -> list[str]:
    source = schemas_dir()
    directory = source / "engines" / engine.replace("==", "-", 1)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "schemas"
        shutil.copytree(source, base)
        target = base / "engines" / directory.name
        reference = merged(base, engine)
        if reference is None:
            raise SystemExit(f"{engine} does not load")
        found = []
        for profile_path in [target / "profile.yaml",
                             *sorted((target / "platforms").glob("*.yaml"))]:
            original = profile_path.read_text()
            doc = yaml.safe_load(original)
            shown = profile_path.relative_to(target).as_posix()
            for label, variant in _variants(doc):
                profile_path.write_text(yaml.safe_dump(variant, sort_keys=False))
                if merged(base, engine) == reference:
                    found.append(f"{shown}: {label}")
            profile_path.write_text(original)
        for path in sorted((target / "backends").glob("*.yaml")):
            text = path.read_text()
            path.unlink()
            if merged(base, engine) == reference:
                found.append(f"backends/{path.name}: the whole file")
                path.write_text(text)
                continue
            backend = yaml.safe_load(text)
            for label, variant in _variants(backend):
                if label in ("name", "inherit"):
                    continue
                path.write_text(yaml.safe_dump(variant, sort_keys=False))
                if merged(base, engine) == reference:
                    found.append(f"backends/{path.name}: {label}")
            path.write_text(text)
        return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("engine", help="e.g. vllm==0.33.0")
    a = ap.parse_args(argv)
    found = redundant(a.engine)
    for line in found:
        print(line)
    if not found:
        print(f"{a.engine}: every entry changes something")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
