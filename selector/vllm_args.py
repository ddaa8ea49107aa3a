"""A ``vllm serve MODEL [flags...]`` command line -> deployments to check, plus notes.

Pure: no I/O except reading the model's ``config.json`` (a shipped preset or a
local directory, through :mod:`selector.models`); never prints or exits.  Bad
values raise :class:`InputError` naming the flag.  Flags that do not change
attention-backend selection are passed over with a note; knobs that the newest engine
ignores (``VLLM_ATTENTION_BACKEND``...) produce warnings that show the flag to use
instead; flags it removed and unknown keys inside ``--compilation-config`` are errors
(vLLM refuses the command line).

A model whose attention layers differ (sliding-window and full layers, say) gives
one deployment per distinct layer signature: vLLM selects a backend per layer.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from selector.catalog import Catalog, CatalogError, RegisteredCodes, close_matches
from selector.errors import InputError
from selector.memory import startup_profile
from selector.models import ModelFacts
from selector.resources import schemas_dir
from selector.schema.request import (
    AttentionConfig,
    Deployment,
    DeviceRef,
    KVConnector,
    Parallel,
    Speculative,
)
from selector.schema.types import CUDAGRAPH_MODES, KV_CACHE_DTYPES

__all__ = [
    "ARG_CODES",
    "ServeCommand",
    "ServeNote",
    "device_ref",
    "is_serve_command",
    "parse_serve_command",
]

SOURCE = "vllm serve"

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
        return " ".join(_quote(a) for a in self.shown_argv)

    def for_device(self, device: str | DeviceRef, catalog: Catalog) -> ServeCommand:
        """The same command on another device (``--dtype auto`` picks float16 on
        devices without bfloat16, as vLLM does)."""
        notes = list(self.notes)
        deployment = self.deployment.model_copy(update={"device": device})
        cc = _device_cc(device, catalog)
        if self.dtype_auto and deployment.dtype == "bfloat16" and cc is not None and cc < 80:
            deployment = deployment.model_copy(update={"dtype": "float16"})
            note = ServeNote("info", "AS107", "--dtype",
                             "--dtype auto: this GPU has no bfloat16, so vLLM uses float16")
            if note not in notes:
                notes.append(note)
        return replace(self, deployment=deployment, notes=tuple(notes))


_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)
_SECRET_FLAGS = frozenset({"--api-key", "--hf-token"})


def _redacted(argv: Sequence[str]) -> list[str]:
    """``argv`` with the values of secret variables (``HF_TOKEN=...``, ``-e
    HUGGING_FACE_HUB_TOKEN=...``) and of ``--api-key`` / ``--hf-token`` replaced by ``***``,
    so that reports and CI logs never repeat them."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        flag, equals, _ = word.partition("=")
        if flag in _SECRET_FLAGS:
            out.append(f"{flag}=***" if equals else word)
            hide_next = not equals
            continue
        match = _ENV_ASSIGNMENT.match(word)
        if match and _SECRET_NAME.search(match.group(1)):
            out.append(f"{match.group(1)}=***")
            continue
        out.append(word)
    return out


def _quote(arg: str) -> str:
    if arg and re.fullmatch(r"[A-Za-z0-9_./:=,+@%-]+", arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def _device_cc(device: str | DeviceRef, catalog: Catalog) -> int | None:
    if isinstance(device, DeviceRef):
        major, minor = device.capability.split(".")
        return int(major) * 10 + int(minor)
    try:
        return catalog.device(device).capability_int
    except InputError:
        return None


def device_ref(name: str) -> str | DeviceRef:
    """A ``--device`` value: a catalog name, or a compute capability like ``9.0``."""
    text = name.strip()
    match = re.fullmatch(r"(?:sm_?)?(\d{1,2})\.(\d)", text, flags=re.IGNORECASE)
    if match:
        return DeviceRef(capability=f"{match.group(1)}.{match.group(2)}")
    return text


# ---------------------------------------------------------------- the flag tables

_ENV_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)

_ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-dpa": "--data-parallel-address",
    "-dpr": "--data-parallel-rpc-port",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-q": "--quantization",
    "-ac": "--attention-config",
    "-cc": "--compilation-config",
    "-O": "--optimization-level",
}

_HANDLED = {
    "--model", "--attention-backend", "--attention-config", "--block-size", "--kv-cache-dtype",
    "--dtype", "--tensor-parallel-size", "--decode-context-parallel-size",
    "--prefill-context-parallel-size", "--speculative-config", "--compilation-config",
    "--optimization-level", "--kv-transfer-config", "--enable-prefix-caching",
    "--no-enable-prefix-caching", "--max-model-len", "--gpu-memory-utilization",
    "--hf-overrides", "--enforce-eager", "--no-enforce-eager", "--disable-sliding-window",
    "--cp-kv-cache-interleave-size",
}
_BOOLEAN_HANDLED = {"--enable-prefix-caching", "--no-enable-prefix-caching", "--enforce-eager",
                    "--no-enforce-eager", "--disable-sliding-window"}

# Flags of `vllm serve` that take no value (so a following word is not theirs).
_KNOWN_SWITCHES = {
    "--trust-remote-code", "--enable-expert-parallel", "--enable-chunked-prefill",
    "--async-scheduling", "--enable-auto-tool-choice", "--enable-sleep-mode",
    "--disable-log-requests", "--enable-log-requests", "--disable-log-stats",
    "--enable-reasoning", "--disable-custom-all-reduce", "--enable-lora",
    "--disable-frontend-multiprocessing", "--skip-tokenizer-init", "--headless",
    "--enable-prompt-tokens-details", "--language-model-only", "--enable-eplb", "--enable-dbo",
    "--disable-cascade-attn", "--fail-on-environ-validation", "--enable-force-include-usage",
    "--disable-fastapi-docs", "--return-tokens-as-token-ids", "--enable-server-load-tracking",
    "--enable-request-id-headers", "--enable-log-outputs", "--disable-hybrid-kv-cache-manager",
    "--use-v2-block-manager", "--allow-credentials", "--disable-uvicorn-access-log",
    "--enable-ssl-refresh", "--no-use-tqdm-on-load",
}

