#!/usr/bin/env python3
"""The engine flags of ``vllm serve`` per vLLM release, as vLLM's own parser states them.

Two modes:

* ``--ask``: run INSIDE a release's oracle environment; prints every option string that
  ``AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())`` registers (the engine flags
  that ``vllm serve`` accepts, those hidden from ``--help`` included) as JSON, with the
  oracle's mocks (vLLM believes it runs on a CUDA host):

      VENV/bin/python tools/serve_flags.py --ask --oracle ORACLE_DIR > flags-0.29.0.json

* ``--arity``: like ``--ask``, for the whole ``vllm serve`` parser (frontend flags
  included): how many words each flag takes.  The answer of the newest release is
  ``tests/golden/oracle/vllm-X.Y.Z/serve-arity.json``, which the flag table of
  ``serve-flags.yaml`` is compared with (``tests/golden/test_serve_arity.py``):

      VENV/bin/python tools/serve_flags.py --arity --oracle ORACLE_DIR -o serve-arity.json

* ``--write``: with the project; turns the per-release answers into the
  ``engine_flags`` section of each profile's ``serve-flags.yaml``
  (``schemas/engines/vllm-X.Y.Z/``): complete in the base profile, and in each newer
  profile the flags added (``true``) and removed (``null``) since the profile it
  extends (the mapping rule of docs/engine-profiles.md):

      python tools/serve_flags.py --write flags-0.25.1.json flags-0.26.0.json ...
      python tools/serve_flags.py --write flags-0.34.0.json   # one release, against its parent's profiles

``attn-select check -- vllm serve ...`` reads those files: a flag that the checked
release's parser does not have is the error vLLM gives for it
("unrecognized arguments").  Standard library (+ PyYAML for ``--write``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import oracle

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ROOT / "schemas" / "engines"
FILE = "serve-flags.yaml"
SECTION = "engine_flags:\n"


def ask(oracle_dir: Path | None = None) -> dict[str, Any]:
    orc = oracle.engine(oracle_dir=oracle_dir)
    from vllm.engine.arg_utils import AsyncEngineArgs

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # pragma: no cover - older layout
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]
    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
    # every option string the parser accepts, hidden ones included (0.33.0 keeps
    # --no-enable-x registered but out of help: argparse_utils.EnableDisableAction)
    flags = sorted(s for s in parser._option_string_actions
                   if s.startswith("--") and s != "--help")
    return {"vllm_version": orc.vllm_version, "flags": flags}


def _literal_values(annotation: Any) -> list[str]:
    """The values of a (nested) ``Literal`` in declaration order, as pydantic lists them."""
    import typing

    values: list[str] = []
    for arg in typing.get_args(annotation):
        values += _literal_values(arg) if typing.get_origin(arg) is typing.Literal else [arg]
    return values


def ask_configs(oracle_dir: Path | None = None) -> dict[str, Any]:
    """The JSON config flags' classes as vLLM declares them: the fields of
    ``SpeculativeConfig`` and ``AttentionConfig`` (pydantic dataclasses with
    ``extra="forbid"``, vllm/config/utils.py ``@config``: an unknown key is refused) and
    ``SpeculativeMethod``'s values in declaration order (vllm/config/speculative.py)."""
    import dataclasses

    orc = oracle.engine(oracle_dir=oracle_dir)
    from vllm.config.attention import AttentionConfig
    from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod
    from vllm.engine.arg_utils import AsyncEngineArgs

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # pragma: no cover - older layout
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]
    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
    choices = {option: [str(c) for c in action.choices]
               for option, action in sorted(parser._option_string_actions.items())
               if option.startswith("--") and action.choices is not None}
    return {"vllm_version": orc.vllm_version,
            "config_fields": {cls.__name__: [f.name for f in dataclasses.fields(cls)]
                              for cls in (AttentionConfig, SpeculativeConfig)},
            "config_literals": {cls.__name__: {f.name: values for f in dataclasses.fields(cls)
                                               if (values := _literal_field(f.type))}
                                for cls in (AttentionConfig,)},
            "flag_choices": choices,
            "speculative_methods": _literal_values(SpeculativeMethod)}


