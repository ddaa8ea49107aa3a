"""What ``check`` reports: one record per checked (config, device, layer group).

The CI renderers (SARIF, JUnit, GitHub annotations, markdown) read only these
records; every decision (strictness, where a finding points) is made when the
records are built (:mod:`selector.checkrun`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from selector.catalog import Catalog, RegisteredCodes
from selector.result import SolveResult

__all__ = ["CLI_CODES", "CheckRecord", "CheckReport", "Finding", "FindingLevel", "Status"]

FindingLevel = Literal["error", "warning", "note"]
Status = Literal["valid", "invalid", "error"]

CLI_CODES: Mapping[str, tuple[str, str]] = RegisteredCodes("cli_codes")
"""Codes of findings that are not vLLM selection reasons: code -> (name, summary)
(``cli_codes`` of ``schemas/reason-codes.yaml``)."""


@dataclass(frozen=True)
class Finding:
    """One located message of a check."""

    level: FindingLevel
    code: str
    name: str
    message: str
    hint: str = ""
    line: int | None = None
    """1-based line in the record's ``artifact`` (None: not located)."""
    field: str | None = None
    """The deployment field (or command-line flag) the finding is about."""
    backend: str | None = None


@dataclass(frozen=True)
class CheckRecord:
    """The outcome of checking one deployment on one device."""

    source: str
    """The deployment file, or the ``vllm serve`` command line."""
    artifact: str | None
    """The file findings are located in (None for a command line)."""
    device: str
    engine: str | None
    status: Status
    failed: bool
    """Counts as a failure: invalid, refused at start-up, or a warning under ``--strict``."""
    findings: tuple[Finding, ...] = ()
    result: SolveResult | None = None
    group: str | None = None
    """The layer group of a model with several attention-layer signatures."""
    strict: bool = False
    settings: dict[str, Any] | None = None
    """The recognised vLLM settings of a command line."""
    selected: str | None = None
    """The selected backend (a whole model: the distinct backends, comma-separated)."""
    block_size: int | None = None
    cudagraph_mode: str | None = None
    model: Any = None
    """The whole-model check (:class:`selector.check.model.ModelCheckResult`) of a
    deployment that names a ``model:``; None for a single-layer deployment."""
    measured_policy: dict[str, Any] | None = None
    """``check --measurements``: the measured-fastest valid backend (the policy decision's
    JSON, with the measurements file), which the JSON reporter writes."""

    @property
    def valid(self) -> bool:
        """The check's complete verdict (vLLM would start the deployment)."""
        return self.status == "valid"

    @property
    def label(self) -> str:
        return self.source + (f" [{self.group}]" if self.group else "")

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == "warning")


@dataclass(frozen=True)
class CheckReport:
    """Everything a ``check`` reporter renders: the records and how they were asked for."""

    records: Sequence[CheckRecord]
    catalog: Catalog
    """The catalog the check ran with (the codes' names and hints the reporters state)."""
    command: Any = None
    """The parsed ``vllm serve`` command line (:class:`selector.inputs.serve.ServeCommand`),
    or None for deployment files."""
    verbose: int = 0
    fleet: bool = False
    """Several devices were checked: the text report ends with the fleet table."""
    command_file: str | None = None
    """The file that holds the command line (a workflow, a script: ``check
    --command-file``); findings about the command are located there."""
    command_line: int | None = None
    """The 1-based line of ``command_file`` that holds the command (None: unknown)."""