# Flags that take one value and do not change backend selection.
_KNOWN_VALUED = {
    "--host", "--port", "--tokenizer", "--max-num-seqs", "--max-num-batched-tokens",
    "--swap-space", "--pipeline-parallel-size", "--data-parallel-size",
    "--data-parallel-size-local", "--data-parallel-address", "--data-parallel-rpc-port",
    "--data-parallel-start-rank", "--distributed-executor-backend", "--quantization",
    "--tool-call-parser", "--reasoning-parser", "--tokenizer-mode", "--chat-template",
    "--uvicorn-log-level", "--stream-interval", "--load-format", "--seed", "--api-key",
    "--download-dir", "--revision", "--mamba-cache-mode", "--kv-cache-memory-bytes",
    "--max-cudagraph-capture-size", "--limit-mm-per-prompt", "--kv-cache-dtype-skip-layers",
    "--max-loras", "--max-lora-rank", "--lora-modules", "--root-path", "--config",
    "--generation-config", "--override-generation-config", "--max-logprobs",
    "--speculative-model", "--num-speculative-tokens", "--max-seq-len-to-capture",
    "--long-prefill-token-threshold", "--scheduling-policy", "--expert-placement-strategy",
    "--mm-processor-kwargs", "--tokenizer-revision", "--code-revision", "--moe-backend",
    "--kernel-config", "--ssl-keyfile", "--ssl-certfile", "--middleware", "--api-server-count",
    "--block-allocator", "--num-gpu-blocks-override", "--cpu-offload-gb", "--structured-outputs-config",
}

_NARGS_PLUS = {"--served-model-name", "--allowed-origins", "--allowed-methods", "--allowed-headers"}

# Only these passed-over flags are worth a note: they touch the KV cache or kernels.
_NOTEWORTHY = {
    "--quantization": "weights quantization does not change backend selection; a checkpoint "
                      "that declares a kv_cache_scheme makes --kv-cache-dtype auto mean fp8",
    "--kv-cache-dtype-skip-layers": "per-layer KV dtype exceptions are not modelled",
    "--disable-hybrid-kv-cache-manager": "KV-cache grouping is not part of backend selection",
    "--config": "a vLLM YAML config file is not read; give its settings as flags",
    "--pipeline-parallel-size": "pipeline parallelism does not change backend selection; "
                                "the start-up memory budget is not estimated with it",
    "--data-parallel-size": "data parallelism does not change backend selection",
    "--max-num-seqs": "",
}

_REMOVED_FLAGS: dict[str, str] = {
    "--speculative-model": "--speculative-config '{\"model\": ..., \"num_speculative_tokens\": N}'",
    "--num-speculative-tokens": "--speculative-config '{\"num_speculative_tokens\": N}'",
    "--use-v2-block-manager": "nothing (the V2 block manager is the only one)",
    "--max-seq-len-to-capture": "--max-cudagraph-capture-size",
}

_REMOVED_ENV: dict[str, tuple[Level, str]] = {
    # variable: (level, the flag to use; "{value}" is the variable's value)
    "VLLM_ATTENTION_BACKEND": ("warning", "--attention-backend {value}"),
    "VLLM_FLASH_ATTN_VERSION": ("warning", "--attention-config.flash_attn_version={value}"),
    "VLLM_USE_TRTLLM_ATTENTION": ("warning", "--attention-config.use_trtllm_attention={value}"),
    "VLLM_USE_V1": ("info", ""),
}

_ATTENTION_CONFIG_OTHER = {
    "flash_attn_max_num_splits_for_cuda_graph",
    "disable_flashinfer_q_quantization", "mla_prefill_backend", "use_prefill_decode_attention",
    "use_fp4_indexer_cache",
}

_OPT_LEVEL_CG = {0: "NONE", 1: "PIECEWISE", 2: "FULL_AND_PIECEWISE", 3: "FULL_AND_PIECEWISE"}

_DTYPES = {"auto": "auto", "half": "float16", "float16": "float16", "bfloat16": "bfloat16",
           "float": "float32", "float32": "float32"}


# ---------------------------------------------------------------- small parsers


def _bad(flag: str, message: str, hint: str | None = None) -> InputError:
    return InputError(message, file=SOURCE, field=flag, hint=hint)


def _int(flag: str, value: str, *, low: int = 1, high: int = 1 << 20) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise _bad(flag, f"expected an integer, got {value!r}") from None
    if not low <= number <= high:
        raise _bad(flag, f"{number} is out of range", hint=f"give {low}..{high}")
    return number


def _bytes(flag: str, value: str) -> int:
    """vLLM's ``human_readable_int``: ``8G`` is 8 x 2**30, ``8g`` is 8 x 10**9
    (vllm/utils/argparse_utils.py:30-74)."""
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 10.0 ** (3 * "kmgt".index(suffix) + 3))
        if "." in number:
            raise _bad(flag, f"Decimals are not allowed with binary suffixes like {suffix}. "
                             f"Did you mean to use {number}{suffix.lower()} instead?")
        return int(int(number) * 2 ** (10 * "KMGT".index(suffix) + 10))
    return _int(flag, text, low=0, high=1 << 50)