def _literal_field(annotation: Any) -> list[str]:
    """A field's ``Literal`` values (also inside ``Literal[...] | None``), as strings; empty
    for any other type, a union with another type (``IndexerKVDType | str`` takes any
    text) or an unresolved string annotation."""
    import typing

    if isinstance(annotation, str):
        return []
    if typing.get_origin(annotation) is typing.Literal:
        return [str(v) for v in _literal_values(annotation)]
    values: list[str] = []
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is typing.Literal:
            values += [str(v) for v in _literal_values(arg)]
        elif arg is not type(None):  # ``Literal[...] | str``: any text is taken
            return []
    return values


def _serve_parser() -> Any:
    """``vllm serve``'s parser as ``vllm`` builds it (vllm/entrypoints/cli/main.py: a
    FlexibleArgumentParser with one subparser per command; the serve subparser is
    make_arg_parser's, vllm/entrypoints/cli/serve.py ``subparser_init``)."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    for module in ("common", "launchers", "openai"):
        try:
            make_arg_parser = importlib.import_module(
                f"vllm.entrypoints.{module}.cli_args").make_arg_parser
            break
        except ModuleNotFoundError as exc:
            if not f"vllm.entrypoints.{module}.cli_args".startswith(exc.name or "\0"):
                raise
    else:  # pragma: no cover - a layout not seen yet
        raise SystemExit("make_arg_parser not found")
    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    make_arg_parser(subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]"))
    return parser


def parse_lines(oracle_dir: Path | None, lines: list[list[str]]) -> dict[str, Any]:
    """vLLM's answer to each ``vllm serve`` line (the words after ``vllm serve``): the
    error its parser prints (the text after ``error: ``, argparse exits 2), or the
    settings it parsed that differ from the defaults; for a parsed line with
    ``--speculative-config``, the ``SpeculativeConfig`` validation error (pydantic's, raised
    when the engine is created: EngineArgs.create_speculative_config,
    vllm/engine/arg_utils.py) or null."""
    import contextlib
    import io

    orc = oracle.engine(oracle_dir=oracle_dir)
    from pydantic import ValidationError
    from vllm.config.speculative import SpeculativeConfig

    parser = _serve_parser()
    defaults = vars(parser.parse_args(["serve", "m"]))
    answers = []
    for words in lines:
        answer: dict[str, Any] = {"argv": words}
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                namespace = vars(parser.parse_args(["serve", *words]))
        except SystemExit as exc:
            answer["exit"] = exc.code
            answer["error"] = stderr.getvalue().strip().split("error: ", 1)[-1]
            answers.append(answer)
            continue
        answer["error"] = None
        answer["parsed"] = {k: repr(v) for k, v in sorted(namespace.items())
                            if k != "model_tag" and defaults.get(k, object()) != v}
        speculative = namespace.get("speculative_config")
        if speculative is not None:
            try:  # the call of EngineArgs.create_speculative_config
                SpeculativeConfig(**speculative)
                answer["speculative_error"] = None
            except ValidationError as exc:  # the fields' validation
                answer["speculative_error"] = str(exc)
                answer["speculative_error_types"] = sorted({e["type"] for e in exc.errors()})
            except Exception:  # validated; __post_init__ needs the target model
                answer["speculative_error"] = None
        answers.append(answer)
    return {"vllm_version": orc.vllm_version, "python": sys.version.split()[0],
            "answers": answers}


def arity(oracle_dir: Path | None = None) -> dict[str, Any]:
    """How many words each option of the whole ``vllm serve`` parser takes (the engine
    flags and the OpenAI frontend's: ``make_arg_parser``, vllm/entrypoints/common/cli_args.py;
    vllm/entrypoints/launchers/cli_args.py in 0.29-0.32, vllm/entrypoints/openai/cli_args.py
    before): ``switch`` (nargs 0), ``value``
    (exactly one), ``optional`` (nargs '?') or ``list`` (nargs '+' / '*')."""
    orc = oracle.engine(oracle_dir=oracle_dir)
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    # where make_arg_parser lives: common (0.33), launchers (0.29-0.32), openai (0.25.1-0.28)
    for module in ("common", "launchers", "openai"):
        try:
            make_arg_parser = importlib.import_module(
                f"vllm.entrypoints.{module}.cli_args").make_arg_parser
            break
        except ModuleNotFoundError as exc:  # that module (or its package) only
            if not f"vllm.entrypoints.{module}.cli_args".startswith(exc.name or "\0"):
                raise
    else:  # pragma: no cover - a layout not seen yet
        raise SystemExit("make_arg_parser not found in vllm.entrypoints.{common,launchers,openai}.cli_args")
    parser = make_arg_parser(FlexibleArgumentParser())
    kinds = {0: "switch", None: "value", "?": "optional", "+": "list", "*": "list"}
    table = {option: kinds.get(action.nargs, str(action.nargs))
             for option, action in sorted(parser._option_string_actions.items())
             if option not in ("-h", "--help")}
    return {"vllm_version": orc.vllm_version, "arity": table}


def _extends(version: str, engines: Path = ENGINES) -> str | None:
    import yaml

    profile = yaml.safe_load((engines / f"vllm-{version}" / "profile.yaml").read_text())
    parent = profile.get("extends")
    return str(parent).split("==", 1)[1] if parent else None


def profile_flags(version: str, engines: Path = ENGINES, section: str = "engine_flags") -> set[str]:
    """The engine flags the profiles state for ``version``: its chain's ``engine_flags``
    sections (or another mapping ``section``) applied oldest first (true adds a flag, null
    removes it)."""
    import yaml

    chain = [version]
    while (parent := _extends(chain[-1], engines)) is not None:
        chain.append(parent)
    flags: set[str] = set()
    for each in reversed(chain):
        path = engines / f"vllm-{each}" / FILE
        document = yaml.safe_load(path.read_text()) if path.is_file() else None
        for flag, value in ((document or {}).get(section) or {}).items():
            if value:
                flags.add(flag)
            else:
                flags.discard(flag)
    return flags


def _after_section(text: str) -> str:
    """What follows the ``engine_flags`` section of ``text`` (the parser sections of
    ``write_parser``), or nothing."""
    if SECTION not in text:
        return ""
    rest = text[text.index(SECTION) + len(SECTION):].splitlines(keepends=True)
    for number, line in enumerate(rest):
        if not line.startswith("  "):
            return "".join(rest[number:])
    return ""


def write(answers: list[dict[str, Any]], engines: Path = ENGINES) -> dict[Path, str]:
    """Each profile's ``serve-flags.yaml`` with its ``engine_flags`` section rewritten
    (what comes before and after it is kept). A release whose
    parent's answer is not given is compared with the flags the parent's profiles state
    (``profile_flags``): one new release is written from its own answer alone."""
    flags_of = {answer["vllm_version"]: set(answer["flags"]) for answer in answers}
    files: dict[Path, str] = {}
    for version, flags in flags_of.items():
        parent = _extends(version, engines)
        if parent is None:
            entries: dict[str, bool | None] = dict.fromkeys(sorted(flags), True)
        else:
            previous = flags_of[parent] if parent in flags_of else profile_flags(parent, engines)
            entries = {**dict.fromkeys(sorted(flags - previous), True),
                       **dict.fromkeys(sorted(previous - flags))}
        path = engines / f"vllm-{version}" / FILE
        text = path.read_text() if path.is_file() else (
            "# The `vllm serve` engine flags this release added (true) and removed (null) since the profile\n"
            "# it extends: the option strings of AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())\n"
            "# (vllm/engine/arg_utils.py), asked of the release by tools/serve_flags.py --ask.\n")
        head = text[:text.index(SECTION)] if SECTION in text else text
        tail = _after_section(text)
        if not entries and parent is not None:
            kept = head + tail.lstrip("\n")
            if kept.strip() and not kept.lstrip().startswith("# The `vllm serve` engine flags"):
                files[path] = kept
            elif path.is_file():
                files[path] = ""  # nothing changed: the file goes
            continue
        body = "".join(f"  {flag}: {'true' if value else 'null'}\n" for flag, value in entries.items())
        files[path] = head + SECTION + body + tail
    return files


PARSER_SECTIONS = ("frontend_flags", "speculative_methods", "config_fields", "config_literals",
                   "flag_choices")
"""The sections ``--write-parser`` writes, in this order, after ``engine_flags``."""


def _without_sections(text: str, names: tuple[str, ...]) -> str:
    """``text`` without the top-level ``NAME:`` sections and the comments before them (a
    section runs to the next top-level key or the end)."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        top = line[:1] not in (" ", "#", "\n", "")
        if top:
            skipping = line.split(":", 1)[0] in names
            while skipping and out and out[-1][:1] in ("#", "\n"):
                out.pop()  # the section's own comment
        if not skipping:
            out.append(line)
    return "".join(out)


