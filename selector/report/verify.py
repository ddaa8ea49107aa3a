"""Render ``verify``'s comparison of a vLLM start-up log with the tool's prediction, in
every ``check`` format (one renderer per format in :data:`RENDERERS`, as the reporter
registry of ``check`` has one module per format)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from selector.compare.verify import VerifyResult, VerifyRow

__all__ = ["RENDERERS", "render_verify"]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _verdict(row: VerifyRow) -> str:
    return {True: "agree", False: "DIFFER", None: "no prediction"}[row.agree]


def _text(results: Sequence[VerifyResult]) -> str:
    out: list[str] = []
    for result in results:
        out.append(f"verify {result.log}")
        out.append(f"  deployment: {result.deployment}")
        out.append(f"  engine {result.engine}, device {result.device}")
        width = max([len(r.label) for r in result.rows] + [4])
        out.append(f"  {'fact':<{width}}  {'vLLM logged':>22}  {'attn-select':>22}  verdict")
        for row in result.rows:
            line = (f"  {row.label:<{width}}  {_cell(row.logged):>22}  "
                    f"{_cell(row.predicted):>22}  {_verdict(row)}")
            if row.detail:
                line += f"  {row.detail}"
            if row.line:
                line += f"  (line {row.line})"
            out.append(line)
        differs = sum(r.agree is False for r in result.rows)
        agree = sum(r.agree is True for r in result.rows)
        out.append(f"  {agree} agree, {differs} differ" + (": the prediction misses vLLM's "
                                                           "start-up" if differs else ""))
    return "\n".join(out)


def _json(results: Sequence[VerifyResult]) -> str:
    return json.dumps({"results": [r.to_json() for r in results],
                       "agree": not any(r.differs for r in results)}, indent=2)


def _markdown(results: Sequence[VerifyResult]) -> str:
    out: list[str] = []
    for result in results:
        out += [f"### verify `{result.log}`", "", f"{result.engine} on {result.device}: "
                f"`{result.deployment}`", "", "| fact | vLLM logged | attn-select | verdict | |",
                "| --- | --- | --- | --- | --- |"]
        out += [f"| {r.label} | {_cell(r.logged)} | {_cell(r.predicted)} | {_verdict(r)} | "
                f"{r.detail} |" for r in result.rows]
        out.append("")
    return "\n".join(out)


def _github(results: Sequence[VerifyResult]) -> str:
    out: list[str] = []
    for result in results:
        for row in result.rows:
            if row.agree is False:
                where = f"file={result.log}" + (f",line={row.line}" if row.line else "")
                out.append(f"::error {where}::VF001 {row.label}: vLLM logged "
                           f"{_cell(row.logged)}, attn-select predicted {_cell(row.predicted)}"
                           + (f" ({row.detail})" if row.detail else ""))
    return "\n".join(out) or "::notice::verify: every stated fact agrees"


def _junit(results: Sequence[VerifyResult]) -> str:
    cases: list[str] = []
    failures = 0
    for result in results:
        for row in result.rows:
            name = quoteattr(row.label)
            body = ""
            if row.agree is False:
                failures += 1
                message = quoteattr(f"VF001 vLLM logged {_cell(row.logged)}, attn-select "
                                    f"predicted {_cell(row.predicted)} {row.detail}".strip())
                body = f"<failure message={message}/>"
            elif row.agree is None:
                body = "<skipped message=\"no prediction\"/>"
            cases.append(f"<testcase classname={quoteattr(escape(result.log))} name={name}>"
                         f"{body}</testcase>")
    return (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"attn-select verify\" "
            f"tests=\"{len(cases)}\" failures=\"{failures}\">\n" + "\n".join(cases)
            + "\n</testsuite>")


def _sarif(results: Sequence[VerifyResult]) -> str:
    findings = []
    for result in results:
        for row in result.rows:
            if row.agree is False:
                location: dict[str, Any] = {"artifactLocation": {"uri": result.log}}
                if row.line:
                    location["region"] = {"startLine": row.line}
                findings.append({"ruleId": "VF001", "level": "error",
                                 "message": {"text": f"{row.label}: vLLM logged "
                                             f"{_cell(row.logged)}, attn-select predicted "
                                             f"{_cell(row.predicted)} {row.detail}".strip()},
                                 "locations": [{"physicalLocation": location}]})
    document = {"version": "2.1.0", "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
                "runs": [{"tool": {"driver": {"name": "attn-select", "rules": [
                    {"id": "VF001", "name": "startup-log-differs"}]}}, "results": findings}]}
    return json.dumps(document, indent=2)


RENDERERS: dict[str, Callable[[Sequence[VerifyResult]], str]] = {
    "text": _text, "json": _json, "markdown": _markdown, "github": _github, "junit": _junit,
    "sarif": _sarif}
"""Format name -> renderer; the CLI's choices are these keys."""


def render_verify(results: Sequence[VerifyResult], output_format: str = "text") -> str:
    return RENDERERS[output_format](results)
