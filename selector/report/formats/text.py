"""``check --format text``: the terminal report, printed to a rich console."""

from __future__ import annotations

from typing import Any

from selector.check.records import CheckReport, Finding
from selector.report.summary import render_fleet, render_notes
from selector.report.text import render_check

__all__ = ["PRINTS", "SUMMARY", "render"]

SUMMARY = ("The terminal report: the selected backend, why, and each backend's reasons "
           "(a fleet table for several devices).")
"""One line for the docs (:mod:`selector.report.formats`)."""
PRINTS = True
"""Prints to a rich console rather than returning text."""


def render(report: CheckReport, console: Any) -> None:
    """Print each record's report (and the fleet table for several devices) to ``console``."""
    records, command, verbose, fleet = report.records, report.command, report.verbose, report.fleet
    catalog = report.catalog
    if command is not None:
        # each note once, naming the devices it holds on when several were checked
        holds_on: dict[Finding, list[str]] = {}
        for r in records:
            for f in r.findings:
                if f.code in catalog.argument_codes:
                    holds_on.setdefault(f, []).append(r.device)
        checked = list(dict.fromkeys(r.device for r in records))
        if holds_on:
            where = None
            if len(checked) > 1:
                where = ["every device" if len(set(on)) == len(checked) else ", ".join(on)
                         for on in holds_on.values()]
            console.print(render_notes(list(holds_on), where))
    for record in records:
        if fleet and not verbose:
            continue
        title = record.label if command is None else f"vllm serve {command.model}"
        if record.model is not None:
            from selector.report.model import render_model  # lazy: the model checker is heavy

            architecture = [f for f in record.findings if f.code in ("AS131", "AS132", "AS133")]
            if architecture:
                console.print(render_notes(architecture))
            console.print(render_model(record.model, device=record.device, source=title,
                                       valid=record.status == "valid"))
            unchecked = [f for f in record.findings if f.code == "AS136"]  # no memory section
            if unchecked:
                console.print(render_notes(unchecked))
            # said by the model report already: the start-up refusals and each failing
            # layer group's error (vLLM's words, with its backends and suggestions)
            shown = {issue.code for issue in record.model.startup} | {
                s.result.error.code for s in record.model.selections if s.result.error}
            others = [f for f in record.findings if f.code.startswith("AS0") or (
                f.level != "note" and f.code not in shown and not f.code.startswith("AS1"))]
            if others:
                console.print(render_notes(others))
        elif record.result is not None:
            acknowledged = frozenset(f.code for f in record.findings if f.level == "note")
            result = record.result
            own = {d.code for d in (result.error, *result.warnings) if d is not None}
            refusals = [f for f in record.findings  # start-up refusals (SU001, SU008...)
                        if f.level == "error" and f.code not in own and f.code in catalog.codes]
            console.print(render_check(result, device=record.device, source=title,
                                       verbose=verbose, acknowledged=acknowledged,
                                       refusals=render_notes(refusals) if refusals else None))
        elif record.status == "invalid":  # refused before any layer was solved
            console.print(render_notes([f for f in record.findings if f.level == "error"]))
    if fleet:
        console.print(render_fleet(records))