def _bool(flag: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise _bad(flag, f"expected true or false, got {value!r}")


def _json_object(flag: str, value: str) -> dict[str, Any]:
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise _bad(flag, f"not valid JSON: {exc.msg}",
                   hint="quote the JSON for the shell, e.g. '{\"key\": 1}'") from None
    if not isinstance(data, dict):
        raise _bad(flag, f"expected a JSON object, got {type(data).__name__}")
    return data


def _scalar(value: str) -> Any:
    """A dotted flag's value: JSON where it parses (numbers, true/false), else the text."""
    text = value.strip()
    if text in ("True", "False"):
        return text == "True"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _max_model_len(flag: str, value: str) -> int:
    """vLLM accepts ``32768``, ``32k`` (x1000), ``32K`` (x1024), ``1m``/``1M`` and ``-1``."""
    text = value.strip().replace("_", "")
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG]?)", text)
    if text == "-1":
        return -1
    if not match:
        raise _bad(flag, f"expected a token count like 32768 or 32k, got {value!r}")
    number = float(match.group(1))
    unit = match.group(2)
    scale = {"": 1, "k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2, "g": 1000**3,
             "G": 1024**3}[unit]
    total = int(number * scale)
    if total < 1:
        raise _bad(flag, f"{value!r} is not a positive length")
    return total


def _deep_merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _set_dotted(target: dict[str, Any], path: list[str], value: Any) -> None:
    node = target
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


# ---------------------------------------------------------------- tokenizing


@dataclass
class _Raw:
    """The command line split into what the settings builder needs."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    values: dict[str, str] = field(default_factory=dict)
    """flag -> its value (the last one wins, as with argparse)."""
    dotted: dict[str, dict[str, Any]] = field(default_factory=dict)
    """--attention-config / --compilation-config dotted keys."""
    order: list[str] = field(default_factory=list)
    notes: list[ServeNote] = field(default_factory=list)


def _split_prefix(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``NAME=value`` words (and an optional ``env``) -> variables; the rest."""
    env: dict[str, str] = {}
    index = 0
    words = list(argv)
    while index < len(words):
        word = words[index]
        if word == "env" and index == 0:
            index += 1
            continue
        match = _ENV_ASSIGNMENT.match(word)
        if not match:
            break
        env[match.group(1)] = match.group(2)
        index += 1
    return env, words[index:]


# `docker run` / `podman run` options that take no value (every other option takes one,
# unless written as --opt=value); combined short flags such as -it or -dit are these too.
_CONTAINER_RUNNERS = frozenset({"docker", "podman", "nerdctl"})
_CONTAINER_NO_VALUE = frozenset({
    "-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "--privileged", "--init",
    "-P", "--publish-all", "--read-only", "--no-healthcheck", "--oom-kill-disable",
    "--sig-proxy", "--disable-content-trust", "-q", "--quiet", "--help",
})
_CONTAINER_ENV_FLAGS = frozenset({"-e", "--env"})
_PRIVILEGE_WRAPPERS = frozenset({"sudo"})


def _is_container_flag_without_value(word: str) -> bool:
    if word in _CONTAINER_NO_VALUE or "=" in word:
        return True
    return re.fullmatch(r"-[dit]{2,3}", word) is not None  # -it, -dit, -itd ...


def _unwrap_container(words: list[str]) -> tuple[list[str], dict[str, str]]:
    """``docker run [docker options] IMAGE [args]`` -> the ``vllm serve`` command the
    vLLM image runs with those args (its entry point), and the ``-e NAME=value``
    variables; any other command line is returned as it is."""
    index = 0
    while index < len(words) and Path(words[index]).name in _PRIVILEGE_WRAPPERS:
        index += 1
    if index >= len(words) or Path(words[index]).name not in _CONTAINER_RUNNERS:
        return words, {}
    runner = words[index]
    index += 1
    if index >= len(words) or words[index] not in ("run", "container"):
        raise _bad(runner, f"only `{runner} run ... IMAGE [vllm serve flags]` is understood")
    if words[index] == "container":
        index += 1  # `docker container run`
        if index >= len(words) or words[index] != "run":
            raise _bad(runner, f"only `{runner} run ... IMAGE [vllm serve flags]` is understood")
    index += 1
    env: dict[str, str] = {}
    while index < len(words) and words[index].startswith("-"):
        word = words[index]
        index += 1
        name, _, inline = word.partition("=")
        if name in _CONTAINER_ENV_FLAGS or name.startswith("--env="):
            value = inline if "=" in word else (words[index] if index < len(words) else "")
            if "=" not in word:
                index += 1
            match = _ENV_ASSIGNMENT.match(value)
            if match:
                env[match.group(1)] = match.group(2)
            continue
        if _is_container_flag_without_value(word):
            continue
        index += 1  # the option's value (-v a:b, --gpus all, -p 8000:8000, ...)
    if index >= len(words):
        raise _bad(runner, f"no image in this `{runner} run` line",
                   hint=f"write {runner} run [options] vllm/vllm-openai [vllm serve flags]")
    rest = words[index + 1:]  # after the image
    if rest and (Path(rest[0]).name == "vllm" or re.fullmatch(r"python(\d+(\.\d+)?)?",
                                                              Path(rest[0]).name)):
        return rest, env  # the entry point given explicitly
    return ["vllm", "serve", *rest], env


def _command_body(words: list[str]) -> list[str]:
    if not words:
        raise _bad("MODEL", "no command given after '--'",
                   hint="write e.g. attn-select check --device H100 -- vllm serve MODEL [flags]")
    head = Path(words[0]).name
    if head == "vllm":
        if len(words) < 2 or words[1] != "serve":
            sub = words[1] if len(words) > 1 else ""
            raise _bad("vllm", f"only `vllm serve` command lines are understood, not `vllm {sub}`",
                       hint="give the flags you pass to `vllm serve`")
        return words[2:]
    if re.fullmatch(r"python(\d+(\.\d+)?)?", head):
        if len(words) >= 3 and words[1] == "-m" and words[2] in (
                "vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"):
            return words[3:]
        if len(words) >= 4 and words[1] == "-m" and words[2] == "vllm.entrypoints.cli.main" \
                and words[3] == "serve":
            return words[4:]
        raise _bad(words[0], "only `python -m vllm.entrypoints.openai.api_server` is understood")
    if head == "serve":
        return words[1:]
    raise _bad(words[0], f"expected a `vllm serve ...` command line, got {words[0]!r}",
               hint="write e.g. attn-select check --device H100 -- vllm serve MODEL [flags]")


