"""Resolve a preset name or a path to a config.json and load its facts."""

from __future__ import annotations

import json
from pathlib import Path

from selector.errors import InputError
from selector.models.facts import ModelFacts
from selector.models.hf_config import parse_config
from selector.models.json_lines import field_line
from selector.models.presets import (
    fetch_config_hint,
    list_presets,
    match_preset,
    precision_conflict,
    preset_path,
    recorded_checkpoint,
)

__all__ = ["load_config_file", "load_model", "precision_message", "with_quantization_sidecar"]

MAX_CONFIG_BYTES = 16 * 1024 * 1024


def _looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or name.endswith(".json") or name.startswith(".")


def _is_explicit_path(name: str) -> bool:
    """A name only a file system can answer (``./x``, ``/x``, ``~/x``, ``x.json``)."""
    return (name.startswith((".", "/", "~", "\\")) or name.endswith(".json")
            or name.count("/") > 1)


def load_config_file(path: Path, *, name: str | None = None) -> ModelFacts:
    """Parse one config.json file (a directory means its ``config.json``)."""
    if path.is_dir():
        path = path / "config.json"
    file = str(path)
    if not path.is_file():
        raise InputError("no such file", file=file, hint="pass a config.json or its directory")
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise InputError("file is too large to be a config.json", file=file)
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", file=file) from exc
    except UnicodeDecodeError as exc:
        raise InputError("file is not UTF-8 text", file=file) from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=file, line=exc.lineno) from exc
    except RecursionError as exc:
        raise InputError("invalid JSON: nested too deeply", file=file) from exc
    raw = with_quantization_sidecar(raw, path)
    try:
        return parse_config(raw, file=file, name=name)
    except InputError as exc:
        if exc.line is None and exc.file == file:
            exc = InputError(exc.message, file=file, field=exc.field, hint=exc.hint,
                             line=field_line(text, exc.field or ""))
            raise exc from None
        raise


def with_quantization_sidecar(raw: object, path: Path) -> object:
    """``raw`` with ModelOpt's ``hf_quant_config.json`` beside ``path`` as its
    ``quantization_config`` when it has none: ModelOpt up to 0.29 keeps the quantization
    there, and vLLM reads it as the quantization_config
    (vllm/transformers_utils/config.py:951-965 in 0.33.0)."""
    if not isinstance(raw, dict) or "quantization_config" in raw:
        return raw
    sidecar = path.parent / "hf_quant_config.json"
    if not sidecar.is_file():
        return raw
    try:
        extra = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the model's quantization config: {exc}",
                         file=str(sidecar), field="model") from None
    return {**raw, "quantization_config": extra} if isinstance(extra, dict) else raw


def precision_message(name: str, conflict: tuple[str, str, str]) -> str:
    """Why a quantized (or re-released) id does not resolve to its architecture's preset."""
    wanted, preset, stored = conflict
    return (f"{name!r} names a checkpoint stored in {wanted} and no config.json of it is "
            f"here: the shipped preset {preset!r} of its architecture is stored in {stored}, "
            "whose weights are not this checkpoint's")


def load_model(name_or_path: str | Path) -> ModelFacts:
    """Load a model's facts from a preset name (case-insensitive) or a path to
    a config.json / a directory holding one. Errors are :class:`InputError`."""
    if isinstance(name_or_path, Path):
        return load_config_file(name_or_path)
    name = name_or_path.strip()
    if not name:
        raise InputError("empty model name", field="model", hint="a preset name or a path")
    candidate = Path(name).expanduser()
    if candidate.exists():
        return load_config_file(candidate)
    recorded = recorded_checkpoint(name)
    if recorded is not None:  # a quantized id whose config.json is recorded
        return load_config_file(recorded, name=name)
    preset = None if _is_explicit_path(name) else match_preset(name)
    if preset is not None:  # a Hugging Face id: org/Name, as on the vllm serve line
        return load_config_file(preset_path(preset), name=preset)
    if _is_explicit_path(name):
        return load_config_file(candidate)
    conflict = precision_conflict(name)
    if conflict is not None:
        raise InputError(precision_message(name, conflict), field="model",
                         hint=fetch_config_hint(name))
    if _looks_like_path(name):
        raise InputError(
            f"cannot resolve {name!r} to a model: no local config.json and no shipped preset "
            "of that architecture", field="model",
            hint="give the path of the model's config.json (or its directory) or a preset: "
                 + ", ".join(list_presets()) + " (attn-select list presets)")
    path = preset_path(name)
    return load_config_file(path, name=path.stem)