def write_parser(arity_answer: dict[str, Any], configs_answer: dict[str, Any],
                 engines: Path = ENGINES) -> dict[Path, str]:
    """The release's ``serve-flags.yaml`` with the sections ``vllm serve``'s own parser
    states beyond the engine flags: ``frontend_flags`` (every other option string of the
    whole parser, the OpenAI frontend's and the short spellings, from the ``--arity``
    answer; added (its arity) and removed (null) since the profile it extends),
    ``speculative_methods`` and ``config_fields`` (the ``--configs`` answer, complete)."""
    import yaml

    version = arity_answer["vllm_version"]
    if configs_answer["vllm_version"] != version:
        raise SystemExit(f"--arity answer of {version}, --configs answer of "
                         f"{configs_answer['vllm_version']}")
    engine = profile_flags(version, engines)
    frontend = {flag: kind for flag, kind in arity_answer["arity"].items() if flag not in engine}
    parent = _extends(version, engines)
    previous = profile_flags(parent, engines, "frontend_flags") if parent else set()
    entries: dict[str, str | None] = {**{f: frontend[f] for f in sorted(set(frontend) - previous)},
                                      **dict.fromkeys(sorted(previous - set(frontend)))}
    path = engines / f"vllm-{version}" / FILE
    text = _without_sections(path.read_text(), PARSER_SECTIONS).rstrip("\n") + "\n"
    text += ("\n# frontend_flags: the other option strings of `vllm serve`'s parser (the frontend's,\n"
             "#   make_arg_parser, and the short spellings), with the words each takes; with\n"
             "#   engine_flags, every flag the release accepts (argparse also takes a unique prefix of\n"
             "#   one: vLLM's FlexibleArgumentParser keeps allow_abbrev); asked by\n"
             "#   tools/serve_flags.py --arity.\n")
    text += yaml.safe_dump({"frontend_flags": entries}, sort_keys=False, width=100)
    text += ("\n# speculative_methods: SpeculativeConfig.method's values in declaration order\n"
             "#   (SpeculativeMethod, vllm/config/speculative.py); config_fields: the fields of the\n"
             "#   JSON config classes, pydantic dataclasses that refuse any other key\n"
             "#   (vllm/config/utils.py @config, extra=\"forbid\"); asked by\n"
             "#   tools/serve_flags.py --configs.\n")
    text += _configs_text(configs_answer)
    return {path: text}


