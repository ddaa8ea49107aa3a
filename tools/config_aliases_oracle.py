#!/usr/bin/env python3
"""Ask vLLM itself which Hugging Face config fields it reads for a model's shape.

``schemas/models/families.yaml`` states the fields vLLM reads for the total KV-head
count (``kv_heads_fields``, first present wins) and, per family, ``aliases`` (other
names a config may give a field). This tool asks each release's own, unmodified code,
behaviourally, in that release's oracle interpreter (CPU, vLLM installed):

* ``total_num_kv_heads``: a ``transformers.PretrainedConfig`` that records every
  attribute vLLM asks for is handed to the convertor vLLM picks for a model type
  without its own convertor (``MODEL_ARCH_CONFIG_CONVERTORS.get(model_type,
  ModelArchConfigConvertorBase)``, as ``ModelConfig.get_model_arch_config`` does);
  ``get_total_num_kv_heads()`` reveals the fields it asks for, in order. The
  precedence is then derived by elimination: every candidate (the asked fields plus
  ours) set to a distinct value, the field whose value vLLM returns is the first,
  drop it and ask again, until vLLM falls back to ``num_attention_heads``. A field
  present with the value null is tried once more (``null_counts_as_present``).
* ``fields``: the same recording config for ``get_num_hidden_layers``,
  ``get_total_num_attention_heads``, ``get_hidden_size``, ``get_head_size`` and
  ``derive_max_model_len_and_key`` (the names vLLM itself asks for; for the maximum
  length its rule: the smallest of the fields present).
* ``config_classes``: vLLM reads ``num_hidden_layers`` and the like by their canonical
  names only; another spelling reaches it through the model type's config class
  (transformers' ``attribute_map``, or a class's ``__init__``). For every alias
  claim given (``--claims``), every config class of the release (transformers'
  ``CONFIG_MAPPING`` and vLLM's own ``_CONFIG_REGISTRY``) is built with the alias set
  to a distinct value and handed to vLLM's getter; the model types whose class made
  vLLM return that value confirm the claim.

Each answer carries the vLLM file and lines of the function that gave it.

Sub-commands::

    # one release, in its oracle interpreter:
    /work/venvs/oracle-0.33.0/bin/python tools/config_aliases_oracle.py ask --claims CLAIMS_JSON
    # every release given, one process each, one JSON file per release:
    python tools/config_aliases_oracle.py all --golden tests/golden/oracle/releases \\
        0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0

``all`` reads the claims from ``schemas/models/families.yaml`` (needs PyYAML) and runs
``/work/venvs/oracle-<version>/bin/python`` (``--venvs`` to change the folder).
``tests/unit/test_config_aliases.py`` compares the data with the committed answers.
The asking half uses only the standard library, transformers and vLLM.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

import oracle

GOLDEN_NAME = "config_aliases.json"
# a config class that fetches a sub-config from the Hub (EdgeTAM) fails at once offline
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# a model type with no convertor of its own in any release: vLLM's generic path
GENERIC_MODEL_TYPE = "llama"
NUM_HEADS = 97  # num_attention_heads of the probe config: vLLM's KV-head fallback
ALIAS_VALUE = 7919  # a value no config class has as a default
MAX_LEN_VALUE = 3  # smaller than any class's default maximum length
GETTERS = {
    "num_hidden_layers": "get_num_hidden_layers",
    "num_attention_heads": "get_total_num_attention_heads",
    "hidden_size": "get_hidden_size",
    "head_dim": "get_head_size",
    "max_position_embeddings": "derive_max_model_len_and_key",
}


# ----------------------------------------------------------------------------- asking half
def _site_relative(path: str) -> str:
    marker = "site-packages/"
    return path.split(marker, 1)[1] if marker in path else path


def _lines_of(obj: Any) -> str:
    lines, start = inspect.getsourcelines(obj)
    return f"{_site_relative(inspect.getsourcefile(obj) or '?')}:{start}-{start + len(lines) - 1}"


def _dict_entry_lines(module: Any, variable: str, key: str) -> str | None:
    """File and lines of ``variable[key]`` in a module (only to cite it)."""
    path = inspect.getsourcefile(module)
    if path is None:
        return None
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        target = (node.targets[0] if isinstance(node, ast.Assign) else
                  node.target if isinstance(node, ast.AnnAssign) else None)
        if not (isinstance(target, ast.Name) and target.id == variable):
            continue
        value = node.value
        if not isinstance(value, ast.Dict):
            continue
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == key:
                return f"{_site_relative(path)}:{k.lineno}-{v.end_lineno}"
    return None


def _recording_config_class() -> Any:
    from transformers import PretrainedConfig

    class Recording(PretrainedConfig):  # type: ignore[misc, valid-type]
        model_type = GENERIC_MODEL_TYPE

        def __getattribute__(self, name: str) -> Any:
            log = object.__getattribute__(self, "__dict__").get("_asked_log")
            if log is not None and not name.startswith("_"):
                log.append(name)
            return super().__getattribute__(name)

    return Recording


def _ask(config: Any, getter: str, modules: tuple[Any, Any]) -> tuple[Any, list[str]]:
    """vLLM's answer and the attributes its getter asked the config for, in
    first-asked order (the convertor is chosen before the recording starts)."""
    convertor = _convertor(config, modules)
    config.__dict__["_asked_log"] = log = []
    try:
        value = getattr(convertor, getter)()
    finally:
        config.__dict__["_asked_log"] = None
    asked: list[str] = []
    for name in log:
        if name not in asked and not callable(getattr(type(config), name, None)):
            asked.append(name)
    return value, asked


def _convertor(config: Any, modules: Any) -> Any:
    convertors, base = modules
    klass = convertors.get(config.model_type, base)
    return klass(config, config)


def _generic_modules() -> tuple[Any, Any, Any]:
    import vllm.config  # noqa: F401  (vLLM imports its config package first)
    from vllm.transformers_utils import model_arch_config_convertor as convertor_module

    return (convertor_module, convertor_module.MODEL_ARCH_CONFIG_CONVERTORS,
            convertor_module.ModelArchConfigConvertorBase)


def _kv_heads(candidates: list[str]) -> dict[str, Any]:
    _, convertors, base = _generic_modules()
    recording = _recording_config_class()
    config = recording(num_attention_heads=NUM_HEADS)
    klass = convertors.get(config.model_type, base)
    fallback, asked = _ask(config, "get_total_num_kv_heads", (convertors, base))
    pool = list(dict.fromkeys([*asked, *candidates]))
    pool = [name for name in pool if name != "num_attention_heads"]
    values = {name: 1000 + i for i, name in enumerate(pool)}
    precedence: list[str] = []
    left = dict(values)
    while True:
        config = recording(num_attention_heads=NUM_HEADS, **left)
        answer = _convertor(config, (convertors, base)).get_total_num_kv_heads()
        if answer == NUM_HEADS:
            break
        field = next(name for name, value in left.items() if value == answer)
        precedence.append(field)
        del left[field]
    first = precedence[0] if precedence else None
    null_present = None
    if first is not None:
        config = recording(num_attention_heads=NUM_HEADS, **{first: None},
                           **{name: values[name] for name in precedence[1:]})
        null_present = _convertor(config, (convertors, base)).get_total_num_kv_heads() is None
    source = _lines_of(klass.get_total_num_kv_heads)
    names_source = None
    if "CONFIG_FIELD_ALIASES" in klass.get_total_num_kv_heads.__code__.co_names:
        config_module = sys.modules["vllm.transformers_utils.config"]
        names_source = _dict_entry_lines(config_module, "CONFIG_FIELD_ALIASES", "total_num_kv_heads")
    return {
        "function": f"{klass.__module__}.{klass.__qualname__}.get_total_num_kv_heads",
        "source": source,
        "names_source": names_source or source,
        "asked": asked,
        "precedence": precedence,
        "fallback": "num_attention_heads" if fallback == NUM_HEADS else repr(fallback),
        "not_read": sorted(set(candidates) - set(precedence)),
        "null_counts_as_present": null_present,
        "own_convertors": sorted(
            name for name, conv in convertors.items()
            if conv.get_total_num_kv_heads is not base.get_total_num_kv_heads),
    }


def _fields() -> dict[str, Any]:
    _, convertors, base = _generic_modules()
    recording = _recording_config_class()
    out: dict[str, Any] = {}
    for field, getter in GETTERS.items():
        config = recording()
        _, asked = _ask(config, getter, (convertors, base))
        entry: dict[str, Any] = {"getter": getter, "source": _lines_of(getattr(base, getter)),
                                 "asked": asked}
        if field == "max_position_embeddings":
            keys = [name for name in asked if name != "model_max_length"] or asked
            values = {name: 500 + 10 * i for i, name in enumerate(reversed(keys))}
            config = recording(**values)
            length, key = _convertor(config, (convertors, base)).derive_max_model_len_and_key()
            smallest = min(values, key=values.__getitem__)
            entry["rule"] = "smallest" if (length, key) == (values[smallest], smallest) else {
                "answer": [length, key], "given": values}
        out[field] = entry
    return out


def _config_classes() -> dict[str, Any]:
    import vllm.config  # noqa: F401
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    classes: dict[str, Any] = {}
    failed: list[str] = []
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        try:
            classes[model_type] = CONFIG_MAPPING[model_type]
        except Exception:  # a class transformers cannot import here
            failed.append(model_type)
    for model_type in sorted(_CONFIG_REGISTRY):
        try:
            classes[model_type] = _CONFIG_REGISTRY[model_type]  # vLLM's own class wins
        except Exception:
            failed.append(model_type)
    return {"classes": classes, "unimportable": sorted(set(failed) - set(classes))}


def _build(klass: Any, alias: str, value: int) -> Any:
    try:
        return klass(**{alias: value})
    except Exception:  # a class whose __init__ refuses the keyword
        config = klass()
        setattr(config, alias, value)
        return config


def _confirmations(claims: dict[str, list[str]], read: dict[str, Any]) -> dict[str, Any]:
    import logging

    logging.disable(logging.WARNING)
    _, _, base = _generic_modules()
    found = _config_classes()
    answers: dict[str, Any] = {}
    unbuildable: set[str] = set()
    for field, aliases in sorted(claims.items()):
        getter = GETTERS.get(field)
        if getter is None:
            continue
        per_alias: dict[str, list[str]] = {}
        for alias in aliases:
            if alias in read[field]["asked"]:
                continue  # vLLM reads it itself: no config class needed
            value = MAX_LEN_VALUE if field == "max_position_embeddings" else ALIAS_VALUE
            hits: list[str] = []
            for model_type, klass in found["classes"].items():
                try:
                    config = _build(klass, alias, value)
                    answer = getattr(base(config, config), getter)()
                except Exception:  # no default construction: not asked
                    unbuildable.add(model_type)
                    continue
                if field == "max_position_embeddings":
                    answer = answer[0]
                if answer == value:
                    hits.append(model_type)
            per_alias[alias] = hits
        answers[field] = {"getter": getter, "model_types": per_alias}
    return {"aliases": answers, "classes_asked": len(found["classes"]),
            "unbuildable": sorted(unbuildable), "unimportable": found["unimportable"]}


def ask(claims: dict[str, Any]) -> dict[str, Any]:
    import transformers
    import vllm

    fields = _fields()
    return {
        "vllm_version": vllm.__version__,
        "transformers_version": transformers.__version__,
        "total_num_kv_heads": _kv_heads(list(claims["kv_heads_fields"])),
        "fields": fields,
        "config_classes": _confirmations(claims["aliases"], fields),
    }


# ----------------------------------------------------------------------------- driving half
def claims_from_families(path: Path) -> dict[str, Any]:
    """The candidate names: every kv_heads_fields entry and every alias claim."""
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    aliases: dict[str, list[str]] = {}
    for family in data["families"].values():
        for field, names in (family.get("aliases") or {}).items():
            aliases.setdefault(field, [])
            aliases[field] += [n for n in names if n not in aliases[field]]
    return {"kv_heads_fields": list(data["kv_heads_fields"]), "aliases": aliases}


def answer_offline(claims: dict[str, Any]) -> dict[str, Any]:
    """``ask(claims)`` with the Hub offline and anything a config class prints on stderr."""
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    with contextlib.redirect_stdout(sys.stderr):  # config classes that print
        return ask(claims)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("ask", help="one release (run with its oracle interpreter)")
    one.add_argument("--claims", required=True, help="JSON: {kv_heads_fields, aliases}")
    one.add_argument("-o", "--out", help="write the answer here (default: print it)")
    every = sub.add_parser("all", help="every release given, one process each")
    every.add_argument("versions", nargs="+")
    every.add_argument("--golden", type=Path, required=True,
                       help="folder of vllm-<version>/ golden folders")
    every.add_argument("--venvs", type=Path, default=Path("/work/venvs"),
                       help="folder of oracle-<version>/ interpreters")
    every.add_argument("--families", type=Path,
                       default=Path(__file__).resolve().parents[1] / "schemas/models/families.yaml")
    args = parser.parse_args(argv)
    if args.command == "ask":
        answer = answer_offline(json.loads(args.claims))
        if args.out:
            oracle.write_json(args.out, answer)
        else:
            json.dump(answer, sys.stdout, indent=1, sort_keys=True)
            sys.stdout.write("\n")
        return 0
    claims = claims_from_families(args.families)
    for version in args.versions:
        python = args.venvs / f"oracle-{version}" / "bin" / "python"
        try:
            answer = oracle.run_fresh(__file__, "answer_offline", {"claims": claims},
                                      python=python, env=OFFLINE)
        except oracle.FreshProcessError as exc:
            sys.stderr.write(f"{exc}\n")
            return 1
        if answer["vllm_version"] != version:
            sys.stderr.write(f"{python} has vLLM {answer['vllm_version']}, not {version}\n")
            return 1
        target = oracle.write_json(args.golden / f"vllm-{version}" / GOLDEN_NAME, answer)
        print(f"{version}: {answer['total_num_kv_heads']['precedence']} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
