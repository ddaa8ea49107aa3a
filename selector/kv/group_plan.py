"""Per-group negotiation: attention groups (reference 8.4), kernel block sizes
(8.3) and the per-group numbers of the report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from selector.kv.backend_facts import BackendKVFacts, CGSupport
from selector.kv.block_size import select_common_block_size
from selector.kv.capacity import blocks_per_request, layer_block_stride
from selector.kv.cudagraph import minimum_support
from selector.kv.errors import EngineStartupError
from selector.kv.grouping import GroupingResult, KVGroup
from selector.kv.layer_specs import CacheEntry
from selector.kv.options import KVOptions
from selector.kv.plan_types import AttentionGroupPlan, GroupPlan, format_ranges
from selector.kv.specs import AnySpec, AttentionSpecBase, EncoderOnlyAttentionSpec, MambaSpec

__all__ = ["group_kind", "plan_groups"]

_FULL_LIKE = frozenset({"full_attention", "mla_attention"})


def group_kind(group: KVGroup) -> str:
    """vLLM's ``get_kv_cache_spec_kind`` for a group."""
    if group.merged_spec is not None:
        return group.merged_spec.kind
    kinds = {spec.kind for spec in group.layer_specs}
    if len(kinds) == 1:
        return next(iter(kinds))
    return "full_attention" if kinds <= _FULL_LIKE else "unknown"


def _kernel_block(
    manager: int, spec: AnySpec, backends: Sequence[BackendKVFacts]
) -> tuple[int | None, str | None]:
    """(kernel block size, vLLM's error text when there is none)."""
    if isinstance(spec, EncoderOnlyAttentionSpec):
        return None, None
    if isinstance(spec, MambaSpec):
        return manager, None
    try:
        return select_common_block_size(manager, backends), None
    except EngineStartupError as exc:
        return None, exc.message


def _attention_groups(
    group: KVGroup, entries: Mapping[str, CacheEntry]
) -> list[tuple[BackendKVFacts, AnySpec, int, list[str]]]:
    keyed: dict[tuple[str, str, AnySpec, int], tuple[BackendKVFacts, list[str]]] = {}
    for name in group.layer_names:
        entry = entries[name]
        spec = group.spec_of(name)
        key = (entry.backend.name, entry.backend.class_name, spec, entry.num_q_heads)
        if key not in keyed:
            keyed[key] = (entry.backend, [])
        keyed[key][1].append(name)
    return [(backend, key[2], key[3], names) for key, (backend, names) in keyed.items()]


def _indices(names: Sequence[str], entries: Mapping[str, CacheEntry]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(entries[name].layer_index for name in names))


def _plan_attention_group(
    backend: BackendKVFacts,
    spec: AnySpec,
    heads: int,
    names: list[str],
    *,
    manager: int,
    entries: Mapping[str, CacheEntry],
) -> AttentionGroupPlan:
    kernel, _ = _kernel_block(manager, spec, [backend])
    return AttentionGroupPlan(
        backend=backend,
        layer_names=tuple(names),
        layers=format_ranges(list(_indices(names, entries))),
        num_q_heads=heads,
        spec=spec,
        kernel_block_size=kernel,
        virtual_blocks_per_manager_block=manager // kernel if kernel else None,
        cudagraph_support=backend.cudagraph_support,
        reorder_batch_threshold=backend.reorder_batch_threshold,
    )


def _plan_group(
    index: int,
    group: KVGroup,
    entries: Mapping[str, CacheEntry],
    *,
    max_model_len: int,
    options: KVOptions,
    padding: int,
) -> GroupPlan:
    manager = group.block_size
    parts = _attention_groups(group, entries)
    first_spec = group.merged_spec or group.layer_specs[0]
    kernel, error = _kernel_block(manager, first_spec, [backend for backend, *_ in parts])
    attention = tuple(
        _plan_attention_group(backend, spec, heads, names, manager=manager, entries=entries)
        for backend, spec, heads, names in parts
    )
    support: CGSupport
    support, _ = minimum_support([(a.cudagraph_support, a.backend.class_name) for a in attention])
    specs = [group.spec_of(name) for name in group.layer_names]
    per_token = sum(s.bytes_per_token for s in specs if isinstance(s, AttentionSpecBase))
    return GroupPlan(
        index=index,
        kind=group_kind(group),
        layer_names=group.layer_names,
        layer_indices=_indices(group.layer_names, entries),
        layers=format_ranges(list(_indices(group.layer_names, entries))),
        spec=group.merged_spec,
        layer_specs=group.layer_specs if group.merged_spec is None else (),
        uniform_type=group.merged_spec is None,
        manager_block_size=manager,
        kernel_block_size=kernel,
        virtual_blocks_per_manager_block=manager // kernel if kernel else None,
        page_size_bytes=tuple(sorted({s.page_size_bytes for s in specs})),
        bytes_per_token=0 if isinstance(first_spec, EncoderOnlyAttentionSpec) else per_token,
        bytes_per_block=sum(layer_block_stride(s) for s in specs),
        blocks_per_request=blocks_per_request(group, max_model_len, options.max_in_flight_tokens),
        attention_groups=attention,
        cudagraph_support=support,
        padding_layers=padding,
        kernel_block_error=error,
    )


def plan_groups(
    grouping: GroupingResult,
    encoder_only: Sequence[CacheEntry],
    entries: Mapping[str, CacheEntry],
    max_model_len: int,
    options: KVOptions,
) -> tuple[GroupPlan, ...]:
    """Every KV-cache group's plan; encoder-only layers are appended as one
    zero-memory group, as the runner does."""
    groups = list(grouping.groups)
    if encoder_only:
        specs = tuple(e.spec for e in encoder_only)
        groups.append(
            KVGroup(
                layer_names=tuple(e.name for e in encoder_only),
                layer_specs=specs,
                merged_spec=specs[0],
            )
        )
    all_entries = {**entries, **{e.name: e for e in encoder_only}}
    widest = max((len(g.layer_names) for g in grouping.groups), default=0)
    padded = grouping.path == "uniform_page_size"
    return tuple(
        _plan_group(
            i,
            group,
            all_entries,
            max_model_len=max_model_len,
            options=options,
            padding=widest - len(group.layer_names) if padded and i < len(grouping.groups) else 0,
        )
        for i, group in enumerate(groups)
    )