def is_serve_command(words: Sequence[str]) -> bool:
    """Whether positional arguments look like a command line rather than file names."""
    if not words:
        return False
    _, rest = _split_prefix(words)
    if len(rest) < len(words):
        return True
    if not rest:
        return False
    if any(Path(w).name in _CONTAINER_RUNNERS for w in rest[:2]) and "run" in rest[1:4]:
        return True
    head = Path(rest[0]).name
    return head == "vllm" or (re.fullmatch(r"python(\d+(\.\d+)?)?", head) is not None
                              and len(rest) > 2 and rest[1] == "-m")


def _normalise_flag(word: str) -> tuple[str, str | None]:
    """``--max_model_len=8`` -> (``--max-model-len``, ``8``); aliases resolved; dotted
    keys keep their underscores (as vLLM's FlexibleArgumentParser does)."""
    value: str | None = None
    if "=" in word:
        word, value = word.split("=", 1)
    match = re.fullmatch(r"-O(\d)", word)
    if match:
        return "--optimization-level", match.group(1)
    head, dot, tail = word.partition(".")
    if head.startswith("--"):
        head = "--" + head[2:].replace("_", "-")
    head = _ALIASES.get(head, head)
    return head + dot + tail, value


def _tokenize(argv: Sequence[str]) -> _Raw:
    env, words = _split_prefix(argv)
    words, container_env = _unwrap_container(words)
    env.update(container_env)
    body = _command_body(words)
    raw = _Raw(argv=tuple(argv), env=env)
    index = 0
    while index < len(body):
        word = body[index]
        index += 1
        if not word.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", word):
            if raw.model is None:
                raw.model = word
            else:
                raw.notes.append(ServeNote("info", "AS103", word,
                                           f"extra positional argument {word!r} passed over"))
            continue
        flag, value = _normalise_flag(word)
        base, dot, key = flag.partition(".")
        takes_value = not (flag in _KNOWN_SWITCHES or flag in _BOOLEAN_HANDLED
                           or flag.startswith("--no-"))
        if flag in _NARGS_PLUS:
            while value is None and index < len(body) and not body[index].startswith("-"):
                index += 1
            raw.order.append(flag)
            continue
        if value is None and takes_value:
            if index < len(body) and (not body[index].startswith("-")
                                      or re.fullmatch(r"-\d+(\.\d+)?", body[index])):
                value = body[index]
                index += 1
            elif dot or flag in _HANDLED or flag in _KNOWN_VALUED:
                raise _bad(flag, "expected a value after this flag")
        if dot and base in ("--attention-config", "--compilation-config"):
            if value is None:
                raise _bad(flag, "expected a value after this flag")
            raw.dotted.setdefault(base, {})
            _set_dotted(raw.dotted[base], key.split("."), _scalar(value))
            raw.order.append(flag)
            continue
        if dot and base == "--optimization-level":
            # the legacy -O.key=value spelling of --compilation-config.key
            raw.dotted.setdefault("--compilation-config", {})
            _set_dotted(raw.dotted["--compilation-config"], key.split("."), _scalar(value or ""))
            raw.order.append(flag)
            continue
        if dot:
            raw.notes.append(ServeNote("info", "AS103", flag, f"{flag} passed over"))
            continue
        if flag == "--model":
            if value is None:
                raise _bad(flag, "expected a value after this flag")
            if raw.model is None:
                raw.model = value
            continue
        raw.order.append(flag)
        raw.values[flag] = value if value is not None else ""
    return raw


# ---------------------------------------------------------------- the model


def _load_raw_config(model: str, override: str | None) -> tuple[dict[str, Any], str, str, str]:
    """(config.json mapping, file, display name, how it was resolved)."""
    from selector.models import list_presets, preset_dir
    from selector.models.presets import match_preset, preset_origin

    target = override or model
    path = Path(target).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.is_file():
        file = str(path)
        how = f"read {file}"
    else:
        presets = list_presets()
        preset = match_preset(target)
        if preset is None:
            lowered = {p.lower(): p for p in presets}
            preset = lowered.get(target.strip().lower())
        if preset is None:
            flag = "--model" if override else "MODEL"
            raise InputError(
                f"cannot resolve {target!r} to a model: no local config.json and no shipped "
                "preset of that name", file=SOURCE, field=flag,
                hint="pass the model's directory (with config.json) or name a preset with "
                     "attn-select check --model PRESET; presets: " + ", ".join(presets))
        file = str(preset_dir() / f"{preset}.json")
        exact = target.strip().rstrip("/").lower() == (preset_origin(preset) or "").lower()
        if preset.lower() == target.strip().lower():
            how = f"the shipped preset {preset!r}"
        elif exact:
            how = f"the shipped preset {preset!r} (the config.json of {target})"
        else:
            how = (f"resolved {target!r} to the shipped preset {preset!r} (same architecture; "
                   "no config.json of it here)")
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the model's config: {exc}", file=file) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=file, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError("a config.json must hold a JSON object", file=file)
    name = Path(file).stem if file.endswith(".json") and Path(file).name != "config.json" \
        else str(Path(file).parent)
    return data, file, name, how


def _is_shipped_preset(file: str) -> bool:
    """Whether ``file`` is one of the shipped presets (a deployment names those by name;
    any other config.json, whatever its file name, by its path)."""
    from selector.models import preset_dir

    return Path(file).resolve().parent == preset_dir().resolve()


