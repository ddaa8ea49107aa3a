"""The batch-file model: one scheduler step of requests over a paged KV cache.

A batch file describes what vLLM's scheduler hands the model runner for one step::

    {"block_size": 16,
     "requests": [{"id": "A", "context_len": 127, "query_len": 1,
                   "block_ids": [7, 2, 9, 4, 11, 6, 3, 10]}, ...]}

``context_len`` is the number of tokens already in the KV cache before this step,
``query_len`` the number of new tokens scheduled now, so the sequence length after
the step is ``context_len + query_len`` and the request needs
``ceil(seq_len / block_size)`` pages. ``block_ids`` lists the request's physical
pages in logical order; it must cover the sequence (extra trailing pages are
allowed, as vLLM may allocate ahead).

Pure Python: no torch, no numpy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from selector.errors import InputError
from selector.util.inputfile import parse_json_text, read_text_file

__all__ = [
    "BatchRequest",
    "BatchSpec",
    "consistency_problems",
    "load_batch_file",
    "pages_needed",
    "parse_batch",
]

_DEFER_CONSISTENCY = "defer_consistency"


def pages_needed(seq_len: int, block_size: int) -> int:
    """Number of pages that hold ``seq_len`` tokens: ``ceil(seq_len / block_size)``."""
    return -(-seq_len // block_size)


MAX_TOKENS_PER_REQUEST = 1 << 24
"""Upper bound on context_len and query_len: far above any real step, keeps loops finite."""
MAX_BLOCK_SIZE = 1 << 16

NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]


class BatchRequest(BaseModel):
    """One scheduled request: cached context, new query tokens and its pages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Annotated[str, Field(min_length=1, strict=True)]
    context_len: Annotated[int, Field(ge=0, le=MAX_TOKENS_PER_REQUEST, strict=True)] = Field(
        description="tokens already cached before this step")
    query_len: Annotated[int, Field(ge=1, le=MAX_TOKENS_PER_REQUEST, strict=True)] = Field(
        description="new tokens scheduled in this step")
    block_ids: list[NonNegativeInt] = Field(
        description="physical page ids in logical order; must cover context_len + query_len"
    )

    @property
    def seq_len(self) -> int:
        """Tokens in the cache after this step: ``context_len + query_len``."""
        return self.context_len + self.query_len


class BatchSpec(BaseModel):
    """A whole batch: the page size and the requests in scheduler order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    block_size: Annotated[int, Field(ge=1, le=MAX_BLOCK_SIZE, strict=True)] = Field(
        description="tokens per KV-cache page (kernel block size)")
    requests: list[BatchRequest] = Field(min_length=1)

    @model_validator(mode="after")
    def _requests_consistent(self, info: ValidationInfo) -> BatchSpec:
        if isinstance(info.context, dict) and info.context.get(_DEFER_CONSISTENCY):
            return self
        problems = consistency_problems(self)
        if problems:
            field, message = problems[0]
            raise ValueError(f"{field}: {message}")
        return self

    @property
    def num_tokens(self) -> int:
        """New tokens in this step (the flat query length)."""
        return sum(request.query_len for request in self.requests)

    def permuted(self, permutation: list[int]) -> BatchSpec:
        """The same batch with request ``permutation[i]`` moved to position ``i``."""
        return BatchSpec(
            block_size=self.block_size,
            requests=[self.requests[index] for index in permutation],
        )


def consistency_problems(spec: BatchSpec) -> list[tuple[str, str]]:
    """Cross-field problems as ``(field path, message)``; empty when the batch is consistent.

    Checked: request ids are unique, a request lists no page twice, and its pages
    cover ``context_len + query_len`` tokens.
    """
    problems: list[tuple[str, str]] = []
    seen_ids: set[str] = set()
    for index, request in enumerate(spec.requests):
        where = f"requests[{index}] (id '{request.id}')"
        if request.id in seen_ids:
            problems.append((f"{where}.id", f"request id '{request.id}' appears twice"))
        seen_ids.add(request.id)
        seen_pages: dict[int, int] = {}
        for position, block_id in enumerate(request.block_ids):
            if block_id in seen_pages:
                problems.append((
                    f"{where}.block_ids[{position}]",
                    f"page {block_id} is listed twice in one request "
                    f"(also at block_ids[{seen_pages[block_id]}])",
                ))
            seen_pages.setdefault(block_id, position)
        needed = pages_needed(request.seq_len, spec.block_size)
        if len(request.block_ids) < needed:
            problems.append((
                f"{where}.block_ids",
                f"{len(request.block_ids)} page(s) given but context_len + query_len = "
                f"{request.seq_len} tokens need {needed} page(s) of {spec.block_size}",
            ))
    return problems


def _field_path(location: tuple[int | str, ...], data: Any) -> str:
    """Render a pydantic error location as ``requests[1].block_ids[0]``, with request ids."""
    parts: list[str] = []
    node: Any = data
    for item in location:
        if isinstance(item, int):
            label = f"[{item}]"
            if isinstance(node, list) and 0 <= item < len(node):
                node = node[item]
                if isinstance(node, dict) and isinstance(node.get("id"), str):
                    label = f"[{item}] (id '{node['id']}')"
            else:
                node = None
            parts.append(label)
        else:
            parts.append(("." if parts else "") + item)
            node = node.get(item) if isinstance(node, dict) else None
    return "".join(parts)


def parse_batch(data: Any, *, source: str = "<input>") -> BatchSpec:
    """Validate already-decoded JSON data as a batch; raise :class:`InputError` on bad input."""
    try:
        spec = BatchSpec.model_validate(data, context={_DEFER_CONSISTENCY: True})
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        field = _field_path(tuple(first["loc"]), data) or None
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = "unknown field"
        if len(error.errors()) > 1:
            message += f" (and {len(error.errors()) - 1} more problem(s))"
        raise InputError(message, file=source, field=field) from None
    problems = consistency_problems(spec)
    if problems:
        field, message = problems[0]
        if len(problems) > 1:
            message += f" (and {len(problems) - 1} more problem(s))"
        raise InputError(message, file=source, field=field)
    return spec


def load_batch_file(path: Path) -> BatchSpec:
    """Read and validate a batch file; every failure is an :class:`InputError` naming the file."""
    source = str(path)
    data = parse_json_text(read_text_file(path, what="a JSON batch file"), source=source)
    return parse_batch(data, source=source)
