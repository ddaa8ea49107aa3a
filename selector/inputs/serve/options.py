"""Which option of vLLM's ``vllm serve`` parser a flag word is, as argparse decides it.

vLLM's ``FlexibleArgumentParser`` (vllm/utils/argparse_utils.py:156) keeps argparse's
default ``allow_abbrev=True``: a word that is a unique prefix of one option string is that
option (``--max-model 8192`` is ``--max-model-len``), a prefix of several is refused
("ambiguous option: ... could match ..."), and a word matching none is left over and
refused by the ``vllm`` parser ("unrecognized arguments: ...").  :func:`resolve_option`
is argparse's ``_parse_optional`` / ``_get_option_tuples`` over the release's option
strings (``ServeFlags.parser_flags``); vLLM's own answers to typed lines are
``tests/golden/oracle/vllm-0.33.0/serve-parse.json`` (``tools/serve_flags.py --parse``).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from dataclasses import dataclass

__all__ = ["Resolved", "did_you_mean", "resolve_option"]


@dataclass(frozen=True)
class Resolved:
    """How argparse reads one flag word."""

    option: str | None
    """The option string it is (``None``: none, or several)."""
    explicit: str | None = None
    """A value given in the word itself (``--flag=value``, ``-q8``)."""
    matches: tuple[str, ...] = ()
    """The option strings it is a prefix of, when several (ambiguous)."""


def resolve_option(word: str, options: Collection[str]) -> Resolved:
    """``word`` (underscores already dashes, as FlexibleArgumentParser makes them) read
    against ``options`` as Python 3.11's argparse reads it with ``allow_abbrev``."""
    if word in options:
        return Resolved(word)
    if len(word) < 2 or word[0] != "-":
        return Resolved(None)
    if "=" in word:
        name, explicit = word.split("=", 1)
        if name in options:
            return Resolved(name, explicit)
    found: list[tuple[str, str | None]] = []
    if word[1] == "-":
        prefix, _, explicit_text = word.partition("=")
        explicit_arg = explicit_text if "=" in word else None
        found = [(option, explicit_arg) for option in options if option.startswith(prefix)]
    else:
        short = word[:2]
        for option in options:
            if option == short:
                found.append((option, word[2:]))
            elif option.startswith(word):
                found.append((option, None))
    if len(found) == 1:
        return Resolved(*found[0])
    if len(found) > 1:
        return Resolved(None, matches=tuple(sorted(option for option, _ in found)))
    return Resolved(None)


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``did you mean '--x'?`` for the closest of ``candidates``, or empty."""
    name = word.split("=", 1)[0]
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else ""