# ---------------------------------------------------------------- settings


@dataclass
class _Settings:
    attention_backend: str | None = None
    flash_attn_version: int | None = None
    use_trtllm_attention: bool | None = None
    use_non_causal: bool = False
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    tp: int = 1
    dcp: int = 1
    pcp: int = 1
    cp_interleave: int = 1
    num_speculative_tokens: int = 0
    cudagraph_mode: str = "FULL_AND_PIECEWISE"
    kv_connector: str | None = None
    enable_prefix_caching: bool | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_num_seqs: int | None = None
    moe_backend: str | None = None
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    hf_overrides: dict[str, Any] = field(default_factory=dict)
    disable_sliding_window: bool = False
    backend_per_kind: dict[str, str] = field(default_factory=dict)
    kv_options: dict[str, Any] = field(default_factory=dict)
    batch_invariant: bool = False
    environment: dict[str, bool] = field(default_factory=dict)


def _backend_name(flag: str, value: str, catalog: Catalog, engine: str | None) -> str | None:
    text = value.strip()
    if not text or text.lower() == "auto":
        return None
    backends = catalog.engine(engine).backends
    name = text.upper()
    if name not in backends:
        raise _bad(flag, f"unknown attention backend {text!r}",
                   hint=close_matches(name, sorted(backends)))
    return name


def _attention_config(raw: _Raw, settings: _Settings, notes: list[ServeNote],
                      catalog: Catalog, engine: str | None) -> None:
    config: dict[str, Any] = {}
    if "--attention-config" in raw.values:
        config = _json_object("--attention-config", raw.values["--attention-config"])
    config = _deep_merge(config, raw.dotted.get("--attention-config", {}))
    for key, value in config.items():
        flag = f"--attention-config.{key}"
        if key == "backend":
            if value is not None and "--attention-backend" in raw.values:
                raise _bad("--attention-backend",
                           "attention_backend and attention_config.backend are mutually exclusive",
                           hint="give the backend once: --attention-backend NAME")
            settings.attention_backend = (
                None if value is None else _backend_name(flag, str(value), catalog, engine))
        elif key == "flash_attn_version":
            if value is None:
                continue
            if value not in (2, 3, 4) or isinstance(value, bool):
                raise _bad(flag, f"unknown FlashAttention version {value!r}", hint="valid: 2, 3, 4")
            settings.flash_attn_version = int(value)
        elif key == "use_trtllm_attention":
            settings.use_trtllm_attention = None if value is None else _bool(flag, value)
        elif key == "use_non_causal":
            settings.use_non_causal = _bool(flag, value)
        elif key == "backend_per_kind":
            if not isinstance(value, dict):
                raise _bad(flag, "expected a JSON object of kind -> backend",
                           hint='e.g. \'{"sliding_window": "TRITON_ATTN"}\'')
            for kind, name in value.items():
                chosen = _backend_name(f"{flag}.{kind}", str(name), catalog, engine)
                if chosen is not None:
                    settings.backend_per_kind[str(kind)] = chosen
        elif key in _ATTENTION_CONFIG_OTHER or key.startswith("flex_attn_"):
            notes.append(ServeNote("info", "AS104", flag,
                                   f"{flag} is not modelled by attn-select; passed over"))
        else:
            label = catalog.engine(engine).label
            notes.append(ServeNote("warning", "AS103", flag,
                                   f"{flag}: {label}'s AttentionConfig has no field {key!r} "
                                   "that attn-select knows of"))


def _compilation_fields(catalog: Catalog, engine: str | None) -> frozenset[str]:
    """CompilationConfig's fields in this engine (its startup.yaml), empty if unknown."""
    try:
        return frozenset(startup_profile(catalog, engine).checks.compilation_config_fields)
    except (CatalogError, InputError):
        return frozenset()


def _compilation_config(raw: _Raw, settings: _Settings, notes: list[ServeNote],
                        catalog: Catalog, engine: str | None) -> None:
    config: dict[str, Any] = {}
    level: int | None = None
    if "--compilation-config" in raw.values:
        text = raw.values["--compilation-config"].strip()
        if re.fullmatch(r"\d", text):
            config = {"mode": int(text)}
            notes.append(ServeNote("info", "AS107", "--compilation-config",
                                   f"--compilation-config {text} is the legacy compilation level"))
        else:
            config = _json_object("--compilation-config", text)
    config = _deep_merge(config, raw.dotted.get("--compilation-config", {}))
    if "--optimization-level" in raw.values:
        level = _int("--optimization-level", raw.values["--optimization-level"], low=0, high=3)
        settings.cudagraph_mode = _OPT_LEVEL_CG[level]
    for key in ("mode", "level"):
        if key in config:
            mode = config[key]
            if mode in (0, "NONE", "none", "0") and "cudagraph_mode" not in config:
                notes.append(ServeNote(
                    "info", "AS107", f"--compilation-config.{key}",
                    "compilation mode NONE: vLLM defaults to no CUDA graphs (cudagraph_mode NONE)"))
                settings.cudagraph_mode = "NONE"
            if mode in (0, "NONE", "none", "0"):
                settings.kv_options["vllm_compile"] = False
    if "cudagraph_mode" in config:
        flag = "--compilation-config.cudagraph_mode"
        value = str(config["cudagraph_mode"]).strip().upper()
        if value not in CUDAGRAPH_MODES:
            raise _bad(flag, f"unknown CUDA-graph mode {config['cudagraph_mode']!r}",
                       hint="valid: " + ", ".join(CUDAGRAPH_MODES))
        settings.cudagraph_mode = value
    fields = _compilation_fields(catalog, engine)
    for key in config:
        if fields and key not in fields:
            value = config[key]
            code = catalog.code("SU005")
            close = difflib.get_close_matches(key, sorted(fields), n=1, cutoff=0.6)
            notes.append(ServeNote(
                "error", "SU005", f"--compilation-config.{key}",
                code.message.format(flag="--compilation-config/-cc",
                                    config_class="CompilationConfig", key=key,
                                    input_value=repr(value), input_type=type(value).__name__),
                hint=(f"did you mean {close[0]!r}?" if close
                      else "see CompilationConfig's fields in vLLM's docs")))
    other = sorted(k for k in config if k not in ("cudagraph_mode", "mode", "level")
                   and (not fields or k in fields))
    if other:
        notes.append(ServeNote("info", "AS104", "--compilation-config",
                               "compilation settings that do not change backend selection "
                               "passed over: " + ", ".join(other)))


