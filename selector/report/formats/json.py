"""``check --format json``: one JSON document per checked deployment and device."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from selector.check.records import CheckRecord, CheckReport
from selector.report.json import JSON_SCHEMA_VERSION, result_to_json

__all__ = ["SUMMARY", "check_documents", "render"]

SUMMARY = "One JSON document per deployment and device (a list for several)."
"""One line for the docs (:mod:`selector.report.formats`)."""


def check_documents(records: Sequence[CheckRecord], command: Any) -> list[dict[str, Any]]:
    """The JSON document of each record (``command``: the parsed command line, or None)."""
    documents = []
    for record in records:
        if record.model is not None:
            from selector.report.model import model_to_json  # lazy: the model checker is heavy

            document = model_to_json(record.model, source=record.source, device=record.device)
        elif record.result is not None:
            document = result_to_json(record.result, source=record.source, device=record.device)
        else:  # unreadable input, or refused before any layer was solved (SU003, SU006)
            document = {"schema_version": JSON_SCHEMA_VERSION, "source": record.source,
                        "device": record.device if record.status == "invalid" else None,
                        "engine": record.engine, "valid": False, "status": record.status}
        document["passed"] = not record.failed
        document["valid"] = record.valid  # the record's complete verdict (start-up included)
        document["findings"] = [
            {"level": f.level, "code": f.code, "name": f.name, "message": f.message,
             "hint": f.hint, "line": f.line, "field": f.field, "backend": f.backend}
            for f in record.findings]
        if record.group is not None:
            document["layer_group"] = record.group
        if command is not None:
            document["command"] = {"argv": list(command.shown_argv), "model": command.model,
                                   "model_source": command.model_source,
                                   "settings": record.settings}
        if record.measured_policy is not None:
            document["measured_policy"] = record.measured_policy
        documents.append(document)
    return documents


def render(report: CheckReport, console: Any = None) -> str | None:
    """The ``--format json`` reporter: one document, or a list (None: no record)."""
    documents = check_documents(report.records, report.command)
    if not documents:
        return None
    body = documents[0] if len(documents) == 1 else documents
    return json.dumps(body, indent=2, default=str) + "\n"
