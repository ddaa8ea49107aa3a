#!/usr/bin/env python3
"""Ask the config classes vLLM reads a config.json through for the values they give a
field the config omits.

vLLM reads config.json through ``AutoConfig`` (its own ``_CONFIG_REGISTRY`` class of the
model type first, registered into ``AutoConfig``; else transformers' ``CONFIG_MAPPING``:
vllm/transformers_utils/config.py:122, :206-219, :395-450 in 0.33.0), so a field the
config leaves out takes its config class's default. For every model type of
``schemas/models/causal_lm_architectures.yaml`` (the text model types the tool maps,
the ones a multimodal config's ``text_config`` names) this asks, in a release's oracle
interpreter:

* the class vLLM uses for the model type and the file it lives in;
* each field's class-level default (a dataclass field, or an ``__init__`` parameter
  for a class that is no dataclass), with the file and line that declares it;
* the value an instance built with no arguments holds: where that differs from the
  class-level default, ``__post_init__`` / ``__init__`` derives the field
  (``head_dim = hidden_size // num_attention_heads``, Qwen2's ``sliding_window`` kept
  only with ``use_sliding_window``) and no single default exists: the field is listed
  as ``derived``, not as a default;
* the class's ``attribute_map`` (GPT-2's ``num_hidden_layers`` -> ``n_layer``).

Only scalar defaults (numbers, booleans, strings) are answers; fields the base
``PreTrainedConfig`` declares are left out (no model type's own default).

Run with each release's oracle interpreter, then once with any interpreter::

    /work/.venvs/oracle-0.33.0/bin/python tools/config_defaults_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/config-defaults.json.gz
    python tools/config_defaults_oracle.py --data

``--data`` writes ``schemas/models/config_defaults.yaml`` (the defaults the parser
applies) from every recorded answer: a default applies where every release's class
agrees on it (transformers 5.17.0 / 5.19.0 / 5.24.0 in the oracle venvs differ for a few
model types, and vLLM's own classes change between releases).
``tests/unit/test_config_defaults.py`` compares the data with the committed answers.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

import oracle

GOLDEN_NAME = "config-defaults.json.gz"
DATA = oracle.REPO / "schemas" / "models" / "config_defaults.yaml"
MODEL_TYPES = oracle.REPO / "schemas" / "models" / "causal_lm_architectures.yaml"


def model_types() -> list[str]:
    """The model types of ``causal_lm_architectures.yaml`` (read without PyYAML: one
    ``  key: value`` line each under the table)."""
    rows = re.findall(r"^  ([A-Za-z0-9_.\-]+): \S+$", MODEL_TYPES.read_text(encoding="utf-8"), re.M)
    return sorted(rows)


def _scalar(value: Any) -> bool:
    return isinstance(value, bool | int | float | str)


def _site_path(path: str) -> str:
    """``transformers/models/...`` or ``vllm/transformers_utils/...``: the path from
    site-packages."""
    parts = Path(path).parts
    for anchor in ("transformers", "vllm"):
        if anchor in parts:
            index = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[index:])
    return path


def _declared(cls: type, name: str, base: type) -> tuple[str, int] | None:
    """The file and line of the class in ``cls``'s MRO that declares ``name`` (an
    annotation, or an ``__init__`` parameter); None when only ``base`` does."""
    for klass in cls.__mro__:
        if klass is base or klass is object:
            return None
        own = inspect.get_annotations(klass)
        init = klass.__dict__.get("__init__")
        handwritten = init is not None and not _own_dataclass(klass)
        params = inspect.signature(init).parameters if handwritten else {}
        if name not in own and name not in params:
            continue
        try:
            lines, start = inspect.getsourcelines(klass)
            path = inspect.getsourcefile(klass) or ""
        except (OSError, TypeError):
            return ("?", 0)
        pattern = re.compile(rf"^\s+{re.escape(name)}\s*[:=]")
        for offset, line in enumerate(lines):
            if pattern.match(line):
                return (_site_path(path), start + offset)
        return (_site_path(path), start)
    return None


def _own_dataclass(klass: type) -> bool:
    """``klass`` declares its fields as a dataclass (transformers 5's config classes: the
    ``__init__`` huggingface_hub's ``dataclasses`` module writes); a class that writes its
    own ``__init__`` (vLLM's older config classes) declares its defaults there."""
    init = klass.__dict__.get("__init__")
    if init is None:
        init = klass.__init__
    code = getattr(init, "__code__", None)
    return code is None or Path(code.co_filename).name == "dataclasses.py"


def _class_defaults(cls: type) -> dict[str, Any]:
    """{field: class-level default} of a dataclass config, else of ``__init__``."""
    out: dict[str, Any] = {}
    if _own_dataclass(cls):
        for field in dataclasses.fields(cls):
            if field.default is not dataclasses.MISSING:
                out[field.name] = field.default
            elif field.default_factory is not dataclasses.MISSING:
                out[field.name] = dataclasses.MISSING  # a container: no scalar default
        return out
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        out[name] = param.default if param.default is not param.empty else dataclasses.MISSING
    return out


def _value(instance: Any, name: str) -> Any:
    """The instance's value of ``name`` (its own attribute; a property that raises, e.g.
    a per-layer attribute asked globally, is no scalar value)."""
    if name in instance.__dict__:
        return instance.__dict__[name]
    try:
        return getattr(instance, name)
    except Exception as exc:
        return f"<{type(exc).__name__}>"


def ask(model_type: str, cls: type, base: type) -> dict[str, Any]:
    """One model type's class, defaults and derived fields."""
    source = inspect.getsourcefile(cls) or ""
    row: dict[str, Any] = {"class": cls.__name__, "file": _site_path(source),
                           "attribute_map": dict(sorted(getattr(cls, "attribute_map", {}).items()))}
    try:
        instance = cls()
    except Exception as exc:  # the class needs arguments: no default instance
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return row
    defaults: dict[str, list[Any]] = {}
    derived: dict[str, Any] = {}
    for name, default in sorted(_class_defaults(cls).items()):
        where = _declared(cls, name, base)
        if where is None:
            continue  # a PreTrainedConfig field
        if default is dataclasses.MISSING or not (_scalar(default) or default is None):
            continue
        resolved = _value(instance, name)
        if resolved == default and type(resolved) is type(default):
            if default is not None:
                defaults[name] = [default, where[1]]
        elif _scalar(resolved) or resolved is None:
            derived[name] = {"class_default": default, "no_argument_value": resolved, "line": where[1]}
        else:
            derived[name] = {"class_default": default, "no_argument_value": repr(type(resolved).__name__),
                             "line": where[1]}
    row["defaults"] = defaults
    row["derived"] = derived
    return row


CONFIGS = ("tests/fixtures/processors/llava-hf--llava-1.5-7b-hf",
           "tests/fixtures/processors/llava-hf--llava-v1.6-mistral-7b-hf")
"""Published configs that leave the text model's sizes to the config class: vLLM reads
each, and its answer is what the parser must give."""


def read_config(folder: str) -> dict[str, Any]:
    """vLLM's reading of a config folder: ``get_config`` (AutoConfig with vLLM's classes),
    ``get_hf_text_config`` and the convertor ``ModelConfig.get_model_arch_config`` picks
    (vllm/config/model.py:1029-1040 in 0.33.0), asked for the text model's shape."""
    import vllm.config  # noqa: F401  (the convertor module imports through it)
    from vllm.transformers_utils.config import get_config, get_hf_text_config
    from vllm.transformers_utils.model_arch_config_convertor import (
        MODEL_ARCH_CONFIG_CONVERTORS,
        ModelArchConfigConvertorBase,
    )

    config = get_config(str(oracle.REPO / folder), trust_remote_code=False)
    text = get_hf_text_config(config)
    convertor = MODEL_ARCH_CONFIG_CONVERTORS.get(config.model_type, ModelArchConfigConvertorBase)(
        config, text)
    return {
        "model_type": config.model_type, "text_model_type": text.model_type,
        "text_config_class": type(text).__name__,
        "num_hidden_layers": convertor.get_num_hidden_layers(),
        "total_num_attention_heads": convertor.get_total_num_attention_heads(),
        "total_num_kv_heads": convertor.get_total_num_kv_heads(),
        "head_size": convertor.get_head_size(),
        "hidden_size": convertor.get_hidden_size(),
        "sliding_window": getattr(text, "sliding_window", None),
        "max_position_embeddings": getattr(text, "max_position_embeddings", None),
        "intermediate_size": getattr(text, "intermediate_size", None),
        "vocab_size": getattr(text, "vocab_size", None),
    }


def answer() -> dict[str, Any]:
    import transformers
    import vllm
    from transformers import PreTrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    rows: dict[str, Any] = {}
    for model_type in model_types():
        try:
            cls = (_CONFIG_REGISTRY[model_type] if model_type in _CONFIG_REGISTRY
                   else CONFIG_MAPPING[model_type])
        except Exception as exc:  # a class this interpreter cannot import: listed, not an answer
            rows[model_type] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        row = ask(model_type, cls, PreTrainedConfig)
        row["registry"] = "vllm" if model_type in _CONFIG_REGISTRY else "transformers"
        rows[model_type] = row
    return {"vllm_version": vllm.__version__, "transformers_version": transformers.__version__,
            "source": "vllm/transformers_utils/config.py:122 _CONFIG_REGISTRY, :206-219, "
                      ":395-450 (vLLM's class of a model type registered into AutoConfig); "
                      "transformers CONFIG_MAPPING otherwise",
            "model_types": rows,
            "configs": {folder: read_config(folder) for folder in CONFIGS}}


def data_from(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """``schemas/models/config_defaults.yaml`` from the answers of every recorded release:
    per model type the newest release's class, file, attribute map and, for each default
    every release that has the class agrees on, the value and its declaring line; a
    default the releases' classes disagree on (or one derives) is listed under
    ``differs`` with each release's value and not applied."""
    ordered = sorted(answers, key=lambda a: tuple(int(p) for p in a["vllm_version"].split(".")))
    newest = ordered[-1]
    out: dict[str, Any] = {}
    for model_type, row in sorted(newest["model_types"].items()):
        if "defaults" not in row:
            continue
        others = [(a["vllm_version"], a["model_types"].get(model_type, {})) for a in ordered]
        others = [(version, other) for version, other in others if "defaults" in other]
        applied: dict[str, Any] = {}
        lines: dict[str, int] = {}
        differs: dict[str, dict[str, Any]] = {}
        names = sorted({name for _, other in others for name in other["defaults"]})
        for name in names:
            values = {version: other["defaults"].get(name, [None])[0] for version, other in others}
            first = values[newest["vllm_version"]]
            if first is not None and all(v == first and type(v) is type(first) for v in values.values()):
                applied[name] = first
                lines[name] = row["defaults"][name][1]
            else:
                differs[name] = values
        out[model_type] = {
            "class": row["class"], "file": row["file"], "registry": row["registry"],
            "attribute_map": row["attribute_map"], "defaults": applied, "lines": lines,
            "derived": sorted(row["derived"]), "differs": differs,
        }
    return {
        "recorded": {a["vllm_version"]: a["transformers_version"] for a in ordered},
        "model_types": out,
    }


HEADER = f"""\
# The defaults the config class vLLM reads a model type's config.json through
# (AutoConfig: vLLM's _CONFIG_REGISTRY class, else transformers'; vllm/transformers_utils/
# config.py:122, :206-219, :395-450 in 0.33.0) gives a field the config omits.
# Written by tools/config_defaults_oracle.py --data from the recorded answers
# (tests/golden/oracle/vllm-*/{GOLDEN_NAME}); never edited by hand.
#   recorded   the vLLM releases asked and their oracle venvs' transformers
#   file/lines the declaring file and line of each default in the newest release's venv
#   defaults   applied where the config omits the field (every recorded release agrees)
#   derived    fields __post_init__ sets from others (no single default: not applied)
#   differs    defaults the releases' classes disagree on (each release's value; not applied)
# Checked by tests/unit/test_config_defaults.py.
"""


def write_data(data: dict[str, Any]) -> Path:
    import yaml

    DATA.write_text(HEADER + yaml.safe_dump(data, sort_keys=True, default_flow_style=None,
                                            width=100), encoding="utf-8")
    return DATA


def goldens() -> list[Path]:
    """Every recorded release's answer file."""
    return sorted(oracle.REPO.glob(f"tests/golden/oracle/vllm-*/{GOLDEN_NAME}"))


def read_answers() -> list[dict[str, Any]]:
    """Every recorded release's answer."""
    return [json.loads(gzip.decompress(path.read_bytes())) for path in goldens()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--out", type=Path, help="write this release's answer here")
    parser.add_argument("--data", action="store_true",
                        help=f"write {DATA.relative_to(oracle.REPO)} from every recorded answer "
                             "(any interpreter)")
    args = parser.parse_args(argv)
    if args.data:
        write_data(data_from(read_answers()))
        print(f"{DATA} from {len(goldens())} answers", file=sys.stderr)
        return 0
    if args.out is None:
        parser.error("--out or --data")
    result = answer()
    oracle.write_gz(args.out, json.dumps(json.loads(json.dumps(result)), indent=1, sort_keys=True) + "\n")
    failed = sorted(k for k, row in result["model_types"].items() if "defaults" not in row)
    print(f"{len(result['model_types'])} model types, {len(failed)} without a default instance: "
          f"{failed}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
