"""The words after ``vllm serve`` -> MODEL and the flags with their values
(:class:`RawCommand`), parsed by an ``argparse`` parser built from the engine's flag
table, as vLLM builds its own (``vllm/engine/arg_utils.py`` ``add_cli_args``).

Before argparse sees them the words are normalised the way vLLM's
``FlexibleArgumentParser.parse_args`` does (``vllm/utils/argparse_utils.py:243-335``):
``--max_model_len`` is ``--max-model-len``, ``-O3`` is ``--optimization-level 3``,
short aliases become their long flags, dotted keys (``-cc.cudagraph_mode=FULL``) keep
their underscores.  Unlike vLLM's parser, a flag that the table does not know is not
an error: it takes the next word as its value if that is not a flag, and is passed
over with a note.  Which words are flags is decided here, as argparse decides it
(a word that starts with ``-`` and is not a negative number, ``-`` or a phrase);
argparse decides how many words each flag takes.  It never prints or exits here: its
errors become :class:`InputError` naming the flag.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from selector.inputs.serve.command import ServeNote
from selector.inputs.serve.flags import ServeFlags
from selector.inputs.serve.options import resolve_option
from selector.inputs.serve.values import bad_value, parse_scalar, set_dotted
from selector.inputs.serve.wrappers import is_serve_command, serve_words

__all__ = ["RawCommand", "is_serve_command", "tokenize"]

_DOTTED_CONFIGS = ("--attention-config", "--compilation-config", "--speculative-config")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
"""argparse's own test for a word that is a negative number, not a flag."""


@dataclass
class RawCommand:
    """The command line split into what the settings builder needs."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    values: dict[str, str] = field(default_factory=dict)
    """flag -> its value (the last one wins, as with argparse)."""
    dotted: dict[str, dict[str, Any]] = field(default_factory=dict)
    """--attention-config / --compilation-config / --speculative-config dotted keys."""
    order: list[str] = field(default_factory=list)
    notes: list[ServeNote] = field(default_factory=list)
    unrecognized: list[str] = field(default_factory=list)
    """The words vLLM's parser leaves over, in order (flags no option string of the release
    matches, their values, extra positionals): it refuses them ("unrecognized arguments")."""
    unknown_flags: list[str] = field(default_factory=list)
    """The flag words among :attr:`unrecognized`."""
    ambiguous: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    """Flag words that are a prefix of several option strings, with those (vLLM refuses
    them: "ambiguous option")."""
    abbreviated: list[tuple[str, str]] = field(default_factory=list)
    """Flag words vLLM reads as the option they are a unique prefix of: (word, option)."""


class _Word(str):
    """A word for argparse that knows where it was and how it was given.  A word that
    is not a flag starts with a character argparse never reads as a flag, so that no
    word like ``-3`` is taken for an abbreviation of a registered ``-3x``."""

    position: int
    given: str


_NOT_A_FLAG = "\x00"


def _given(value: Any) -> Any:
    return value.given if isinstance(value, _Word) else value


class _ParseError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise _ParseError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _ParseError(message or "")


class _Record(argparse.Action):
    """Records every flag met, in order, with its value(s)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        namespace.events.append((self.option_strings[0], values))


def _is_flag(word: str) -> bool:
    """Whether argparse reads ``word`` as a flag (every flag-shaped word is registered)."""
    if not word.startswith("-") or word == "-" or _NEGATIVE_NUMBER.match(word):
        return False
    name = word.split("=", 1)[0]
    return name not in ("-", "--") and " " not in name and not _NEGATIVE_NUMBER.match(name)


def _normalise_flag(word: str, aliases: Mapping[str, str],
                    options: frozenset[str] = frozenset()) -> tuple[str, str | None, _Reading]:
    """``--max_model_len=8`` -> (``--max-model-len``, ``8``); a unique prefix of one of
    ``options`` (the release's option strings) read as that option, as argparse reads it;
    aliases resolved; dotted keys keep their underscores (as vLLM's FlexibleArgumentParser
    does)."""
    value: str | None = None
    if "=" in word:
        word, value = word.split("=", 1)
    match = re.fullmatch(r"-O(\d)", word)
    if match:
        return "--optimization-level", match.group(1), _Reading()
    head, dot, tail = word.partition(".")
    if head.startswith("--"):
        head = "--" + head[2:].replace("_", "-")
    reading = _Reading()
    if options and head not in options and head not in aliases and head != "-O":
        typed = head if value is None or dot else f"{head}={value}"
        resolved = resolve_option(typed, options)
        if resolved.option is not None:
            reading = _Reading(typed=head, option=resolved.option)
            head = resolved.option
            if resolved.explicit is not None and value is None and not dot:
                value = resolved.explicit
        else:
            reading = _Reading(typed=typed, matches=resolved.matches, unknown=True)
    head = aliases.get(head, head)
    return head + dot + tail, value, reading


@dataclass(frozen=True)
class _Reading:
    """How vLLM's parser reads a flag word that is not one of its option strings."""

    typed: str = ""
    option: str = ""
    """The option it is a unique prefix of."""
    matches: tuple[str, ...] = ()
    """The options it is a prefix of, when several."""
    unknown: bool = False
    """It is none of the release's options."""


_Nargs = int | str | None
"""argparse's ``nargs``: ``"*"``, ``0``, ``None`` (exactly one) or ``"?"``."""


