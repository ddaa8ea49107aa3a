"""What a parsed ``vllm serve`` command line amounts to (:class:`ServeCommand`), the notes
about its flags (:class:`ServeNote`, codes of ``argument_codes`` in
``schemas/reason-codes.yaml``) and the ``--device`` value."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from selector.catalog import Catalog, RegisteredCodes
from selector.errors import InputError
from selector.inputs.serve.wrappers import ENV_ASSIGNMENT
from selector.memory.profile import startup_profile
from selector.platforms import capability_int, platform_module
from selector.schema.request import Deployment, DeviceRef

if TYPE_CHECKING:  # a type only: a file check never loads the model facts
    from selector.models import ModelFacts

__all__ = [
    "ARG_CODES",
    "Level",
    "ServeCommand",
    "ServeNote",
    "device_ref",
]

ARG_CODES: Mapping[str, tuple[str, str]] = RegisteredCodes("argument_codes")
"""Codes of the notes about a command line: code -> (name, summary)
(``argument_codes`` of ``schemas/reason-codes.yaml``)."""

Level = Literal["info", "warning", "error"]
"""``error``: vLLM refuses the command line itself (exit 1)."""


@dataclass(frozen=True)
class ServeNote:
    """Something worth saying about one flag or variable of the command line."""

    level: Level
    code: str
    flag: str
    message: str
    hint: str = ""


@dataclass(frozen=True)
class ServeCommand:
    """A parsed ``vllm serve`` command line: the deployment it amounts to."""

    argv: tuple[str, ...]
    model: str
    """MODEL as given."""
    model_source: str
    """The preset name or config.json path the model facts came from."""
    environment: dict[str, str]
    """``NAME=value`` assignments before the command (and relevant process variables)."""
    settings: dict[str, Any]
    """The recognised vLLM settings, normalised (for reports)."""
    deployment: Deployment
    """The equivalent deployment file (``model:`` names the preset or config.json)."""
    model_facts: ModelFacts
    """The model's facts with ``--hf-overrides`` / ``--disable-sliding-window`` applied
    (the whole model, before tensor parallelism)."""
    notes: tuple[ServeNote, ...]
    dtype_auto: bool = False
    """``--dtype auto`` (the default): the dtype follows the model and the device."""
    kv_options: dict[str, Any] = field(default_factory=dict)
    """KV-planner options the command line sets beyond the deployment's
    (``vllm_compile``, ``kv_cache_layout``, ``max_num_batched_tokens``)."""

    @property
    def shown_argv(self) -> tuple[str, ...]:
        """The words as given, secrets (tokens, API keys) shown as ``***``."""
        return tuple(_redacted(self.argv))

    @property
    def command_line(self) -> str:
        """The command line as given, secrets (tokens, API keys) shown as ``***``."""
        return shlex.join(self.shown_argv)

    def for_device(self, device: str | DeviceRef, catalog: Catalog) -> ServeCommand:
        """The same command on another device (``--dtype auto`` picks float16 on
        devices without bfloat16, as vLLM does)."""
        notes = list(self.notes)
        deployment = self.deployment.model_copy(update={"device": device})
        cc = _device_cc(device, catalog)
        min_cc = startup_profile(catalog, deployment.engine).checks.bfloat16.min_cc \
            if self.dtype_auto and deployment.dtype == "bfloat16" and cc is not None else None
        if min_cc is not None and cc is not None and cc < min_cc:
            deployment = deployment.model_copy(update={"dtype": "float16"})
            note = ServeNote("info", "AS107", "--dtype",
                             "--dtype auto: this GPU has no bfloat16, so vLLM uses float16")
            if note not in notes:
                notes.append(note)
        return replace(self, deployment=deployment, notes=tuple(notes))


_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)
_SECRET_FLAGS = {"--api-key": "list", "--hf-token": "value"}
"""Flags whose values are secrets, and how many words they take (``--api-key`` takes
a list: vllm/entrypoints/openai/cli_args.py:264)."""


def _redacted(argv: Sequence[str]) -> list[str]:
    """``argv`` with the values of secret variables (``HF_TOKEN=...``, ``-e
    HUGGING_FACE_HUB_TOKEN=...``) and of ``--api-key`` / ``--hf-token`` replaced by ``***``,
    so that reports and CI logs never repeat them."""
    out: list[str] = []
    secret_flag: str | None = None  # the secret flag whose value words follow
    for word in argv:
        first = secret_flag is not None and out[-1] == secret_flag
        if first or (secret_flag is not None and _SECRET_FLAGS[secret_flag] == "list"
                     and not word.startswith("-")):
            out.append("***")
            continue
        secret_flag = None
        flag, equals, _ = word.partition("=")
        if flag in _SECRET_FLAGS:
            out.append(f"{flag}=***" if equals else word)
            secret_flag = None if equals else flag
            continue
        match = ENV_ASSIGNMENT.match(word)
        if match and _SECRET_NAME.search(match.group(1)):
            out.append(f"{match.group(1)}=***")
            continue
        out.append(word)
    return out


def _device_cc(device: str | DeviceRef, catalog: Catalog) -> int | None:
    """The device's capability, read by its platform's module (None: unknown device)."""
    try:
        if isinstance(device, DeviceRef):
            platform = catalog.platform(device.platform or catalog.default_platform).name
            return platform_module(platform).parse_capability(device.capability)
        return capability_int(catalog.device(device))
    except InputError:
        return None


def device_ref(name: str) -> str | DeviceRef:
    """A ``--device`` value: a catalog name, or a compute capability like ``9.0``."""
    text = name.strip()
    match = re.fullmatch(r"(?:sm_?)?(\d{1,2})\.(\d)", text, flags=re.IGNORECASE)
    if match:
        return DeviceRef(capability=f"{match.group(1)}.{match.group(2)}")
    return text
