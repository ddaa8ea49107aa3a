"""Notes on the flags of a command line that do not make settings: flags the checked
release's parser lacks (SU007) or that vLLM removed (SU004), flags worth a word
(AS104) and flags attn-select does not know (AS103)."""

from __future__ import annotations

from selector.catalog import Catalog
from selector.serve.command import ServeNote
from selector.serve.flags import ServeFlags, release_flags
from selector.serve.settings import HANDLED
from selector.serve.tokenize import RawCommand

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
    if flag in table.flags:
        return True
    negated = "--" + flag[5:]
    if flag.startswith("--no-") and table.takes(negated) == "switch" and negated not in HANDLED:
        return True
    return any(flag in flags for flags in release_flags(catalog).values())


def flag_notes(raw: RawCommand, notes: list[ServeNote], catalog: Catalog, table: ServeFlags,
               version: str = "") -> None:
    """Append the notes on ``raw``'s flags (``version``: the vLLM release checked)."""
    seen: set[str] = set()
    for flag in raw.order:
        if flag in seen:
            continue
        seen.add(flag)
        release_note = _release_note(flag, version, catalog, table)
        if release_note is not None:
            notes.append(release_note)
            continue
        if flag.split(".", 1)[0] in HANDLED:
            continue
        spec = table.flags.get(flag)
        if spec is not None and spec.removed:
            code = catalog.code("SU004")
            notes.append(ServeNote("error", "SU004", flag, code.message.format(flag=flag),
                                   hint=code.hint.format(replacement=spec.removed)))
        elif spec is not None and spec.note:
            notes.append(ServeNote("info", "AS104", flag, f"{flag}: {spec.note}"))
        elif not _is_known(flag, table, catalog):
            notes.append(ServeNote("info", "AS103", flag,
                                   f"{flag} is not a flag attn-select knows; passed over"))
