"""Grouping layers into KV-cache groups (reference 8.2 steps 3, 4, 7, 8;
``vllm/v1/core/kv_cache_planning.py``)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from selector.kv.errors import EngineStartupError
from selector.kv.merge import (
    MergeAssertion,
    MergeValueError,
    is_uniform_spec,
    is_uniform_type,
    merge_specs,
)
from selector.kv.packed import packed_layer_groups
from selector.kv.specs import (
    AnySpec,
    AttentionSpecBase,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    replace_spec,
)

__all__ = ["GroupingResult", "KVGroup", "group_layers", "unify_page_sizes"]


class KVGroup(BaseModel):
    """One KV-cache group: its layers and either one merged spec or, for a
    ``UniformTypeKVCacheSpecs`` group, a spec per layer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layer_names: tuple[str, ...]
    layer_specs: tuple[AnySpec, ...]
    merged_spec: AnySpec | None
    """None for a ``UniformTypeKVCacheSpecs`` group."""

    @property
    def block_size(self) -> int:
        spec = self.merged_spec or self.layer_specs[0]
        return spec.block_size

    def spec_of(self, name: str) -> AnySpec:
        """The spec a layer of this group runs with (the merged one if any)."""
        if self.merged_spec is not None:
            return self.merged_spec
        return self.layer_specs[self.layer_names.index(name)]


class GroupingResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    groups: tuple[KVGroup, ...]
    path: str
    """Which vLLM path grouped the layers: ``uniform_spec``, ``uniform_type``, ``packed``,
    ``uniform_page_size`` or ``full_allocation_fallback``."""
    unified_specs: tuple[tuple[str, AnySpec], ...]
    """Every layer's spec after page-size unification."""
    warnings: tuple[str, ...] = ()


