"""Renderers: a result in, text or data out; no decisions are made here.

The package's names load on first use, so importing one reporter module (a ``check``
format) does not load the others."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selector._lazy import lazy_getattr

__all__ = ["JSON_SCHEMA_VERSION", "render_check", "render_explain", "result_to_json"]

_LAZY = {
    "JSON_SCHEMA_VERSION": "selector.report.json",
    "result_to_json": "selector.report.json",
    "render_check": "selector.report.text",
    "render_explain": "selector.report.text",
}

if TYPE_CHECKING:
    from selector.report.json import JSON_SCHEMA_VERSION, result_to_json
    from selector.report.text import render_check, render_explain

__getattr__ = lazy_getattr(__name__, _LAZY)
