"""Model presets: config.json facts shipped as data in ``schemas/models/``."""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from selector.errors import InputError

__all__ = [
    "fetch_config_hint",
    "id_precision",
    "list_presets",
    "match_preset",
    "precision_conflict",
    "preset_aliases",
    "preset_architecture",
    "preset_dir",
    "preset_origin",
    "preset_path",
    "preset_precision",
    "read_preset_yaml",
    "recorded_checkpoint",
]


def preset_dir() -> Path:
    """Where the preset files live: inside the wheel (``selector/_schemas``) or
    in the source tree (``schemas/``)."""
    package = Path(__file__).resolve().parent.parent
    for root in (package / "_schemas", package.parent / "schemas"):
        candidate = root / "models"
        if candidate.is_dir():
            return candidate
    return package.parent / "schemas" / "models"


def read_preset_yaml(name: str) -> Any:
    """The parsed YAML file ``name`` of the preset folder (a shipped data file: one that
    cannot be read is a broken install, RuntimeError naming it)."""
    path = preset_dir() / name
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:  # pragma: no cover - shipped data
        raise RuntimeError(f"{path}: {exc}") from exc


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


@lru_cache(maxsize=1)
def _precision_tokens() -> dict[str, str]:
    import yaml

    path = preset_dir() / _ALIASES_FILE
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    tokens = (data or {}).get("precision_tokens") or {}
    return {str(k).lower(): str(v) for k, v in tokens.items()}


def id_precision(name: str) -> str | None:
    """The precision an id's name states (``fp8``, ``int4``, ``mxfp4``, ``16-bit``...;
    the last such part wins), or None when it states none."""
    tokens = _precision_tokens()
    base = name.strip().rstrip("/").rsplit("/", 1)[-1].lower()
    found = [tokens[part] for part in re.split(r"[-_.]", base) if part in tokens]
    return found[-1] if found else None


_METHOD_PRECISION = {"fp8": "fp8", "fbgemm_fp8": "fp8", "mxfp4": "mxfp4", "awq": "int4",
                     "awq_marlin": "int4", "gptq": "int4", "gptq_marlin": "int4",
                     "modelopt_fp4": "nvfp4"}


def preset_precision(preset: str) -> str:
    """The precision a preset's config stores its weights in (``16-bit`` when it has
    no ``quantization_config``)."""
    try:
        data = json.loads((preset_dir() / f"{preset}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "16-bit"
    qc = data.get("quantization_config") if isinstance(data, dict) else None
    if not isinstance(qc, dict):
        return "16-bit"
    method = str(qc.get("quant_method", "")).lower()
    return _METHOD_PRECISION.get(method, method or "16-bit")


def _match_architecture(name: str) -> str | None:
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


def precision_conflict(name: str) -> tuple[str, str, str] | None:
    """(the id's precision, the preset of its architecture, that preset's precision) when
    the id names a precision the preset is not stored in; None otherwise."""
    preset = _match_architecture(name)
    wanted = id_precision(name)
    if preset is None or wanted is None or name.strip().lower() == preset.lower():
        return None
    stored = preset_precision(preset)
    return None if wanted == stored else (wanted, preset, stored)


def fetch_config_hint(name: str) -> str:
    """The one command that fetches an id's config.json, and how to pass it."""
    folder = name.strip().rstrip("/").rsplit("/", 1)[-1]
    return (f"fetch its config.json: huggingface-cli download {name.strip()} config.json "
            f"--local-dir ./{folder} (or: hf download {name.strip()} config.json --local-dir "
            f"./{folder}), then pass ./{folder} as the model")


_CHECKPOINTS = "checkpoints"


@lru_cache(maxsize=1)
def _checkpoints() -> dict[str, Path]:
    """Recorded checkpoint id (lower case) -> its folder (``schemas/models/checkpoints/``)."""
    directory = preset_dir() / _CHECKPOINTS
    if not directory.is_dir():
        return {}
    return {folder.name.replace("--", "/", 1).lower(): folder
            for folder in sorted(directory.iterdir()) if (folder / "config.json").is_file()}


def recorded_checkpoint(name: str) -> Path | None:
    """The folder of the recorded config.json of Hugging Face id ``name`` (or of a
    directory named as the id's repository, when one recorded id has that name)."""
    recorded = _checkpoints()
    text = name.strip().rstrip("/").lower()
    if text in recorded:
        return recorded[text]
    base = text.rsplit("/", 1)[-1]
    named = [folder for key, folder in recorded.items() if key.rsplit("/", 1)[-1] == base]
    return named[0] if len(named) == 1 else None


def match_preset(name: str) -> str | None:
    """A Hugging Face id (or a directory name) -> the shipped preset of the same
    architecture and precision, by the rules of ``aliases.yaml``; None when none matches
    (an id naming another precision than the preset's, too: :func:`precision_conflict`)."""
    if precision_conflict(name) is not None:
        return None
    return _match_architecture(name)
