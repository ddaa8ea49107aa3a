"""SARIF 2.1.0 for GitHub code scanning: one result per finding, each located.

GitHub's upload rejects a result without a location ("expected at least one location").
A finding about a deployment file points at its line there; a finding about a
``vllm serve`` command line points at the file that holds the command when it is
known (``check --command-file``: a workflow, a script), and otherwise at the command
itself: the command line, percent-encoded into one relative URI (no such file is in the
repository, so code scanning shows the alert with its text and no source snippet).
Every URI is a percent-encoded URI reference (RFC 3986), relative where the file is
under the working directory."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from selector import __version__
from selector.catalog import Catalog, RegisteredCodes
from selector.check.records import CLI_CODES, CheckRecord, CheckReport, Finding

__all__ = ["COMMAND_LOCATION", "SARIF_SCHEMA", "SARIF_VERSION", "SUMMARY", "artifact_uri",
           "code_descriptions",
           "command_uri", "render", "render_sarif"]

SUMMARY = ("SARIF 2.1.0 for code-scanning annotations, every finding located (the deployment "
           "file's line, or the command line).")
"""One line for the docs (:mod:`selector.report.formats`)."""

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "note": "note"}


COMMAND_LOCATION = "the vllm serve command line checked (not a file of the repository)"
"""The description of the location of a finding about a command line given on its own."""


def artifact_uri(path: str) -> str:
    """A repository-relative POSIX path where possible (what code scanning expects),
    percent-encoded; a file outside the working directory: its ``file://`` URI."""
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            candidate = candidate.resolve().relative_to(Path(os.getcwd()).resolve())
        except ValueError:
            return candidate.resolve().as_uri()
    return quote(str(PurePosixPath(*candidate.parts)).removeprefix("./"), safe="/")


def command_uri(command_line: str) -> str:
    """The location of a command line given on its own: the whole line as one relative
    URI segment (every reserved character percent-encoded, ``/`` included)."""
    return quote(command_line, safe="")


def _location(record: CheckRecord, finding: Finding, report: CheckReport) -> dict[str, Any]:
    """Where a result points: the deployment file's line, the file holding the command
    line, or the command line itself."""
    if record.artifact is not None:
        artifact: dict[str, Any] = {"uri": artifact_uri(record.artifact), "uriBaseId": "%SRCROOT%"}
        line = finding.line or 1
    elif report.command_file is not None:
        artifact = {"uri": artifact_uri(report.command_file), "uriBaseId": "%SRCROOT%"}
        line = report.command_line or 1
    else:
        artifact = {"uri": command_uri(record.source),
                    "description": {"text": COMMAND_LOCATION}}
        line = 1
    return {"physicalLocation": {"artifactLocation": artifact,
                                 "region": {"startLine": max(1, line)}}}


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


def render_sarif(report: CheckReport, *, version: str,
                 descriptions: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """The SARIF log of a ``check`` run.

    ``descriptions`` maps a code to (name, summary) for the rule metadata.
    """
    records = report.records
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
            result["locations"] = [_location(record, finding, report)]
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


def code_descriptions(catalog: Catalog, *, arguments: bool = True) -> dict[str, tuple[str, str]]:
    """Rule metadata for every registered code: code -> (name, hint or summary); the
    command line's codes too unless ``arguments`` is false."""
    descriptions = {c.code: (c.name, c.hint or c.message) for c in catalog.codes.values()}
    descriptions.update(CLI_CODES)
    if arguments:
        descriptions.update(RegisteredCodes("argument_codes"))
    return descriptions


def render(report: CheckReport, console: Any = None) -> str:
    """The ``--format sarif`` reporter (:mod:`selector.report.formats`)."""
    document = render_sarif(report, version=__version__, descriptions=code_descriptions(report.catalog))
    return json.dumps(document, indent=2) + "\n"
