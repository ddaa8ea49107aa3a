"""Renderers: a result in, text or data out; no decisions are made here."""

from __future__ import annotations

from selector.report.json import JSON_SCHEMA_VERSION, result_to_json
from selector.report.text import render_check, render_explain

__all__ = ["JSON_SCHEMA_VERSION", "render_check", "render_explain", "result_to_json"]
