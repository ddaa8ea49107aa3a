#!/usr/bin/env python3
"""The engine flags of ``vllm serve`` per vLLM release, as vLLM's own parser states them.

Two modes:

* ``--ask``: run INSIDE a release's oracle environment; prints every option string that
  ``AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())`` registers (the engine flags
  that ``vllm serve`` accepts, those hidden from ``--help`` included) as JSON, with the
  oracle's mocks (vLLM believes it runs on a CUDA host):

      VENV/bin/python tools/serve_flags.py --ask --oracle ORACLE_DIR > flags-0.29.0.json

* ``--write``: with the project; turns the per-release answers into
  ``schemas/vllm-serve-flags.yaml`` (the oldest release complete, each newer one as
  ``added`` / ``removed`` from the previous one):

      python tools/serve_flags.py --write flags-0.25.1.json flags-0.26.0.json ...

``attn-select check -- vllm serve ...`` reads that file: a flag that the checked
release's parser does not have is the error vLLM gives for it
("unrecognized arguments").  Standard library (+ PyYAML for ``--write``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "schemas" / "vllm-serve-flags.yaml"


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


def write(answers: list[dict[str, Any]]) -> str:
    import yaml

    def key(answer: dict[str, Any]) -> tuple[int, ...]:
        return tuple(int(p) for p in answer["vllm_version"].split("."))

    answers = sorted(answers, key=key)
    releases: dict[str, Any] = {}
    previous: set[str] | None = None
    for answer in answers:
        flags = set(answer["flags"])
        if previous is None:
            releases[answer["vllm_version"]] = {"flags": sorted(flags)}
        else:
            releases[answer["vllm_version"]] = {"added": sorted(flags - previous),
                                                "removed": sorted(previous - flags)}
        previous = flags
    head = ("# Engine flags of `vllm serve` per vLLM release: the option strings of\n"
            "# AsyncEngineArgs.add_cli_args(FlexibleArgumentParser()) (vllm/engine/arg_utils.py),\n"
            "# asked of each release by tools/serve_flags.py --ask; the oldest release is\n"
            "# complete, each newer one states what it added and removed.  A flag a release\n"
            "# lacks is rejected by its parser ('unrecognized arguments').\n")
    return head + yaml.safe_dump({"releases": releases}, sort_keys=False, width=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--ask", action="store_true", help="ask the vLLM of this interpreter")
    mode.add_argument("--write", nargs="+", type=Path, help="--ask answers to merge")
    ap.add_argument("--oracle", type=Path, help="the oracle directory (with --ask)")
    ap.add_argument("-o", "--output", type=Path, help="where to write (default: stdout / DATA)")
    a = ap.parse_args(argv)
    if a.ask:
        if a.oracle is None:
            ap.error("--ask needs --oracle")
        text = json.dumps(ask(a.oracle)) + "\n"
        if a.output:
            a.output.write_text(text)
        else:
            sys.stdout.write(text)
        return 0
    answers = [json.loads(p.read_text()) for p in a.write]
    (a.output or DATA).write_text(write(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
