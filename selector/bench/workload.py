"""The benchmark workload: which batches to time, and how (pure Python, no torch).

A workload file (YAML or JSON)::

    name: chat
    decode:  {batch_sizes: [1, 32, 128], context_lengths: [1024, 4096, 16384]}
    prefill: {lengths: [8192], batch_size: 1}
    mixed:   {decodes: 32, decode_context: 4096, prefill_lengths: [2048]}
    settings: {min_repeats: 20, max_repeats: 200, target_ci: 0.01}

``decode`` is the grid batch x context (every request has ``context`` tokens in the
cache after the step, one of them new); ``prefill`` is ``batch_size`` fresh prompts per
length; ``mixed`` is one scheduler step holding ``decodes`` running requests and the
new prompts. Any section may be left out (not all of them). ``weight`` on a section
scales that section's shapes when the policy adds times up.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from selector.catalog import close_matches
from selector.errors import InputError
from selector.smoke.batch import BatchSpec
from selector.smoke.workload import Workload as PagedWorkload
from selector.smoke.workload import assign_pages
from selector.util.inputfile import check_duplicate_keys, parse_json_text, read_text_file

__all__ = [
    "MAX_TOKENS_PER_SHAPE",
    "BenchSettings",
    "BenchWorkload",
    "DecodeGrid",
    "MixedStep",
    "PrefillSet",
    "Shape",
    "default_workload",
    "load_workload",
    "parse_workload",
]

MAX_TOKENS_PER_SHAPE = 1 << 23
"""KV tokens one shape may hold (8M: 32 GiB of bf16 KV for 8 KV heads of 128)."""
MAX_LENGTH = 1 << 20

_Count = Annotated[int, Field(ge=1, le=4096, strict=True)]
_Length = Annotated[int, Field(ge=1, le=MAX_LENGTH, strict=True)]
_Weight = Annotated[float, Field(gt=0, le=1e6)]


class DecodeGrid(BaseModel):
    """Decode steps: every batch size with every context length."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_sizes: list[_Count] = Field(min_length=1, max_length=32)
    context_lengths: list[_Length] = Field(min_length=1, max_length=32)
    """Tokens in the cache after the step (the new token included)."""
    weight: _Weight = 1.0


class PrefillSet(BaseModel):
    """Fresh prompts, ``batch_size`` of each length, causal."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lengths: list[_Length] = Field(min_length=1, max_length=32)
    batch_size: _Count = 1
    weight: _Weight = 1.0


class MixedStep(BaseModel):
    """One step of running decodes and new prompts (chunked-prefill scheduling)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decodes: _Count = 32
    decode_context: _Length = 4096
    prefill_lengths: list[_Length] = Field(default_factory=lambda: [2048], min_length=1,
                                           max_length=32)
    weight: _Weight = 1.0


class BenchSettings(BaseModel):
    """How each kernel is timed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    warmup: Annotated[int, Field(ge=0, le=1000, strict=True)] = 5
    min_repeats: Annotated[int, Field(ge=3, le=10_000, strict=True)] = 20
    max_repeats: Annotated[int, Field(ge=3, le=100_000, strict=True)] = 300
    target_ci: Annotated[float, Field(gt=0, le=0.5)] = 0.01
    """Stop repeating once the median's 95% interval is within this fraction of it."""
    max_seconds: Annotated[float, Field(gt=0, le=600)] = 3.0
    """Time budget per kernel and shape (repeats stop there even if not yet stable)."""
    flush_l2: bool = True
    """Overwrite a buffer larger than L2 before every timed repeat (outside the events)."""
    graphs: Literal["auto", "on", "off"] = "auto"
    """``auto``: replay through a CUDA graph where the plan's CUDA-graph mode would."""
    builder_repeats: Annotated[int, Field(ge=1, le=100, strict=True)] = 3
    seed: int = 0

    @model_validator(mode="after")
    def _ordered(self) -> BenchSettings:
        if self.max_repeats < self.min_repeats:
            raise ValueError(f"max_repeats {self.max_repeats} is below min_repeats "
                             f"{self.min_repeats}")
        return self


