"""What ``check`` reports: one record per checked (config, device, layer group).

The CI renderers (SARIF, JUnit, GitHub annotations, markdown) read only these
records; every decision (strictness, where a finding points) is made when the
records are built (:mod:`selector.checkrun`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from selector.result import SolveResult

__all__ = ["CLI_CODES", "CheckRecord", "Finding", "FindingLevel", "Status"]

FindingLevel = Literal["error", "warning", "note"]
Status = Literal["valid", "invalid", "error"]

CLI_CODES: dict[str, tuple[str, str]] = {
    "AS001": ("input-error",
              "The input could not be read: a bad file, field or flag value (exit code 2)."),
    "AS002": ("cudagraph-mode-downgraded",
              "vLLM lowers the requested CUDA-graph mode for the selected backend "
              "(a warning; a failure with --strict)."),
    "AS003": ("cudagraph-mode-refused",
              "vLLM refuses the requested CUDA-graph mode for the selected backend at start-up."),
    "AS004": ("kv-plan-error",
              "The whole-model KV-cache plan fails: vLLM would raise at start-up."),
    "AS005": ("kv-plan-warning",
              "The whole-model KV-cache plan works with a caveat vLLM warns about."),
    "AS131": ("model-architecture-unsupported",
              "The engine version does not support the model's architecture (removed, "
              "moved to a plugin or unknown): vLLM refuses it at start-up."),
    "AS133": ("model-refused",
              "vLLM refuses the model's layer layout at start-up (a rule its model code "
              "asserts, read from the config)."),
    "AS132": ("model-architecture-unmapped",
              "vLLM supports the architecture but schemas/models/families.yaml does not "
              "map its layers: checked as uniform attention (a failure with --strict)."),
    "AS020": ("fleet-check-failed",
              "Fleet run (--ray): a kernel or check failed on a device type (exit code 3)."),
    "AS021": ("fleet-device-absent",
              "Fleet run (--ray): no alive node of a requested device type (exit code 4)."),
    "AS022": ("fleet-cannot-run",
              "Fleet run (--ray): a node cannot run it: torch, a GPU, a kernel library or "
              "attn-select itself is missing there (exit code 4)."),
    "AS023": ("fleet-timed-out",
              "Fleet run (--ray): no answer within --timeout; the task was cancelled "
              "(exit code 4)."),
    "AS024": ("fleet-worker-died",
              "Fleet run (--ray): the task's worker process or node died (exit code 4)."),
    "AS025": ("fleet-cancelled",
              "Fleet run (--ray): interrupted (Ctrl-C); the task was cancelled."),
    "AS026": ("fleet-task-error",
              "Fleet run (--ray): the task ended with an unexpected error, a deployment "
              "vLLM rejects on that device, bad input, or a status of its own."),
    "AS027": ("fleet-substituted",
              "Fleet run (--ray): every check passed, but on another kernel than the plan "
              "negotiated (SUBSTITUTED, exit code 5)."),
}
"""Codes of findings that are not vLLM selection reasons: code -> (name, summary)."""


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
    """The whole-model check (:class:`selector.modelcheck.ModelCheckResult`) of a
    deployment that names a ``model:``; None for a single-layer deployment."""

    @property
    def label(self) -> str:
        return self.source + (f" [{self.group}]" if self.group else "")

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == "warning")
