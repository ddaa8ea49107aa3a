"""Notes on the flags of a command line that do not make settings: words the checked
release's parser refuses (SE005 unrecognized, SE006 ambiguous), flags it lacks (SU007) or
that vLLM removed (SU004), flags given as a prefix of an option (AS150), flags worth a
word (AS104) and the flags vLLM reads that attn-select does not model (AS104, named)."""

from __future__ import annotations

from selector.catalog import Catalog
from selector.inputs.serve.command import ServeNote
from selector.inputs.serve.flags import ServeFlags, release_flags
from selector.inputs.serve.options import did_you_mean
from selector.inputs.serve.settings import HANDLED
from selector.inputs.serve.tokenize import RawCommand

__all__ = ["flag_notes"]


def _release_note(flag: str, version: str, catalog: Catalog, table: ServeFlags) -> ServeNote | None:
    """SU007 when ``flag`` is an engine flag of some vLLM release but not of ``version``
    (whose flag table is ``table``): that release's parser refuses the command line."""
    name = flag.split(".", 1)[0]
    if not version or name in table.engine_flags:
        return None
    releases = release_flags(catalog)
    having = [v for v, flags in releases.items() if name in flags]
    if version not in releases or not having:
        return None
    code = catalog.code("SU007")
    return ServeNote("error", "SU007", flag, code.message.format(flag=name),
                     hint=code.hint.format(flag=name, releases=", ".join(having)))


def _is_known(flag: str, table: ServeFlags, catalog: Catalog) -> bool:
    if flag in table.flags or flag in table.parser_flags:
        return True
    negated = "--" + flag[5:]
    if flag.startswith("--no-") and table.takes(negated) == "switch" and negated not in HANDLED:
        return True
    return any(flag in flags for flags in release_flags(catalog).values())


def _parser_notes(raw: RawCommand, notes: list[ServeNote], catalog: Catalog,
                  table: ServeFlags) -> None:
    """What vLLM's parser says of the words it does not read as one of its options."""
    options = table.parser_flags
    for typed, matches in raw.ambiguous:
        code = catalog.code("SE006")
        close = did_you_mean(typed, matches) or f"did you mean {matches[0]}?"
        notes.append(ServeNote("error", "SE006", typed.split("=", 1)[0],
                               code.message.format(option=typed, matches=", ".join(matches)),
                               hint=close))
    if raw.unrecognized:
        code = catalog.code("SE005")
        hints = [hint for flag in raw.unknown_flags
                 if (hint := did_you_mean(flag.split(".", 1)[0].replace("_", "-"), options))]
        where = raw.unknown_flags[0].split("=", 1)[0] if raw.unknown_flags else "MODEL"
        notes.append(ServeNote(
            "error", "SE005", where, code.message.format(words=" ".join(raw.unrecognized)),
            hint="; ".join(hints) if hints else (
                "vllm serve takes one positional argument, MODEL" if not raw.unknown_flags
                else "see `vllm serve --help=all` for this release's flags")))
    for typed, option in raw.abbreviated:
        long = table.aliases.get(option)
        shown = f"{option} ({long})" if long else option
        notes.append(ServeNote("info", "AS150", long or option,
                               f"{typed} is read as {shown}, as vLLM's parser reads a unique "
                               "prefix of an option"))


def flag_notes(raw: RawCommand, notes: list[ServeNote], catalog: Catalog, table: ServeFlags,
               version: str = "") -> None:
    """Append the notes on ``raw``'s flags (``version``: the vLLM release checked)."""
    _parser_notes(raw, notes, catalog, table)
    seen: set[str] = set()
    passed_over: list[str] = []
    for flag in raw.order:
        if flag in seen:
            continue
        seen.add(flag)
        release_note = _release_note(flag, version, catalog, table)
        if release_note is not None:
            notes.append(release_note)
            continue
        spec = table.flags.get(flag)
        if spec is not None and spec.removed:
            code = catalog.code("SU004")
            notes.append(ServeNote("error", "SU004", flag, code.message.format(flag=flag),
                                   hint=code.hint.format(replacement=spec.removed)))
        elif spec is not None and spec.note:
            notes.append(ServeNote("info", "AS104", flag, f"{flag}: {spec.note}"))
        elif flag.split(".", 1)[0] in HANDLED:
            continue
        elif not _is_known(flag, table, catalog):
            notes.append(ServeNote("info", "AS103", flag,
                                   f"{flag} is not a flag attn-select knows; passed over"))
        else:
            passed_over.append(flag)
    if passed_over:
        notes.append(ServeNote(
            "info", "AS104", passed_over[0],
            "read by vLLM, not modelled by attn-select (what they change is not checked): "
            + ", ".join(passed_over)))