def _speculative_config(raw: _Raw, settings: _Settings, notes: list[ServeNote]) -> None:
    if "--speculative-config" not in raw.values:
        return
    config = _json_object("--speculative-config", raw.values["--speculative-config"])
    tokens = config.get("num_speculative_tokens")
    flag = "--speculative-config.num_speculative_tokens"
    if tokens is None:
        if config.get("method") in ("ngram", "eagle", "eagle3", "mtp", "medusa", "draft_model") \
                or config.get("model"):
            notes.append(ServeNote("warning", "AS104", flag,
                                   "num_speculative_tokens is not given; vLLM takes it from the "
                                   "draft model's config: attn-select assumes 1",
                                   hint="give num_speculative_tokens explicitly"))
            settings.num_speculative_tokens = 1
        return
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= 64:
        raise _bad(flag, f"expected an integer 0..64, got {tokens!r}")
    settings.num_speculative_tokens = tokens


def _environment(env: Mapping[str, str], settings: _Settings, notes: list[ServeNote],
                 catalog: Catalog, engine: str | None) -> None:
    for name, value in env.items():
        if name in _REMOVED_ENV:
            level, replacement = _REMOVED_ENV[name]
            shown = value
            if name == "VLLM_ATTENTION_BACKEND":
                shown = re.sub(r"_VLLM_V1$", "", value.strip().upper())
                backends = catalog.engine(engine).backends
                if shown not in backends:
                    hint = close_matches(shown, sorted(backends))
                    replacement = "--attention-backend NAME (" + hint + ")"
            if name == "VLLM_USE_TRTLLM_ATTENTION" and shown.strip() in ("0", "1"):
                shown = "true" if shown.strip() == "1" else "false"
            flag = replacement.format(value=shown) if replacement else ""
            label = catalog.engine(engine).label
            message = f"{name}={value} has no effect: {label} does not read it"
            if name == "VLLM_USE_V1":
                message = f"{name}={value} has no effect: V1 is {label}'s only engine"
            notes.append(ServeNote(level, "AS101", name, message,
                                   hint=f"use {flag}" if flag else ""))
        elif name == "VLLM_BATCH_INVARIANT":
            settings.batch_invariant = _bool(name, value)
            notes.append(ServeNote("info", "AS107", name,
                                   f"{name}={value}: batch-invariant mode "
                                   f"{'on' if settings.batch_invariant else 'off'}"))
        elif name == "VLLM_HAS_FLASHINFER_CUBIN":
            settings.environment["flashinfer_cubin"] = _bool(name, value)
        elif name == "VLLM_KV_CACHE_LAYOUT":
            settings.kv_options["kv_cache_layout"] = value.strip()
            notes.append(ServeNote("info", "AS107", name, f"{name}={value}: KV-cache layout forced"))
        elif name.startswith("VLLM_"):
            notes.append(ServeNote("info", "AS104", name,
                                   f"{name} does not change backend selection in attn-select's "
                                   "model; passed over"))


