"""``serve-flags.yaml`` of an engine profile: how ``vllm serve`` reads its command
line (each flag's arity, short aliases, removed flags and variables, ``--dtype`` words,
``-O`` levels) and the release's own parser flags."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["FlagSpec", "PassedOver", "RemovedVariable", "ServeFlags", "Takes"]

Takes = Literal["switch", "value", "list"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FlagSpec(_Frozen):
    """One flag attn-select knows."""

    takes: Takes
    """``switch``: no value; ``value``: one word; ``list``: the following words."""
    note: str = ""
    """Why a flag that does not change backend selection is worth a note (AS104)."""
    removed: str = ""
    """For a flag vLLM no longer accepts: what replaces it (SU004)."""


class RemovedVariable(_Frozen):
    """An environment variable vLLM no longer reads."""

    level: Literal["info", "warning", "error"]
    use: str
    """The flag to use instead (``{value}``: the variable's value); empty for none."""


class PassedOver(_Frozen):
    """AttentionConfig fields that do not change backend selection (passed over with a
    note)."""

    fields: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()


class ServeFlags(_Frozen):
    """``serve-flags.yaml`` of one engine, inheritance applied."""

    aliases: dict[str, str] = {}
    """Short option string -> the flag it stands for (``-tp`` -> ``--tensor-parallel-size``)."""
    flags: dict[str, FlagSpec] = {}
    """Every flag attn-select knows, with the words it takes."""
    removed_environment: dict[str, RemovedVariable] = {}
    """Environment variables vLLM no longer reads (AS101)."""
    attention_config_passed_over: PassedOver = PassedOver()
    optimization_levels: dict[int, str] = {}
    """``-O<n>`` -> the CUDA-graph mode it sets."""
    dtypes: dict[str, str] = {}
    """``--dtype`` words -> the dtype (``auto``: the model's own)."""
    engine_flags: dict[str, Literal[True]] = {}
    """The option strings of this release's own parser (SU007 for a flag it lacks)."""

    def takes(self, flag: str) -> Takes | None:
        spec = self.flags.get(flag)
        return spec.takes if spec is not None else None
