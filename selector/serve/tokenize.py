"""A ``vllm serve`` command line (as typed, or inside ``docker run`` / ``python -m``)
-> its variables, MODEL and flags (:class:`RawCommand`), as vLLM's parser reads them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selector.serve.command import ENV_ASSIGNMENT, ServeNote
from selector.serve.flags import ServeFlags
from selector.serve.values import bad_value, parse_scalar, set_dotted

__all__ = ["RawCommand", "is_serve_command", "tokenize"]


@dataclass
class RawCommand:
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
        match = ENV_ASSIGNMENT.match(word)
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
        raise bad_value(runner, f"only `{runner} run ... IMAGE [vllm serve flags]` is understood")
    if words[index] == "container":
        index += 1  # `docker container run`
        if index >= len(words) or words[index] != "run":
            raise bad_value(runner, f"only `{runner} run ... IMAGE [vllm serve flags]` is understood")
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
            match = ENV_ASSIGNMENT.match(value)
            if match:
                env[match.group(1)] = match.group(2)
            continue
        if _is_container_flag_without_value(word):
            continue
        index += 1  # the option's value (-v a:b, --gpus all, -p 8000:8000, ...)
    if index >= len(words):
        raise bad_value(runner, f"no image in this `{runner} run` line",
                   hint=f"write {runner} run [options] vllm/vllm-openai [vllm serve flags]")
    rest = words[index + 1:]  # after the image
    if rest and (Path(rest[0]).name == "vllm" or re.fullmatch(r"python(\d+(\.\d+)?)?",
                                                              Path(rest[0]).name)):
        return rest, env  # the entry point given explicitly
    return ["vllm", "serve", *rest], env


def _command_body(words: list[str]) -> list[str]:
    if not words:
        raise bad_value("MODEL", "no command given after '--'",
                   hint="write e.g. attn-select check --device H100 -- vllm serve MODEL [flags]")
    head = Path(words[0]).name
    if head == "vllm":
        if len(words) < 2 or words[1] != "serve":
            sub = words[1] if len(words) > 1 else ""
            raise bad_value("vllm", f"only `vllm serve` command lines are understood, not `vllm {sub}`",
                       hint="give the flags you pass to `vllm serve`")
        return words[2:]
    if re.fullmatch(r"python(\d+(\.\d+)?)?", head):
        if len(words) >= 3 and words[1] == "-m" and words[2] in (
                "vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"):
            return words[3:]
        if len(words) >= 4 and words[1] == "-m" and words[2] == "vllm.entrypoints.cli.main" \
                and words[3] == "serve":
            return words[4:]
        raise bad_value(words[0], "only `python -m vllm.entrypoints.openai.api_server` is understood")
    if head == "serve":
        return words[1:]
    raise bad_value(words[0], f"expected a `vllm serve ...` command line, got {words[0]!r}",
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


def _normalise_flag(word: str, aliases: Mapping[str, str]) -> tuple[str, str | None]:
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
    head = aliases.get(head, head)
    return head + dot + tail, value


def tokenize(argv: Sequence[str], table: ServeFlags) -> RawCommand:
    """Split a command line into the variables, MODEL and flags the settings are built from."""
    env, words = _split_prefix(argv)
    words, container_env = _unwrap_container(words)
    env.update(container_env)
    body = _command_body(words)
    raw = RawCommand(argv=tuple(argv), env=env)
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
        flag, value = _normalise_flag(word, table.aliases)
        takes = table.takes(flag)
        base, dot, key = flag.partition(".")
        takes_value = not (takes == "switch" or flag.startswith("--no-"))
        if takes == "list":
            while value is None and index < len(body) and not body[index].startswith("-"):
                index += 1
            raw.order.append(flag)
            continue
        if value is None and takes_value:
            if index < len(body) and (not body[index].startswith("-")
                                      or re.fullmatch(r"-\d+(\.\d+)?", body[index])):
                value = body[index]
                index += 1
            elif dot or takes == "value":
                raise bad_value(flag, "expected a value after this flag")
        if dot and base in ("--attention-config", "--compilation-config"):
            if value is None:
                raise bad_value(flag, "expected a value after this flag")
            raw.dotted.setdefault(base, {})
            set_dotted(raw.dotted[base], key.split("."), parse_scalar(value))
            raw.order.append(flag)
            continue
        if dot and base == "--optimization-level":
            # the legacy -O.key=value spelling of --compilation-config.key
            raw.dotted.setdefault("--compilation-config", {})
            set_dotted(raw.dotted["--compilation-config"], key.split("."), parse_scalar(value or ""))
            raw.order.append(flag)
            continue
        if dot:
            raw.notes.append(ServeNote("info", "AS103", flag, f"{flag} passed over"))
            continue
        if flag == "--model":
            if value is None:
                raise bad_value(flag, "expected a value after this flag")
            if raw.model is None:
                raw.model = value
            continue
        raw.order.append(flag)
        raw.values[flag] = value if value is not None else ""
    return raw