def _settings(raw: _Raw, catalog: Catalog, engine: str | None,
              notes: list[ServeNote]) -> _Settings:
    s = _Settings()
    values = raw.values
    if "--attention-backend" in values:
        s.attention_backend = _backend_name("--attention-backend", values["--attention-backend"],
                                            catalog, engine)
    _attention_config(raw, s, notes, catalog, engine)
    if "--block-size" in values:
        s.block_size = _int("--block-size", values["--block-size"], high=65536)
    if "--kv-cache-dtype" in values:
        kv = values["--kv-cache-dtype"].strip()
        if kv not in KV_CACHE_DTYPES:
            raise _bad("--kv-cache-dtype", f"unknown KV-cache dtype {kv!r}",
                       hint=close_matches(kv, list(KV_CACHE_DTYPES)))
        s.kv_cache_dtype = kv
    if "--dtype" in values:
        dtype = values["--dtype"].strip().lower()
        if dtype not in _DTYPES:
            raise _bad("--dtype", f"unknown dtype {values['--dtype']!r}",
                       hint="valid: " + ", ".join(_DTYPES))
        s.dtype = _DTYPES[dtype]
    if "--tensor-parallel-size" in values:
        s.tp = _int("--tensor-parallel-size", values["--tensor-parallel-size"], high=1024)
    if "--decode-context-parallel-size" in values:
        s.dcp = _int("--decode-context-parallel-size",
                     values["--decode-context-parallel-size"], high=1024)
    if "--prefill-context-parallel-size" in values:
        s.pcp = _int("--prefill-context-parallel-size",
                     values["--prefill-context-parallel-size"], high=1024)
    if "--cp-kv-cache-interleave-size" in values:
        s.cp_interleave = _int("--cp-kv-cache-interleave-size",
                               values["--cp-kv-cache-interleave-size"])
    _speculative_config(raw, s, notes)
    _compilation_config(raw, s, notes, catalog, engine)
    if "--enforce-eager" in raw.order and "--no-enforce-eager" not in raw.order:
        s.cudagraph_mode = "NONE"
        notes.append(ServeNote("info", "AS107", "--enforce-eager",
                               "--enforce-eager: no CUDA graphs (cudagraph_mode NONE)"))
    if "--kv-transfer-config" in values:
        config = _json_object("--kv-transfer-config", values["--kv-transfer-config"])
        connector = config.get("kv_connector")
        if not isinstance(connector, str) or not connector:
            raise _bad("--kv-transfer-config.kv_connector", "missing the connector name",
                       hint='e.g. {"kv_connector": "NixlConnector", "kv_role": "kv_both"}')
        s.kv_connector = connector
    if "--enable-prefix-caching" in raw.order:
        s.enable_prefix_caching = True
    if "--no-enable-prefix-caching" in raw.order:
        s.enable_prefix_caching = False
    if "--max-model-len" in values:
        s.max_model_len = _max_model_len("--max-model-len", values["--max-model-len"])
    if "--gpu-memory-utilization" in values:
        text = values["--gpu-memory-utilization"]
        try:
            fraction = float(text)
        except ValueError:
            raise _bad("--gpu-memory-utilization", f"expected a fraction, got {text!r}") from None
        if not 0 < fraction <= 1:
            raise _bad("--gpu-memory-utilization", f"{fraction} is not in (0, 1]",
                       hint="e.g. 0.9 for 90% of the GPU's memory")
        s.gpu_memory_utilization = fraction
    if "--max-num-batched-tokens" in values:
        s.kv_options["max_num_batched_tokens"] = _int("--max-num-batched-tokens",
                                                      values["--max-num-batched-tokens"])
    if "--pipeline-parallel-size" in values:
        s.pipeline_parallel_size = _int("--pipeline-parallel-size",
                                        values["--pipeline-parallel-size"], high=1024)
    if "--data-parallel-size" in values:
        s.data_parallel_size = _int("--data-parallel-size", values["--data-parallel-size"],
                                    high=65536)
    s.enable_expert_parallel = ("--enable-expert-parallel" in raw.order
                                and "--no-enable-expert-parallel" not in raw.order)
    if "--moe-backend" in values:
        backend = values["--moe-backend"].strip().lower().replace("-", "_")
        s.moe_backend = None if backend == "auto" else backend
    if "--max-num-seqs" in values:
        s.max_num_seqs = _int("--max-num-seqs", values["--max-num-seqs"])
    if "--kv-cache-memory-bytes" in values:
        s.kv_cache_memory_bytes = _bytes("--kv-cache-memory-bytes",
                                         values["--kv-cache-memory-bytes"])
    if "--hf-overrides" in values:
        s.hf_overrides = _json_object("--hf-overrides", values["--hf-overrides"])
    if "--disable-sliding-window" in raw.order:
        s.disable_sliding_window = True
    return s


@functools.cache
def _release_flags() -> dict[str, frozenset[str]]:
    """Engine flags of `vllm serve` per vLLM release (schemas/vllm-serve-flags.yaml; the
    oldest release complete, each newer one as added / removed)."""
    import yaml

    path = schemas_dir() / "vllm-serve-flags.yaml"
    table: dict[str, frozenset[str]] = {}
    if path.is_file():
        current: set[str] = set()
        for version, entry in (yaml.safe_load(path.read_text()) or {}).get("releases", {}).items():
            if "flags" in entry:
                current = set(entry["flags"])
            current = (current | set(entry.get("added") or ())) - set(entry.get("removed") or ())
            table[str(version)] = frozenset(current)
    return table


def _release_note(flag: str, version: str, catalog: Catalog) -> ServeNote | None:
    """SU007 when ``flag`` is an engine flag of some vLLM release but not of ``version``:
    that release's parser refuses the command line."""
    table = _release_flags()
    flags = table.get(version)
    name = flag.split(".", 1)[0]
    if flags is None or name in flags or not any(name in f for f in table.values()):
        return None
    having = [v for v, f in table.items() if name in f]
    code = catalog.code("SU007")
    return ServeNote("error", "SU007", flag, code.message.format(flag=name),
                     hint=code.hint.format(flag=name, releases=", ".join(having)))


def _flag_notes(raw: _Raw, notes: list[ServeNote], catalog: Catalog, version: str = "") -> None:
    seen: set[str] = set()
    for flag in raw.order:
        if flag in seen:
            continue
        seen.add(flag)
        release_note = _release_note(flag, version, catalog)
        if release_note is not None:
            notes.append(release_note)
            continue
        if flag.split(".", 1)[0] in _HANDLED:
            continue
        if flag in _REMOVED_FLAGS:
            code = catalog.code("SU004")
            notes.append(ServeNote("error", "SU004", flag, code.message.format(flag=flag),
                                   hint=code.hint.format(replacement=_REMOVED_FLAGS[flag])))
        elif _NOTEWORTHY.get(flag):
            notes.append(ServeNote("info", "AS104", flag, f"{flag}: {_NOTEWORTHY[flag]}"))
        elif not _is_known(flag):
            notes.append(ServeNote("info", "AS103", flag,
                                   f"{flag} is not a flag attn-select knows; passed over"))


def _is_known(flag: str) -> bool:
    if flag in _KNOWN_SWITCHES or flag in _KNOWN_VALUED or flag in _NARGS_PLUS \
            or flag in _NOTEWORTHY:
        return True
    if flag.startswith("--no-") and ("--" + flag[5:]) in _KNOWN_SWITCHES:
        return True
    return any(flag in flags for flags in _release_flags().values())


# ---------------------------------------------------------------- layers -> deployments


def _without_sliding_window(model: ModelFacts) -> ModelFacts:
    layers = tuple(layer.model_copy(update={"sliding_window": None}) for layer in model.layers)
    return model.model_copy(update={"layers": layers})


