"""``attn-select verify LOG [DEPLOYMENT]``: a real vLLM start-up log next to the tool's
prediction for the same deployment."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from selector.errors import AttnSelectError, ExitCode, InputError

__all__ = ["VerifyFormat", "register", "verify_command"]


class VerifyFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"
    junit = "junit"
    sarif = "sarif"


def verify_command(
    log: Annotated[Path, typer.Argument(
        metavar="LOG", show_default=False,
        help="A vLLM start-up log (a release with an engine profile: attn-select list "
             "engines).")],
    deployment: Annotated[str | None, typer.Argument(
        metavar="[DEPLOYMENT]", show_default=False,
        help="Deployment file to predict (default: the log's non-default args line).")] = None,
    output_format: Annotated[VerifyFormat, typer.Option(
        "--format", "-f", case_sensitive=False, help="Output format.")] = VerifyFormat.text,
    model: Annotated[str | None, typer.Option(
        "--model", help="Without DEPLOYMENT: the model preset or folder with config.json to "
                        "use instead of the log's model.")] = None,
    device: Annotated[str | None, typer.Option(
        "--device", "-d", help="Without DEPLOYMENT: the GPU the log ran on.")] = None,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="The vLLM release (default: the one the log names).")] = None,
) -> None:
    """Compare what vLLM decided and measured at start-up (backend per group, FlashAttention
    version, CUDA-graph mode, weights, peak activation, non-torch and CUDA-graph memory,
    the memory left for the KV cache, KV tokens, concurrency, refusals) with the tool's
    prediction: one row per fact the log states.

    Exit 0 when every stated fact agrees (within 3% for KV memory and tokens, 10% for each
    reserved part), 1 when one differs (VF001), 2 on bad input.
    """
    from selector.catalog import load_catalog
    from selector.pipeline.verify import verify_log
    from selector.report.verify import render_verify

    err = Console(stderr=True, soft_wrap=True)
    try:
        results = verify_log(str(log), load_catalog(), deployment, model=model, device=device, engine=engine)
    except AttnSelectError as error:
        message = error.render() if isinstance(error, InputError) else str(error)
        err.print(f"error: {message}", markup=False, highlight=False)
        raise typer.Exit(int(error.exit_code)) from None
    Console(soft_wrap=True).out(render_verify(results, output_format.value), highlight=False)
    if any(result.differs for result in results):
        raise typer.Exit(int(ExitCode.INVALID))


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command to ``app``."""
    app.command(name="verify", no_args_is_help=True)(verify_command)
