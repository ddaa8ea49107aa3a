"""Model presets: config.json facts shipped as data in ``schemas/models/``."""

from __future__ import annotations

import difflib
from pathlib import Path

from selector.errors import InputError

__all__ = ["list_presets", "preset_dir", "preset_path"]


def preset_dir() -> Path:
    """Where the preset files live: inside the wheel (``selector/_schemas``) or
    in the source tree (``schemas/``)."""
    package = Path(__file__).resolve().parent.parent
    for root in (package / "_schemas", package.parent / "schemas"):
        candidate = root / "models"
        if candidate.is_dir():
            return candidate
    return package.parent / "schemas" / "models"


def list_presets() -> tuple[str, ...]:
    """Preset names, sorted (the file stems of ``schemas/models/*.json``)."""
    directory = preset_dir()
    if not directory.is_dir():
        return ()
    return tuple(sorted(path.stem for path in directory.glob("*.json")))


def preset_path(name: str) -> Path:
    """The file of preset ``name`` (case-insensitive); InputError with a
    did-you-mean hint when there is no such preset."""
    names = list_presets()
    by_lower = {preset.lower(): preset for preset in names}
    key = name.strip().lower()
    if key in by_lower:
        return preset_dir() / f"{by_lower[key]}.json"
    close = difflib.get_close_matches(key, list(by_lower), n=3, cutoff=0.6)
    hint = (
        "did you mean " + " or ".join(repr(by_lower[c]) for c in close) + "?"
        if close
        else "known presets: " + ", ".join(names)
    )
    raise InputError(f"unknown model preset {name!r}", field="model", hint=hint)
