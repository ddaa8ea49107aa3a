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

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ROOT / "schemas" / "engines"
FILE = "serve-flags.yaml"
SECTION = "engine_flags:\n"


def ask(oracle_dir: Path) -> dict[str, Any]:
    sys.path.insert(0, str(oracle_dir))
    import oracle as oracle_mod  # type: ignore[import-not-found]

    orc = oracle_mod.Oracle(kv_cache=False)
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


def arity(oracle_dir: Path) -> dict[str, Any]:
    """How many words each option of the whole ``vllm serve`` parser takes (the engine
    flags and the OpenAI frontend's: ``make_arg_parser``, vllm/entrypoints/common/cli_args.py;
    vllm/entrypoints/launchers/cli_args.py in 0.29-0.32, vllm/entrypoints/openai/cli_args.py
    before): ``switch`` (nargs 0), ``value``
    (exactly one), ``optional`` (nargs '?') or ``list`` (nargs '+' / '*')."""
    sys.path.insert(0, str(oracle_dir))
    import oracle as oracle_mod

    orc = oracle_mod.Oracle(kv_cache=False)
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


def profile_flags(version: str, engines: Path = ENGINES) -> set[str]:
    """The engine flags the profiles state for ``version``: its chain's ``engine_flags``
    sections applied oldest first (true adds a flag, null removes it)."""
    import yaml

    chain = [version]
    while (parent := _extends(chain[-1], engines)) is not None:
        chain.append(parent)
    flags: set[str] = set()
    for each in reversed(chain):
        path = engines / f"vllm-{each}" / FILE
        document = yaml.safe_load(path.read_text()) if path.is_file() else None
        for flag, value in ((document or {}).get("engine_flags") or {}).items():
            if value:
                flags.add(flag)
            else:
                flags.discard(flag)
    return flags


def write(answers: list[dict[str, Any]], engines: Path = ENGINES) -> dict[Path, str]:
    """Each profile's ``serve-flags.yaml`` with its ``engine_flags`` section rewritten
    (the section is the file's last; what comes before it is kept). A release whose
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
        if not entries and parent is not None:
            if head.strip() and not head.lstrip().startswith("# The `vllm serve` engine flags"):
                files[path] = head
            elif path.is_file():
                files[path] = ""  # nothing changed: the file goes
            continue
        body = "".join(f"  {flag}: {'true' if value else 'null'}\n" for flag, value in entries.items())
        files[path] = head + SECTION + body
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--ask", action="store_true", help="ask the vLLM of this interpreter")
    mode.add_argument("--write", nargs="+", type=Path, help="--ask answers to merge")
    mode.add_argument("--arity", action="store_true",
                      help="ask the vLLM of this interpreter how many words each flag of its "
                           "whole `vllm serve` parser takes (needs the frontend's packages)")
    ap.add_argument("--oracle", type=Path, help="the oracle directory (with --ask)")
    ap.add_argument("-o", "--output", type=Path,
                    help="where to write (--ask: default stdout; --write: the engines folder)")
    a = ap.parse_args(argv)
    if a.ask or a.arity:
        if a.oracle is None:
            ap.error("--ask and --arity need --oracle")
        text = (json.dumps(ask(a.oracle)) if a.ask else json.dumps(arity(a.oracle), indent=1)) + "\n"
        if a.output:
            a.output.write_text(text)
        else:
            sys.stdout.write(text)
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
