"""SARIF 2.1.0 for GitHub code scanning: one result per finding, located in the
deployment file by line (findings about a command line carry no location)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from selector import __version__
from selector.catalog import RegisteredCodes, load_catalog
from selector.records import CLI_CODES, CheckRecord, CheckReport, Finding

__all__ = ["SARIF_SCHEMA", "SARIF_VERSION", "SUMMARY", "code_descriptions", "render", "render_sarif"]

SUMMARY = ("SARIF 2.1.0 for code-scanning annotations, findings located in the deployment "
           "file.")
"""One line for the docs (:mod:`selector.report.formats`)."""

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "note": "note"}


def _uri(path: str) -> str:
    """A repository-relative POSIX path where possible (what code scanning expects)."""
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            candidate = candidate.resolve().relative_to(Path(os.getcwd()).resolve())
        except ValueError:
            return candidate.resolve().as_uri()
    return str(PurePosixPath(*candidate.parts)).removeprefix("./")


def _fingerprint(record: CheckRecord, finding: Finding) -> str:
    key = "|".join((record.source, record.device, record.group or "", finding.code,
                    finding.field or ""))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _message(record: CheckRecord, finding: Finding) -> str:
    where = f"[{record.device}" + (f", {record.group}" if record.group else "") + "] "
    text = where + finding.message
    if finding.hint:
        text += f" ({finding.hint})"
    return text


def render_sarif(records: Sequence[CheckRecord], *, version: str,
                 descriptions: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """The SARIF log of a ``check`` run.

    ``descriptions`` maps a code to (name, summary) for the rule metadata.
    """
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for record in records:
        for finding in record.findings:
            if finding.code not in index:
                name, summary = descriptions.get(finding.code, (finding.name, finding.message))
                index[finding.code] = len(rules)
                rules.append({
                    "id": finding.code,
                    "name": name or finding.name,
                    "shortDescription": {"text": name or finding.name},
                    "fullDescription": {"text": summary or finding.message},
                    "help": {"text": summary or finding.hint or finding.message},
                    "defaultConfiguration": {"level": _LEVELS[finding.level]},
                    "properties": {"tags": ["attn-select", "vllm", "attention-backend"]},
                })
            result: dict[str, Any] = {
                "ruleId": finding.code,
                "ruleIndex": index[finding.code],
                "level": _LEVELS[finding.level],
                "message": {"text": _message(record, finding)},
                "partialFingerprints": {"attnSelectFinding/v1": _fingerprint(record, finding)},
                "properties": {"device": record.device, "source": record.source,
                               "field": finding.field, "backend": finding.backend},
            }
            if record.artifact is not None:
                result["locations"] = [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(record.artifact),
                                             "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": max(1, finding.line or 1)},
                    },
                }]
            results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": "attn-select",
                "version": version,
                "semanticVersion": version,
                "rules": rules,
            }},
            "automationDetails": {"id": "attn-select/check/"},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def code_descriptions(*, arguments: bool = True) -> dict[str, tuple[str, str]]:
    """Rule metadata for every registered code: code -> (name, hint or summary); the
    command line's codes too unless ``arguments`` is false."""
    descriptions = {c.code: (c.name, c.hint or c.message) for c in load_catalog().codes.values()}
    descriptions.update(CLI_CODES)
    if arguments:
        descriptions.update(RegisteredCodes("argument_codes"))
    return descriptions


def render(report: CheckReport, console: Any = None) -> str:
    """The ``--format sarif`` reporter (:mod:`selector.report.formats`)."""
    document = render_sarif(report.records, version=__version__, descriptions=code_descriptions())
    return json.dumps(document, indent=2) + "\n"
