"""vLLM's answers written reproducibly: the same answers give the same bytes.

Gzip files carry no timestamp (``mtime=0``) and the file's own name in the header, as
every committed golden has it; JSON is written with sorted keys.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["compact", "digest", "read_jsonl", "write_bytes", "write_gz", "write_json",
           "write_jsonl_gz"]


def compact(answer: Any) -> str:
    """One answer as one line: sorted keys, no spaces."""
    return json.dumps(answer, sort_keys=True, separators=(",", ":"))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """``data`` to ``path`` (its folder made), atomically (a partial file never stays)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(data)
    partial.replace(target)
    return target


def write_gz(path: str | os.PathLike[str], text: str | bytes, *, name_in_header: bool = True) -> Path:
    """``text`` gzip-compressed (level 9, ``mtime=0``). The header names the file (the
    ``GzipFile`` of an open file), or nothing with ``name_in_header=False`` (the bytes of
    ``gzip.compress(data, mtime=0)``)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    target = Path(path)
    if not name_in_header:
        return write_bytes(target, gzip.compress(data, mtime=0))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with open(partial, "wb") as raw, gzip.GzipFile(filename=target.name, fileobj=raw,
                                                   mode="wb", mtime=0) as handle:
        handle.write(data)
    partial.replace(target)
    return target


def write_jsonl_gz(path: str | os.PathLike[str], answers: Iterable[Any]) -> Path:
    """One compact JSON line per answer, gzip'd reproducibly."""
    return write_gz(path, "".join(compact(answer) + "\n" for answer in answers))


def write_json(path: str | os.PathLike[str], answer: Any) -> Path:
    """Indented JSON (``indent=1``, sorted keys, a final newline): the small goldens. The
    answer is first read back as JSON reads it (keys are strings, then sorted), so an
    answer written here and one passed through a fresh process give the same bytes."""
    text = json.dumps(json.loads(json.dumps(answer)), indent=1, sort_keys=True) + "\n"
    return write_bytes(path, text.encode("utf-8"))


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The answers of a JSON-lines file (gzip'd when it ends in ``.gz``)."""
    with (gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz")
          else open(path, encoding="utf-8")) as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def digest(path: str | os.PathLike[str]) -> str:
    """The sha256 of a written file (what a re-recording is compared by)."""
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
