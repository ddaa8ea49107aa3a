"""``serve-flags.yaml`` of an engine profile: how ``vllm serve`` reads its command
line (each flag's arity, short aliases, removed flags and variables, ``--dtype`` words,
``-O`` levels) and the release's own parser flags."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

__all__ = ["FlagSpec", "ParserTakes", "PassedOver", "RemovedVariable", "ServeFlags", "Takes"]

Takes = Literal["switch", "value", "list"]
ParserTakes = Literal["switch", "value", "optional", "list"]
"""The words an option of vLLM's parser takes (``optional``: argparse's ``nargs='?'``)."""


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
    frontend_flags: dict[str, ParserTakes] = {}
    """The other option strings of this release's ``vllm serve`` parser (the frontend's and
    the short spellings), with the words each takes; empty where not recorded."""
    speculative_methods: tuple[str, ...] = ()
    """``SpeculativeConfig.method``'s values in declaration order; empty where not recorded."""
    config_fields: dict[str, tuple[str, ...]] = {}
    """The fields of the JSON config classes (``AttentionConfig``, ``SpeculativeConfig``):
    any other key is refused; a class not listed is not recorded."""
    config_literals: dict[str, dict[str, tuple[str, ...]]] = {}
    """The JSON config classes' fields typed as a ``Literal``: their values (as text); a
    value outside them is pydantic's ``literal_error`` (SU046)."""
    flag_choices: dict[str, tuple[str, ...]] = {}
    """The engine flags argparse restricts to ``choices`` (``--kda-decode-backend``...): a
    value outside them is argparse's "invalid choice" (SU045)."""

    _frontend_stand_in: frozenset[str] = PrivateAttr(default=frozenset())
    """Where this release's frontend flags are not recorded: the nearest newer recorded
    release's, standing in for them (the frontend's flags change little)."""

    def with_frontend_stand_in(self, flags: frozenset[str]) -> ServeFlags:
        """This table with ``flags`` standing in for unrecorded frontend flags."""
        table = self.model_copy()
        table._frontend_stand_in = flags
        return table

    @property
    def parser_recorded(self) -> bool:
        """Whether every option string of this release's parser is recorded (the frontend's
        too), so that a word matching none of them is one vLLM refuses."""
        return bool(self.frontend_flags)

    @property
    def parser_flags(self) -> frozenset[str]:
        """Every option string this release's ``vllm serve`` accepts as recorded: the engine
        flags, the frontend's and the short spellings (where the frontend's are not recorded,
        the flags and aliases attn-select knows and the nearest newer recorded release's
        frontend flags stand for them)."""
        known = set(self.engine_flags) | set(self.frontend_flags)
        if not self.frontend_flags:
            known |= {flag for flag, spec in self.flags.items() if not spec.removed}
            known |= set(self.aliases) | self._frontend_stand_in
        return frozenset(known)

    def takes(self, flag: str) -> Takes | None:
        spec = self.flags.get(flag)
        return spec.takes if spec is not None else None