CONFIG_SECTIONS = ("speculative_methods", "config_fields", "config_literals", "flag_choices")
"""The sections a ``--configs`` answer states (``--write-configs`` writes them alone)."""


def _configs_text(configs_answer: dict[str, Any]) -> str:
    import yaml

    text = ("\n# speculative_methods: SpeculativeConfig.method's values in declaration order\n"
            "#   (SpeculativeMethod, vllm/config/speculative.py); config_fields: the fields of the\n"
            "#   JSON config classes, pydantic dataclasses that refuse any other key\n"
            "#   (vllm/config/utils.py @config, extra=\"forbid\"); config_literals: their fields\n"
            "#   typed as a Literal, with its values (pydantic's literal_error for another);\n"
            "#   flag_choices: the engine flags argparse restricts to choices (\"invalid choice\");\n"
            "#   asked by tools/serve_flags.py --configs.\n")
    text += yaml.safe_dump({key: configs_answer[key] for key in CONFIG_SECTIONS
                            if key in configs_answer},
                           sort_keys=False, width=100, default_flow_style=None)
    return text


def write_configs(answers: list[dict[str, Any]], engines: Path = ENGINES) -> dict[Path, str]:
    """Each release's ``serve-flags.yaml`` with the sections of its ``--configs`` answer
    (replaced whole; the file is made for a release that has none)."""
    out: dict[Path, str] = {}
    for answer in answers:
        path = engines / f"vllm-{answer['vllm_version']}" / FILE
        text = _without_sections(path.read_text(), CONFIG_SECTIONS) if path.is_file() else (
            f"# vLLM {answer['vllm_version']}: its parser's JSON config classes (the rest of the "
            "flag table is inherited).\n")
        out[path] = text.rstrip("\n") + "\n" + _configs_text(answer)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--ask", action="store_true", help="ask the vLLM of this interpreter")
    mode.add_argument("--write", nargs="+", type=Path, help="--ask answers to merge")
    mode.add_argument("--write-parser", nargs=2, type=Path, metavar=("ARITY", "CONFIGS"),
                      help="an --arity and a --configs answer of one release: write its "
                           "frontend_flags, speculative_methods and config_fields")
    mode.add_argument("--write-configs", nargs="+", type=Path,
                      help="--configs answers: write each release's speculative_methods, "
                           "config_fields, config_literals and flag_choices")
    mode.add_argument("--configs", action="store_true",
                      help="ask the vLLM of this interpreter for its JSON config classes' fields "
                           "and speculative methods")
    mode.add_argument("--parse", type=Path,
                      help="a JSON list of `vllm serve` lines (words after `vllm serve`): ask "
                           "the vLLM of this interpreter's parser for its answer to each")
    mode.add_argument("--arity", action="store_true",
                      help="ask the vLLM of this interpreter how many words each flag of its "
                           "whole `vllm serve` parser takes (needs the frontend's packages)")
    ap.add_argument("--oracle", type=Path, help="the oracle directory (with --ask, --arity, "
                    "--configs, --parse; default $ORACLE_DIR, else ../shared/oracle)")
    ap.add_argument("-o", "--output", type=Path,
                    help="where to write (--ask: default stdout; --write: the engines folder)")
    a = ap.parse_args(argv)
    if a.ask or a.arity or a.configs or a.parse:
        if a.parse:
            answer = parse_lines(a.oracle, json.loads(a.parse.read_text()))
        else:
            answer = ask(a.oracle) if a.ask else arity(a.oracle) if a.arity else ask_configs(a.oracle)
        text = json.dumps(answer, indent=None if a.ask else 1) + "\n"
        if a.output:
            a.output.write_text(text)
        else:
            sys.stdout.write(text)
        return 0
    if a.write_configs:
        configs = [json.loads(p.read_text()) for p in a.write_configs]
        for path, text in write_configs(configs, a.output or ENGINES).items():
            path.write_text(text)
        return 0
    if a.write_parser:
        arity_answer, configs_answer = (json.loads(p.read_text()) for p in a.write_parser)
        for path, text in write_parser(arity_answer, configs_answer, a.output or ENGINES).items():
            path.write_text(text)
        return 0
    answers = [json.loads(p.read_text()) for p in a.write]
    for path, text in write(answers, a.output or ENGINES).items():
        if text:
            path.write_text(text)
        else:
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