def _nargs(flag: str, table: ServeFlags) -> _Nargs:
    """How many words ``flag`` takes: a list, none (a switch), exactly one (a known
    valued flag, a dotted key) or one if the next word is not a flag (unknown)."""
    takes = table.takes(flag) or table.frontend_flags.get(flag)
    if takes == "list":
        return "*"
    if takes == "switch" or flag.startswith("--no-"):
        return 0
    if "." in flag or takes == "value":
        return None
    return "?"


@dataclass
class _Words:
    """The words for argparse, and what it does not keep."""

    words: list[_Word] = field(default_factory=list)
    flags: dict[str, _Nargs] = field(default_factory=dict)
    """Every flag met, with the words it takes."""
    flag_positions: list[int] = field(default_factory=list)
    """Where each flag argparse records is."""
    inline: dict[int, str] = field(default_factory=dict)
    """``--flag=value`` values by position (argparse drops a value of ``--``)."""
    options_end: int | None = None
    """Where ``--`` ends the flags (later words are positional)."""
    readings: dict[str, _Reading] = field(default_factory=dict)
    """How vLLM reads each flag met that is not one of its option strings."""


def _words(body: Sequence[str], table: ServeFlags, elsewhere: frozenset[str]) -> _Words:
    """The words for argparse: flags normalised as vLLM's parser does."""
    out = _Words()
    options = table.parser_flags
    for position, given in enumerate(body):
        text = _NOT_A_FLAG + given
        if out.options_end is None and given == "--":
            out.options_end = position  # argparse's too: every later word is positional
            text = given
        elif out.options_end is None and _is_flag(given):
            flag, value, reading = _normalise_flag(given, table.aliases, options)
            if reading.unknown and flag.split(".", 1)[0] in elsewhere:
                reading = _Reading()  # a flag of another release or a removed one: its notes
            if reading.option or reading.unknown:
                out.readings.setdefault(flag, reading)
            nargs = out.flags.setdefault(flag, _nargs(flag, table))
            text = flag if value is None or nargs == 0 else f"{flag}={value}"
            out.flag_positions.append(position)
            if value is not None:
                out.inline[position] = value
        word = _Word(text)
        word.position, word.given = position, given
        out.words.append(word)
    return out


def tokenize(argv: Sequence[str], table: ServeFlags,
             elsewhere: frozenset[str] = frozenset()) -> RawCommand:
    """Split a command line into the variables, MODEL and flags the settings are built from
    (``elsewhere``: flags of other releases, read with their notes rather than refused)."""
    env, body = serve_words(argv)
    raw = RawCommand(argv=tuple(argv), env=env)
    words = _words(body, table, elsewhere)
    parser = _Parser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for number, (option, nargs) in enumerate(words.flags.items()):
        parser.add_argument(option, nargs=nargs, action=_Record, dest=f"flag{number}",
                            default=argparse.SUPPRESS)
    try:
        namespace, rest = parser.parse_known_args(words.words, argparse.Namespace(events=[]))
    except argparse.ArgumentError as exc:
        raise bad_value(exc.argument_name or "", "expected a value after this flag") from None
    except _ParseError as exc:  # pragma: no cover - no positional, nothing required
        raise bad_value("vllm serve", str(exc)) from None
    items: list[tuple[int, str | None, Any]] = [
        (position, flag, words.inline.get(position, _given(value)))
        for position, (flag, value) in zip(words.flag_positions, namespace.events, strict=True)]
    items += [(word.position, None, word.given) for word in rest
              if isinstance(word, _Word) and word.position != words.options_end]
    for position, flag, value in sorted(items, key=lambda item: item[0]):
        reading = words.readings.get(flag or "")
        if flag is None:
            _positional(raw, str(value))
        elif reading is not None and reading.unknown:
            _refused(raw, reading, body[position], value, words.flags[flag])
        else:
            if reading is not None and reading.option and (reading.typed, reading.option) \
                    not in raw.abbreviated:
                raw.abbreviated.append((reading.typed, reading.option))
            _flag(raw, flag, value, words.flags[flag])
    return raw


def _refused(raw: RawCommand, reading: _Reading, given: str, value: Any, nargs: _Nargs) -> None:
    """A flag word vLLM's parser refuses: ambiguous, or left over with its value."""
    if reading.matches:
        raw.ambiguous.append((reading.typed, reading.matches))
        return
    raw.unknown_flags.append(given)
    raw.unrecognized.append(given)
    if nargs != 0 and isinstance(value, str) and "=" not in given:
        raw.unrecognized.append(value)


def _positional(raw: RawCommand, word: str) -> None:
    if raw.model is None:
        raw.model = word
    else:
        raw.unrecognized.append(word)  # vllm serve takes one positional, model_tag


def _flag(raw: RawCommand, flag: str, value: Any, nargs: _Nargs) -> None:
    if nargs == "*":
        raw.order.append(flag)
        return
    base, dot, key = flag.partition(".")
    if dot and base in _DOTTED_CONFIGS:
        raw.dotted.setdefault(base, {})
        set_dotted(raw.dotted[base], key.split("."), parse_scalar(value))
        raw.order.append(flag)
    elif dot and base == "--optimization-level":
        # the legacy -O.key=value spelling of --compilation-config.key
        raw.dotted.setdefault("--compilation-config", {})
        set_dotted(raw.dotted["--compilation-config"], key.split("."), parse_scalar(value or ""))
        raw.order.append(flag)
    elif dot:
        raw.notes.append(ServeNote("info", "AS103", flag, f"{flag} passed over"))
    elif flag == "--model":
        if raw.model is None:
            raw.model = str(value)
    else:
        raw.order.append(flag)
        raw.values[flag] = value if isinstance(value, str) else ""