def unify_page_sizes(specs: Mapping[str, AnySpec]) -> dict[str, AnySpec]:
    """``unify_kv_cache_spec_page_size``: scale smaller pages' block size to the
    largest page; pad Mamba pages and non-dividing non-MLA attention pages."""
    pages = {spec.page_size_bytes for spec in specs.values()}
    if len(pages) <= 1:
        return dict(specs)
    largest = max(pages)
    unified: dict[str, AnySpec] = {}
    for name, spec in specs.items():
        page = spec.page_size_bytes
        new: AnySpec = spec
        if page == largest:
            pass
        elif isinstance(spec, MambaSpec):
            new = replace_spec(spec, page_size_padded=largest)
        elif largest % page == 0:
            new = replace_spec(spec, block_size=spec.block_size * (largest // page))
        elif isinstance(spec, AttentionSpecBase) and not isinstance(spec, MLAAttentionSpec):
            new = replace_spec(spec, page_size_padded=largest)
        else:
            raise EngineStartupError(
                f"Layer {name}: page size is not divisible by the maximum page size and "
                "cannot be padded. Padding is only supported for non-MLA attention layers.",
                exc_type="NotImplementedError",
                stage="grouping",
            )
        unified[name] = new
    return unified


def _buckets(specs: Mapping[str, AnySpec]) -> list[list[str]]:
    by_spec: dict[AnySpec, list[str]] = {}
    for name, spec in specs.items():
        by_spec.setdefault(spec, []).append(name)
    name_buckets: list[list[str]] = []
    spec_buckets: list[list[AnySpec]] = []
    for spec, names in by_spec.items():
        for bucket_names, bucket_specs in zip(name_buckets, spec_buckets, strict=True):
            try:
                merge_specs([*bucket_specs, spec])
            except (MergeAssertion, MergeValueError):
                continue
            bucket_names.extend(names)
            bucket_specs.append(spec)
            break
        else:
            name_buckets.append(list(names))
            spec_buckets.append([spec])
    return name_buckets


def _split_uniform_page_size(specs: Mapping[str, AnySpec]) -> tuple[list[list[str]], list[str]]:
    """``_get_kv_cache_groups_uniform_page_size``: equal-sized groups, split
    round-robin, the last of a type padded."""
    buckets = _buckets(specs)
    smallest = min(len(b) for b in buckets)
    largest = max(len(b) for b in buckets)
    group_size = largest if largest < smallest * 1.5 else smallest
    groups: list[list[str]] = []
    warnings: list[str] = []
    for layers in buckets:
        padding = group_size - len(layers) % group_size
        if padding != group_size:
            warnings.append(
                f"Add {padding} padding layers, may waste at most "
                f"{padding / len(layers) * 100:.2f}% KV cache memory"
            )
        num_groups = -(-len(layers) // group_size)
        groups.extend(layers[i::num_groups] for i in range(num_groups))
    return groups, warnings


def _make_groups(specs: Mapping[str, AnySpec], names: list[list[str]]) -> tuple[KVGroup, ...]:
    out = []
    for group_names in names:
        layer_specs = tuple(specs[name] for name in group_names)
        out.append(
            KVGroup(
                layer_names=tuple(group_names),
                layer_specs=layer_specs,
                merged_spec=merge_specs(layer_specs),
            )
        )
    return tuple(out)


def _uniform_type_group(specs: Mapping[str, AnySpec]) -> KVGroup:
    return KVGroup(layer_names=tuple(specs), layer_specs=tuple(specs.values()), merged_spec=None)


def _full_allocation_fallback(specs: Mapping[str, AnySpec]) -> GroupingResult | None:
    """``_try_get_full_allocation_fallback_groups``: MLA next to regular
    sliding-window layers; the window layers are allocated as full attention."""
    values = list(specs.values())
    if any(isinstance(s, ChunkedLocalAttentionSpec) for s in values):
        return None
    if not (
        any(isinstance(s, MLAAttentionSpec) for s in values)
        and any(isinstance(s, SlidingWindowSpec) for s in values)
    ):
        return None
    full_sizes = {
        s.block_size for s in values if isinstance(s, FullAttentionSpec | MLAAttentionSpec)
    }
    promoted: dict[str, AnySpec] = {}
    for name, spec in specs.items():
        if isinstance(spec, SlidingWindowSpec):
            block = next(iter(full_sizes)) if len(full_sizes) == 1 else spec.block_size
            fields = spec.model_dump(exclude={"kind", "sliding_window"})
            fields.update(block_size=block, sliding_window=spec.sliding_window)
            promoted[name] = FullAttentionSpec(**fields)
        else:
            promoted[name] = spec
    if not is_uniform_type(list(promoted.values())):
        return None
    return GroupingResult(
        groups=(_uniform_type_group(promoted),),
        path="full_allocation_fallback",
        unified_specs=tuple(promoted.items()),
        warnings=(
            "KV cache page sizes cannot be unified; treating sliding-window layers as full "
            "attention for cache allocation. Sliding-window attention compute is unchanged.",
        ),
    )


def group_layers(specs: Mapping[str, AnySpec], *, block_outermost: bool = False) -> GroupingResult:
    """``get_kv_cache_groups``: one spec, one type, then (a block-outermost layout with
    mixed pages) the packed grouping, else the page-size unification."""
    if not specs:
        return GroupingResult(groups=(), path="attention_free", unified_specs=())
    values = list(specs.values())
    try:
        uniform = is_uniform_spec(values)
    except MergeValueError as exc:
        raise EngineStartupError(str(exc), stage="grouping") from exc
    if uniform:
        return GroupingResult(
            groups=_make_groups(specs, [list(specs)]),
            path="uniform_spec",
            unified_specs=tuple(specs.items()),
        )
    if is_uniform_type(values):
        return GroupingResult(
            groups=(_uniform_type_group(specs),),
            path="uniform_type",
            unified_specs=tuple(specs.items()),
        )
    packed = packed_layer_groups(specs) if block_outermost else None
    if packed is not None:
        return GroupingResult(
            groups=tuple(_uniform_type_group({n: specs[n] for n in names}) for names in packed),
            path="packed",
            unified_specs=tuple(specs.items()),
        )
    try:
        unified = unify_page_sizes(specs)
    except EngineStartupError:
        fallback = _full_allocation_fallback(specs)
        if fallback is None:
            raise
        return fallback
    names, warnings = _split_uniform_page_size(unified)
    return GroupingResult(
        groups=_make_groups(unified, names),
        path="uniform_page_size",
        unified_specs=tuple(unified.items()),
        warnings=tuple(warnings),
    )
