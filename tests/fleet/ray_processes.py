"""Which processes still belong to a Ray session (by its session folder)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["processes_of"]


def processes_of(session_dir: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if session_dir in command:
            found.append(int(entry.name))
    return found
