"""Model presets: config.json facts shipped as data in ``schemas/models/``."""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from pathlib import Path

from selector.errors import InputError

__all__ = ["list_presets", "match_preset", "preset_aliases", "preset_architecture", "preset_dir",
           "preset_origin", "preset_path"]


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


_ALIASES_FILE = "aliases.yaml"


@lru_cache(maxsize=1)
def _alias_rules() -> tuple[tuple[str, ...], re.Pattern[str], dict[str, tuple[str, ...]]]:
    """(ignored prefixes, one-part variant pattern, preset -> listed ids) from
    ``schemas/models/aliases.yaml``."""
    import yaml

    path = preset_dir() / _ALIASES_FILE
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    data = data or {}
    prefixes = tuple(str(p).lower() for p in data.get("ignored_prefixes") or ())
    tokens = [str(t) for t in data.get("variant_tokens") or ()]
    variant = re.compile("|".join(f"(?:{t})" for t in tokens) or "(?!)", re.IGNORECASE)
    listed = {str(k): tuple(str(v) for v in (ids or ())) for k, ids in
              (data.get("presets") or {}).items()}
    return prefixes, variant, listed


def _normalise(name: str) -> str:
    """An id as compared: no organisation, no ignored prefix, no variant parts."""
    prefixes, variant, _ = _alias_rules()
    base = name.strip().rstrip("/").rsplit("/", 1)[-1].lower()
    for prefix in prefixes:
        if base.startswith(prefix) and len(base) > len(prefix):
            base = base[len(prefix):]
    parts = re.split(r"([-_.])", base)
    kept: list[str] = [parts[0]]
    for separator, part in zip(parts[1::2], parts[2::2], strict=True):
        if not variant.fullmatch(part):
            kept += [separator, part]
    return "".join(kept)


def _preset_text_field(preset: str, key: str) -> str | None:
    try:
        data = json.loads((preset_dir() / f"{preset}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get(key) if isinstance(data, dict) else None
    if isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) and value else None


def preset_origin(preset: str) -> str | None:
    """The Hugging Face id whose config.json the preset is (its ``_name_or_path``)."""
    return _preset_text_field(preset, "_name_or_path")


def preset_architecture(preset: str) -> str | None:
    """The preset's first ``architectures`` entry (vLLM's model class)."""
    return _preset_text_field(preset, "architectures")


def preset_aliases() -> dict[str, tuple[str, ...]]:
    """Preset -> the ids it answers to (its name, its config's ``_name_or_path``, the
    listed ids of ``aliases.yaml``)."""
    _, _, listed = _alias_rules()
    out: dict[str, tuple[str, ...]] = {}
    for preset in list_presets():
        names = [preset]
        origin = preset_origin(preset)
        if origin:
            names.append(origin)
        names.extend(listed.get(preset, ()))
        out[preset] = tuple(dict.fromkeys(names))
    return out


def match_preset(name: str) -> str | None:
    """A Hugging Face id (or a directory name) -> the shipped preset of the same
    architecture, by the rules of ``aliases.yaml``; None when none matches."""
    aliases = preset_aliases()
    text = name.strip().rstrip("/").lower()
    exact = {alias.lower(): preset for preset, names in aliases.items() for alias in names}
    if text in exact:
        return exact[text]
    wanted = _normalise(text)
    normalised: dict[str, str] = {}
    for preset, names in aliases.items():
        for alias in names:
            normalised.setdefault(_normalise(alias), preset)
    return normalised.get(wanted)