def _deployment(model: ModelFacts, model_ref: str, s: _Settings, engine: str | None,
                device: str | DeviceRef) -> Deployment:
    dtype = s.dtype if s.dtype != "auto" else model.runtime_dtype
    try:
        return Deployment(
            engine=engine, model=model_ref, device=device, dtype=dtype,
            kv_cache_dtype=s.kv_cache_dtype, block_size=s.block_size,
            attention_backend=s.attention_backend, cudagraph_mode=s.cudagraph_mode,
            max_model_len=s.max_model_len if s.max_model_len and s.max_model_len > 0 else None,
            gpu_memory_utilization=s.gpu_memory_utilization,
            kv_cache_memory_bytes=s.kv_cache_memory_bytes,
            max_num_batched_tokens=s.kv_options.get("max_num_batched_tokens"),
            max_num_seqs=s.max_num_seqs,
            moe_backend=s.moe_backend,
            enable_prefix_caching=True if s.enable_prefix_caching is None
            else s.enable_prefix_caching,
            attention_config=AttentionConfig(
                backend_per_kind=dict(s.backend_per_kind),
                flash_attn_version=s.flash_attn_version,
                use_trtllm_attention=s.use_trtllm_attention,
                use_non_causal=s.use_non_causal),
            parallel=Parallel(tensor_parallel_size=s.tp, decode_context_parallel_size=s.dcp,
                              prefill_context_parallel_size=s.pcp,
                              cp_kv_cache_interleave_size=s.cp_interleave),
            speculative=Speculative(num_speculative_tokens=s.num_speculative_tokens),
            batch_invariant=s.batch_invariant,
            kv_connector=KVConnector(name=s.kv_connector) if s.kv_connector else None,
            environment=dict(s.environment),
        )
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise InputError(f"the command line does not make a valid deployment: {exc}",
                         file=SOURCE) from None


def _summary(s: _Settings) -> dict[str, Any]:
    return {
        "attention_backend": s.attention_backend,
        "attention_config": {"backend_per_kind": s.backend_per_kind or None,
                             "flash_attn_version": s.flash_attn_version,
                             "use_trtllm_attention": s.use_trtllm_attention,
                             "use_non_causal": s.use_non_causal},
        "block_size": s.block_size,
        "kv_cache_dtype": s.kv_cache_dtype,
        "dtype": s.dtype,
        "tensor_parallel_size": s.tp,
        "decode_context_parallel_size": s.dcp,
        "prefill_context_parallel_size": s.pcp,
        "num_speculative_tokens": s.num_speculative_tokens,
        "cudagraph_mode": s.cudagraph_mode,
        "kv_connector": s.kv_connector,
        "enable_prefix_caching": s.enable_prefix_caching,
        "max_model_len": s.max_model_len,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "hf_overrides": s.hf_overrides or None,
        "batch_invariant": s.batch_invariant,
        "pipeline_parallel_size": s.pipeline_parallel_size,
        "data_parallel_size": s.data_parallel_size,
        "enable_expert_parallel": s.enable_expert_parallel,
    }


def parse_serve_command(argv: Sequence[str], *, device: str | DeviceRef, catalog: Catalog,
                        engine: str | None = None, model: str | None = None,
                        environ: Mapping[str, str] | None = None) -> ServeCommand:
    """Parse a ``vllm serve`` command line (as typed after ``attn-select check --``).

    ``model`` overrides MODEL (a preset name or a directory with config.json) for a
    command whose MODEL is a path on another machine; ``environ`` adds process
    variables (only ``VLLM_*`` ones are read).
    """
    from selector.models import parse_config

    raw = _tokenize(argv)
    if raw.model is None and model is None:
        raise _bad("MODEL", "no MODEL in the command line",
                   hint="write vllm serve MODEL [flags], or pass attn-select check --model PRESET")
    env = {k: v for k, v in (environ or {}).items() if k.startswith("VLLM_")}
    env.update(raw.env)
    notes: list[ServeNote] = list(raw.notes)
    engine_data = catalog.engine(engine)
    _flag_notes(raw, notes, catalog,
                str(engine_data.version) if engine_data.family == "vllm" else "")
    settings = _settings(raw, catalog, engine, notes)
    _environment(env, settings, notes, catalog, engine)
    data, file, name, how = _load_raw_config(raw.model or "", model)
    notes.append(ServeNote("info", "AS105", "--model" if model else "MODEL", how))
    if settings.hf_overrides:
        data = _deep_merge(data, settings.hf_overrides)
        notes.append(ServeNote("info", "AS107", "--hf-overrides",
                               "applied to the model's config: "
                               + ", ".join(sorted(settings.hf_overrides))))
    facts = parse_config(data, file=file, name=name)
    if not any(layer.is_attention for layer in facts.layers):
        raise InputError("the model has no attention layers to check", file=file, field="model")
    if settings.disable_sliding_window:
        if any(layer.sliding_window for layer in facts.layers):
            notes.append(ServeNote("info", "AS107", "--disable-sliding-window",
                                   "--disable-sliding-window: sliding-window layers are checked "
                                   "as full attention"))
        facts = _without_sliding_window(facts)
    if any(layer.attention_chunk_size for layer in facts.layers):
        notes.append(ServeNote("info", "AS104", "model",
                               "chunked local-attention layers are checked as full attention"))
    model_ref = name if _is_shipped_preset(file) else file
    deployment = _deployment(facts, model_ref, settings, engine, device)
    rank = {"error": 0, "warning": 1, "info": 2}
    ordered = sorted(notes, key=lambda n: (rank[n.level], notes.index(n)))
    return ServeCommand(
        argv=tuple(argv), model=raw.model or (model or ""), model_source=facts.name,
        environment=env, settings=_summary(settings), deployment=deployment, model_facts=facts,
        notes=tuple(ordered), kv_options=dict(settings.kv_options),
        dtype_auto=settings.dtype == "auto",
    )

