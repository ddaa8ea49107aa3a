"""Batch mode: flat configs in, one JSON verdict line per config out.

The output line has the oracle's shape, so the two can be diffed::

    {"backends": {NAME: [reason, ...]}, "selected": NAME | null, "error": text | null}

Kept light on purpose: one compiled evaluator call per config and cached JSON
fragments for reason lists (they repeat across configs).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from selector.catalog import EngineData
from selector.errors import InputError
from selector.pipeline.flat import FlatEvaluator

__all__ = ["sweep_lines"]


def _oracle_error(error: str | None) -> str | None:
    """vLLM raising something other than ValueError is marked as the oracle marks it."""
    if error is not None and not error.startswith(("No valid", "Selected backend")):
        return "EXCEPTION " + error
    return error


def _error_line(config_id: Any, message: str) -> str:
    payload: dict[str, Any] = {"backends": {}, "selected": None, "error": f"bad input: {message}"}
    if config_id is not None:
        payload = {"id": config_id, **payload}
    return json.dumps(payload)


def sweep_lines(lines: Iterable[str], engine: EngineData,
                backends: tuple[str, ...] | None = None) -> Iterator[str]:
    """Evaluate JSON Lines of flat configs; yields one output line per non-empty input line."""
    evaluator = FlatEvaluator(engine, backends)
    fragments: dict[tuple[object, ...], str] = {}
    dumps = json.dumps
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        config_id = None
        try:
            config = json.loads(text)
            if isinstance(config, dict):
                config_id = config.get("id")
            request = evaluator.request(config)
        except json.JSONDecodeError as exc:
            yield _error_line(None, f"line {number}: not JSON ({exc.msg})")
            continue
        except InputError as exc:
            yield _error_line(config_id, f"line {number}: {exc.render().split(': ', 1)[1]}")
            continue
        outcome, names = evaluator.select(request)
        parts = []
        reasons = outcome.reasons
        for name in names:
            key = (name, *reasons[name])
            fragment = fragments.get(key)
            if fragment is None:
                messages = [("EXCEPTION " + m) if c.startswith("EX") else m for c, m in reasons[name]]
                fragment = f"{dumps(name)}: {dumps(messages)}"
                fragments[key] = fragment
            parts.append(fragment)
        head = f'{{"id": {dumps(config_id)}, ' if config_id is not None else "{"
        yield (head + '"backends": {' + ", ".join(parts) + '}, "selected": '
               + dumps(outcome.selected) + ', "error": ' + dumps(_oracle_error(outcome.error)) + "}")
