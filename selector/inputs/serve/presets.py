"""MODEL of a ``vllm serve`` command line -> the model's ``config.json``: a local
directory or file, else the shipped preset of that name or Hugging Face id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from selector.errors import InputError
from selector.inputs.serve.values import SOURCE
from selector.models import list_presets, preset_dir
from selector.models.loader import precision_message, with_quantization_sidecar
from selector.models.presets import (
    fetch_config_hint,
    match_preset,
    precision_conflict,
    preset_origin,
    recorded_checkpoint,
)

__all__ = ["is_shipped_preset", "load_model_config"]


def load_model_config(model: str, override: str | None) -> tuple[dict[str, Any], str, str, str]:
    """(config.json mapping, file, display name, how it was resolved)."""
    target = override or model
    path = Path(target).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    recorded = None if path.is_file() else recorded_checkpoint(target)
    if path.is_file():
        file = str(path)
        how = f"read {file}"
    elif recorded is not None:
        file = str(recorded / "config.json")
        how = (f"the recorded config.json of {recorded.name.replace('--', '/', 1)} "
               "(schemas/models/checkpoints)")
    else:
        presets = list_presets()
        preset = match_preset(target)
        if preset is None:
            lowered = {p.lower(): p for p in presets}
            preset = lowered.get(target.strip().lower())
        conflict = precision_conflict(target)
        if preset is None and conflict is not None:
            raise InputError(precision_message(target, conflict), file=SOURCE,
                             field="--model" if override else "MODEL",
                             hint=fetch_config_hint(target))
        if preset is None:
            flag = "--model" if override else "MODEL"
            raise InputError(
                f"cannot resolve {target!r} to a model: no local config.json and no shipped "
                "preset of that name", file=SOURCE, field=flag,
                hint="pass the model's directory (with config.json) or name a preset with "
                     "attn-select check --model PRESET; presets: " + ", ".join(presets))
        file = str(preset_dir() / f"{preset}.json")
        exact = target.strip().rstrip("/").lower() == (preset_origin(preset) or "").lower()
        if preset.lower() == target.strip().lower():
            how = f"the shipped preset {preset!r}"
        elif exact:
            how = f"the shipped preset {preset!r} (the config.json of {target})"
        else:
            how = (f"resolved {target!r} to the shipped preset {preset!r} (same architecture; "
                   "no config.json of it here)")
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the model's config: {exc}", file=file) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=file, line=exc.lineno) from None
    data = with_quantization_sidecar(data, Path(file))
    if not isinstance(data, dict):
        raise InputError("a config.json must hold a JSON object", file=file)
    name = Path(file).stem if file.endswith(".json") and Path(file).name != "config.json" \
        else str(Path(file).parent)
    return data, file, name, how


def is_shipped_preset(file: str) -> bool:
    """Whether ``file`` is one of the shipped presets (a deployment names those by name;
    any other config.json, whatever its file name, by its path)."""
    return Path(file).resolve().parent == preset_dir().resolve()
