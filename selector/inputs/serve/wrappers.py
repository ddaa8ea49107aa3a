"""Where the ``vllm serve`` words of a command line are: leading ``NAME=value``
variables (and ``env``), a ``docker run`` / ``podman run`` wrapper (its ``-e``
variables; the vLLM image's entry point is ``vllm serve``), ``sudo``, and the command
itself (``vllm serve``, ``python -m vllm.entrypoints.openai.api_server``)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from selector.errors import InputError
from selector.inputs.serve.values import bad_value

__all__ = ["ENV_ASSIGNMENT", "command_body", "container_image", "image_release",
           "is_serve_command", "serve_words"]

ENV_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
"""A ``NAME=value`` word."""


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
_COMPOSE = frozenset({"docker-compose", "podman-compose"})
_VLLM_IMAGE = re.compile(r"(?:^|/)vllm-openai(?:-[\w.]+)?:v?(\d+\.\d+\.\d+)(?:$|[^\d.])")
"""vLLM's image (``vllm/vllm-openai``, also ``-rocm`` ...) tagged with a release."""


def _expanded(argv: Sequence[str]) -> list[str]:
    """A whole command line given as one word (``-- "vllm serve MODEL -tp 2"``) split
    as the shell would split it; any other words as they are."""
    words = list(argv)
    if len(words) == 1 and any(c.isspace() for c in words[0]):
        try:
            return shlex.split(words[0])
        except ValueError as exc:  # an unclosed quote
            raise bad_value("vllm serve", f"the quoted command line does not split: {exc}",
                            hint="give the command line's words after '--', unquoted") from None
    return words


def _compose_refusal(runner: str) -> InputError:
    return bad_value(runner, f"`{runner} compose` does not show the service's command: the "
                     "command line is in the compose file",
                     hint="pass the service's `command:` after '--', e.g. attn-select check "
                          "--device H100 -- vllm serve MODEL [flags] (the vllm-openai image's "
                          "entry point is `vllm serve`)")
_PRIVILEGE_WRAPPERS = frozenset({"sudo"})


def _is_container_flag_without_value(word: str) -> bool:
    if word in _CONTAINER_NO_VALUE or "=" in word:
        return True
    return re.fullmatch(r"-[dit]{2,3}", word) is not None  # -it, -dit, -itd ...


def _unwrap_container(words: list[str]) -> tuple[list[str], dict[str, str], str | None]:
    """``docker run [docker options] IMAGE [args]`` -> the ``vllm serve`` command the
    vLLM image runs with those args (its entry point), the ``-e NAME=value`` variables
    and the image; any other command line is returned as it is."""
    index = 0
    while index < len(words) and Path(words[index]).name in _PRIVILEGE_WRAPPERS:
        index += 1
    if index < len(words) and Path(words[index]).name in _COMPOSE:
        raise _compose_refusal(Path(words[index]).name.split("-")[0])
    if index >= len(words) or Path(words[index]).name not in _CONTAINER_RUNNERS:
        return words, {}, None
    runner = words[index]
    index += 1
    if index < len(words) and words[index] == "compose":
        raise _compose_refusal(runner)
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
    image = words[index]
    rest = words[index + 1:]  # after the image
    if rest and (Path(rest[0]).name == "vllm" or re.fullmatch(r"python(\d+(\.\d+)?)?",
                                                              Path(rest[0]).name)):
        return rest, env, image  # the entry point given explicitly
    return ["vllm", "serve", *rest], env, image


def command_body(words: list[str]) -> list[str]:
    if not words:
        raise bad_value("MODEL", "no command given after '--'",
                   hint="write e.g. attn-select check --device H100 -- vllm serve MODEL [flags]")
    head = Path(words[0]).name
    if head == "vllm":
        if len(words) < 2 or words[1] != "serve":
            sub = words[1].strip() if len(words) > 1 else ""
            given = f"`vllm {sub}`" if sub else "`vllm` alone"
            raise bad_value("vllm", f"only `vllm serve` command lines are understood, not {given}",
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


def container_image(argv: Sequence[str]) -> str | None:
    """The image a ``docker run`` / ``podman run`` command line runs, or ``None``."""
    _, words = _split_prefix(_expanded(argv))
    try:
        return _unwrap_container(words)[2]
    except InputError:
        return None


def image_release(image: str) -> str | None:
    """The vLLM release of a vLLM image tagged with one (``vllm/vllm-openai:v0.30.0`` ->
    ``0.30.0``); ``None`` for another image or tag (``latest``, ``nightly``)."""
    match = _VLLM_IMAGE.search(image)
    return match.group(1) if match else None


def is_serve_command(words: Sequence[str]) -> bool:
    """Whether positional arguments look like a command line rather than file names."""
    if not words:
        return False
    words = _expanded(words)
    _, rest = _split_prefix(words)
    if len(rest) < len(words):
        return True
    if not rest:
        return False
    if any(Path(w).name in _CONTAINER_RUNNERS for w in rest[:2]) and (
            "run" in rest[1:4] or "compose" in rest[1:3]):
        return True
    if any(Path(w).name in _COMPOSE for w in rest[:2]):
        return True
    head = Path(rest[0]).name
    return head == "vllm" or (re.fullmatch(r"python(\d+(\.\d+)?)?", head) is not None
                              and len(rest) > 2 and rest[1] == "-m")


def serve_words(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """(the variables the command line sets, the words after ``vllm serve``)."""
    env, words = _split_prefix(_expanded(argv))
    words, container_env, _ = _unwrap_container(words)
    env.update(container_env)
    return env, command_body(words)
