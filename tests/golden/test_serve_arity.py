"""The `vllm serve` flag table (serve-flags.yaml) against vLLM's own parser: how many
words each flag takes, as the newest asked release's `make_arg_parser` registers it
(tests/golden/oracle/vllm-X.Y.Z/serve-arity.json, asked by
`tools/serve_flags.py --arity`)."""

from __future__ import annotations

import json
from pathlib import Path

from selector.catalog import load_catalog
from selector.inputs.serve.flags import serve_flags

ORACLE = Path(__file__).resolve().parent / "oracle"


def _answer() -> tuple[str, dict[str, str]]:
    """(engine, vLLM's arities) of the newest release whose parser was asked."""
    catalog = load_catalog()
    asked = [catalog.engine(name) for name in catalog.engine_names
             if (ORACLE / catalog.engine_dirs[name].name / "serve-arity.json").is_file()]
    assert asked, "no serve-arity.json under tests/golden/oracle (tools/serve_flags.py --arity)"
    engine = asked[-1]
    answer = json.loads((ORACLE / engine.directory.name / "serve-arity.json").read_text())
    assert answer["vllm_version"] == str(engine.version)
    return engine.engine, answer["arity"]


def test_every_flag_takes_the_words_vllm_gives_it() -> None:
    engine, arity = _answer()
    table = serve_flags(load_catalog(), engine)
    wrong = {flag: (spec.takes, arity[flag]) for flag, spec in table.flags.items()
             if flag in arity and spec.takes != arity[flag]}
    assert not wrong, f"flag: (serve-flags.yaml, vLLM) {wrong}"


def test_every_alias_is_vllms() -> None:
    engine, arity = _answer()
    table = serve_flags(load_catalog(), engine)
    for alias, flag in table.aliases.items():
        assert flag in arity, flag
        # -O is rewritten by FlexibleArgumentParser (vllm/utils/argparse_utils.py:322-335)
        assert alias in arity or alias == "-O", alias