class BenchWorkload(BaseModel):
    """The shapes to time and how to time them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "default"
    decode: DecodeGrid | None = None
    prefill: PrefillSet | None = None
    mixed: MixedStep | None = None
    settings: BenchSettings = Field(default_factory=BenchSettings)

    @model_validator(mode="after")
    def _something_to_run(self) -> BenchWorkload:
        if self.decode is None and self.prefill is None and self.mixed is None:
            raise ValueError("the workload has no decode, prefill or mixed section")
        for shape in self.shapes():
            if shape.kv_tokens > MAX_TOKENS_PER_SHAPE:
                raise ValueError(f"shape '{shape.name}' holds {shape.kv_tokens} KV tokens, "
                                 f"more than {MAX_TOKENS_PER_SHAPE} (one GPU's worth)")
        return self

    def shapes(self) -> list[Shape]:
        """Every shape, decode grid first (batch-major), then prefills, then the mixed step."""
        shapes: list[Shape] = []
        if self.decode is not None:
            for batch in self.decode.batch_sizes:
                for context in self.decode.context_lengths:
                    shapes.append(Shape("decode", f"decode {batch}x{_k(context)}",
                                        ((batch, context - 1, 1),), self.decode.weight))
        if self.prefill is not None:
            count = self.prefill.batch_size
            for length in self.prefill.lengths:
                shapes.append(Shape("prefill", f"prefill {count}x{_k(length)}",
                                    ((count, 0, length),), self.prefill.weight))
        if self.mixed is not None:
            mixed = self.mixed
            prompts = "+".join(_k(n) for n in mixed.prefill_lengths)
            groups: list[tuple[int, int, int]] = [(mixed.decodes, mixed.decode_context - 1, 1)]
            groups += [(1, 0, length) for length in mixed.prefill_lengths]
            shapes.append(Shape("mixed", f"mixed {mixed.decodes}x{_k(mixed.decode_context)}"
                                f"+{prompts}", tuple(groups), mixed.weight))
        seen: set[str] = set()
        unique = []
        for shape in shapes:
            if shape.name not in seen:
                seen.add(shape.name)
                unique.append(shape)
        return unique


def _k(tokens: int) -> str:
    """4096 -> '4k', 1000 -> '1000'."""
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


@dataclass(frozen=True)
class Shape:
    """One timed batch: request groups of (count, cached context, new tokens)."""

    kind: Literal["decode", "prefill", "mixed"]
    name: str
    groups: tuple[tuple[int, int, int], ...]
    weight: float = 1.0

    @property
    def requests(self) -> list[tuple[int, int]]:
        """(context_len, query_len) per request, in scheduler order."""
        return [(context, query) for count, context, query in self.groups
                for _ in range(count)]

    @property
    def num_requests(self) -> int:
        return sum(count for count, _, _ in self.groups)

    @property
    def kv_tokens(self) -> int:
        return sum(count * (context + query) for count, context, query in self.groups)

    @property
    def new_tokens(self) -> int:
        return sum(count * query for count, _, query in self.groups)

    def paged(self, block_size: int, seed: int) -> PagedWorkload:
        """The batch on random non-contiguous pages (decodes first, as vLLM schedules)."""
        shapes = [(f"r{index}", context, query)
                  for index, (context, query) in enumerate(self.requests)]
        return assign_pages(shapes, block_size, random.Random(seed), spare_factor=1)

    def batch(self, block_size: int, seed: int) -> BatchSpec:
        return self.paged(block_size, seed).batch

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "weight": self.weight,
                "groups": [{"count": c, "context_len": ctx, "query_len": q}
                           for c, ctx, q in self.groups]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Shape:
        groups = tuple((int(g["count"]), int(g["context_len"]), int(g["query_len"]))
                       for g in data["groups"])
        return cls(data["kind"], str(data["name"]), groups, float(data.get("weight", 1.0)))


def default_workload() -> BenchWorkload:
    """A few representative shapes: short and long decodes at three batch sizes, one
    long prompt and one mixed step."""
    return BenchWorkload(
        name="default",
        decode=DecodeGrid(batch_sizes=[1, 32, 128], context_lengths=[1024, 4096]),
        prefill=PrefillSet(lengths=[4096]),
        mixed=MixedStep(),
    )


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for item in loc:
        text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else item)
    return text


def _yaml_lines(text: str) -> dict[tuple[str, ...], int]:
    lines: dict[tuple[str, ...], int] = {}

    def walk(node: Any, prefix: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    path = (*prefix, str(key.value))
                    lines[path] = key.start_mark.line + 1
                    walk(value, path)

    try:
        walk(yaml.compose(text, Loader=yaml.SafeLoader), ())
    except yaml.YAMLError:
        pass
    return lines


def _field_names(loc: tuple[int | str, ...]) -> list[str]:
    model: Any = BenchWorkload
    for item in loc[:-1]:
        if isinstance(item, int):
            continue
        field = getattr(model, "model_fields", {}).get(item)
        if field is None:
            return []
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        model = next((c for c in candidates if isinstance(c, type) and
                      issubclass(c, BaseModel)), None)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def parse_workload(data: Any, *, source: str = "<workload>",
                   lines: dict[tuple[str, ...], int] | None = None) -> BenchWorkload:
    """Validate decoded data as a workload; :class:`InputError` names the file and field."""
    if data is None:
        raise InputError("the workload file is empty", file=source,
                         hint="give at least one of decode, prefill, mixed")
    if not isinstance(data, dict):
        raise InputError(f"expected a mapping at the top level, got {type(data).__name__}",
                         file=source, hint="e.g. decode: {batch_sizes: [32], "
                                           "context_lengths: [4096]}")
    try:
        return BenchWorkload.model_validate(data)
    except ValidationError as error:
        errors = error.errors(include_url=False)
        # a misspelt key also leaves its real name missing: report the misspelling
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        hint = None
        if first["type"] == "extra_forbidden":
            message = "unknown field"
            options = _field_names(loc)
            hint = close_matches(str(loc[-1]), options) if options else None
        line = None
        if lines:
            path = tuple(str(item) for item in loc if not isinstance(item, int))
            while path and line is None:
                line = lines.get(path)
                path = path[:-1]
        raise InputError(message, file=source, field=_location(loc) or None, hint=hint,
                         line=line) from None


def load_workload(path: Path) -> BenchWorkload:
    """Read a YAML or JSON workload file; every failure is an :class:`InputError`."""
    source = str(path)
    text = read_text_file(path, what="a workload file")
    lines: dict[tuple[str, ...], int] = {}
    if path.suffix.lower() == ".json":
        data = parse_json_text(text, source=source)
    else:
        try:
            data = yaml.safe_load(text)
            check_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader), source=source)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            problem = getattr(error, "problem", None) or "cannot parse"
            raise InputError(f"invalid YAML: {problem}", file=source,
                             line=mark.line + 1 if mark is not None else None) from None
        except RecursionError:
            raise InputError("invalid YAML: nested too deeply", file=source) from None
        lines = _yaml_lines(text)
    return parse_workload(data, source=source, lines=lines)
