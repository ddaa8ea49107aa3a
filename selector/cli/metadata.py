"""``attn-select metadata``: print the attention metadata vLLM would build for a batch file."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from selector.errors import AttnSelectError, ExitCode
from selector.report.plain import PlainTable
from selector.smoke.invariants import Violation, check_metadata
from selector.smoke.metadata import (
    FlashAttentionMetadata,
    FlashInferMetadata,
    build_flash_attn_metadata,
    build_flashinfer_metadata,
    load_batch_file,
)

__all__ = ["metadata_command", "register"]


class MetadataBackend(str, Enum):
    """Which backend's metadata to build."""

    flash_attn = "flash_attn"
    flashinfer = "flashinfer"


class OutputFormat(str, Enum):
    """How to print the metadata."""

    text = "text"
    json = "json"


def _build(path: Path, backend: MetadataBackend, reorder_threshold: int
           ) -> tuple[FlashAttentionMetadata | FlashInferMetadata, list[Violation]]:
    batch = load_batch_file(path)
    metadata: FlashAttentionMetadata | FlashInferMetadata
    if backend is MetadataBackend.flash_attn:
        metadata = build_flash_attn_metadata(batch)
    else:
        metadata = build_flashinfer_metadata(batch, reorder_batch_threshold=reorder_threshold)
    return metadata, check_metadata(batch, metadata)


def _format_value(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], list):
        return "\n".join(json.dumps(row) for row in value)
    if isinstance(value, dict):
        return "\n".join(f"{key} = {json.dumps(item)}" for key, item in value.items())
    return json.dumps(value)


def _text_table(document: dict[str, Any], source: str) -> PlainTable:
    table = PlainTable(title=f"{document['backend']} metadata for {source}", show_header=True,
                  header_style="bold", expand=False)
    table.add_column("field", style="cyan", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in document.items():
        if key in {"backend", "violations", "ok"}:
            continue
        table.add_row(key, _format_value(value))
    return table


def metadata_command(
    batch_file: Annotated[Path, typer.Argument(
        metavar="BATCH.json", help="Batch file: block_size and requests with context_len, "
                                   "query_len and block_ids.", show_default=False)],
    backend: Annotated[MetadataBackend, typer.Option(
        "--backend", "-b", case_sensitive=False, help="Whose metadata to build.")],
    output_format: Annotated[OutputFormat, typer.Option(
        "--format", "-f", case_sensitive=False, help="Output format.")] = OutputFormat.text,
    reorder_threshold: Annotated[int, typer.Option(
        "--reorder-threshold", min=1,
        help="FlashInfer: requests with query_len <= N are decodes and move to the front.",
    )] = 1,
) -> None:
    """Print the attention metadata for BATCH.json and check the nine invariants.

    Exit 0 when every invariant holds, 1 when one is violated, 2 on bad input.
    """
    out = Console(soft_wrap=False)
    err = Console(stderr=True, soft_wrap=True)
    try:
        metadata, violations = _build(batch_file, backend, reorder_threshold)
    except AttnSelectError as error:
        err.print(f"error: {error}", markup=False, highlight=False)
        raise typer.Exit(int(error.exit_code)) from None
    document = metadata.to_json()
    if output_format is OutputFormat.json:
        document["ok"] = not violations
        document["violations"] = [violation.to_json() for violation in violations]
        out.out(json.dumps(document, indent=2), highlight=False)
    else:
        out.print(_text_table(document, str(batch_file)))
        if not violations:
            out.print("all invariants hold", style="green")
    for violation in violations:
        err.print(f"violation: {violation.render()}", markup=False, highlight=False)
    if violations:
        raise typer.Exit(int(ExitCode.INVALID))


def register(app: typer.Typer) -> None:
    """Add the ``metadata`` command to ``app``."""
    app.command(name="metadata", no_args_is_help=True)(metadata_command)
