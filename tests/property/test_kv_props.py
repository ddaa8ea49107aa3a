"""Hypothesis: KV negotiation invariants over presets, random per-layer backends
and random options; malformed config.json never escapes as anything but InputError."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.kv import BackendKVFacts, KVOptions, ModelPlan, MultipleOf, plan_model
from selector.kv.backend_facts import CG_LEVEL
from selector.models import LayerFacts, list_presets, load_model, parse_config, preset_dir, shard_model

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CG_LEVELS = ["NEVER", "UNIFORM_SINGLE_TOKEN_DECODE", "UNIFORM_BATCH", "ALWAYS"]


@st.composite
def backends(draw: st.DrawFn, index: int) -> BackendKVFacts:
    if draw(st.booleans()):
        sizes: tuple[int | MultipleOf, ...] = (
            MultipleOf(multiple_of=draw(st.sampled_from([1, 16, 32, 64]))),
        )
    else:
        sizes = tuple(
            sorted(draw(st.sets(st.sampled_from([16, 32, 64, 128, 256]), min_size=1, max_size=4)))
        )
    return BackendKVFacts(
        name=f"B{index}",
        class_name=f"Backend{index}",
        kernel_block_sizes=sizes,
        supported_layouts=draw(st.sampled_from([None, None, ("LBHNC", "BLHNC"), ("LBNHC",)])),
        cudagraph_support=draw(st.sampled_from(CG_LEVELS)),
        reorder_batch_threshold=draw(st.sampled_from([None, 1, 128])),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, list[BackendKVFacts], KVOptions, int]:
    name = draw(st.sampled_from(list_presets()))
    pool = [draw(backends(i)) for i in range(draw(st.integers(1, 3)))]
    options = KVOptions(
        block_size=draw(st.sampled_from([None, None, 16, 32, 64, 128, 256, 48])),
        kv_cache_dtype=draw(st.sampled_from(["auto", "fp8", "bfloat16"])),
        num_speculative_tokens=draw(st.integers(0, 3)),
        cudagraph_mode=draw(
            st.sampled_from(["FULL_AND_PIECEWISE", "FULL", "FULL_DECODE_ONLY", "PIECEWISE", None])
        ),
        attention_in_splitting_ops=draw(st.booleans()),
        vllm_compile=draw(st.booleans()),
        enable_prefix_caching=draw(st.booleans()),
        max_model_len=draw(st.sampled_from([None, 4096, 32768])),
        max_num_batched_tokens=draw(st.sampled_from([2048, 8192, 16384])),
        max_num_seqs=draw(st.sampled_from([256, 1024])),
        gpu_memory_utilization=0.92,
    )
    seed = draw(st.integers(0, 2**16))
    return name, pool, options, seed


def _plan(name: str, pool: list[BackendKVFacts], options: KVOptions, seed: int) -> ModelPlan:
    def choose(layer: LayerFacts) -> BackendKVFacts:
        kind = 0 if layer.sliding_window else 1 if layer.attention_chunk_size else 2
        return pool[(seed + kind + layer.index // 7) % len(pool)]

    return plan_model(load_model(name), choose, (options).for_engine(load_catalog().engine()))


@SETTINGS
@given(scenarios())
def test_kernel_block_divides_manager_and_is_accepted(
    scenario: tuple[str, list[BackendKVFacts], KVOptions, int],
) -> None:
    plan = _plan(*scenario)
    if plan.block_size is None or not plan.groups:
        return
    for group in plan.groups:
        kernel = group.kernel_block_size
        if kernel is None:
            continue
        assert group.manager_block_size % kernel == 0
        assert group.virtual_blocks_per_manager_block == group.manager_block_size // kernel
        if group.kind == "mamba":
            assert kernel == group.manager_block_size
            continue
        for attention in group.attention_groups:
            assert attention.backend.accepts_kernel_block(kernel)
            own = attention.kernel_block_size
            assert own is not None and group.manager_block_size % own == 0
            assert attention.backend.accepts_kernel_block(own)


@SETTINGS
@given(scenarios())
def test_resolved_cuda_graph_mode_never_exceeds_support(
    scenario: tuple[str, list[BackendKVFacts], KVOptions, int],
) -> None:
    plan = _plan(*scenario)
    cg = plan.cudagraph
    if cg is None:
        return
    options = scenario[2]
    levels = [CG_LEVEL[g.cudagraph_support] for g in plan.groups]
    assert CG_LEVEL[cg.min_support] == min(levels, default=3)
    if cg.resolved is None:
        assert cg.error is not None and not plan.ok
        return
    support = CG_LEVEL[cg.min_support]
    if cg.mixed_graphs == "full":
        assert support == CG_LEVEL["ALWAYS"]
    if cg.decode_graphs == "full":
        assert support >= CG_LEVEL["UNIFORM_SINGLE_TOKEN_DECODE"]
        if options.num_speculative_tokens:
            assert support >= CG_LEVEL["UNIFORM_BATCH"]
    if options.cudagraph_mode in (None, "NONE"):
        assert cg.resolved == "NONE"


@SETTINGS
@given(scenarios())
def test_planning_is_deterministic(
    scenario: tuple[str, list[BackendKVFacts], KVOptions, int],
) -> None:
    first = _plan(*scenario)
    assert first == _plan(*scenario)
    assert [g.layer_names for g in first.groups] == [g.layer_names for g in _plan(*scenario).groups]
    # every KV-holding module lands in exactly one group
    names = [n for g in first.groups for n in g.layer_names]
    assert len(names) == len(set(names))
    if first.ok:
        assert sorted(names) == sorted(e.name for e in first.entries)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 10**7)
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
KEYS = sorted(
    {
        key
        for name in list_presets()
        for key in json.loads((preset_dir() / f"{name}.json").read_text())
    }
    | {
        "layer_types",
        "no_rope_layers",
        "cross_attention_layers",
        "index_topk",
        "head_dim",
        "attn_config",
        "dtype",
        "use_sliding_window",
        "sliding_window_pattern",
        "kv_lora_rank",
    }
)


@st.composite
def mutated_configs(draw: st.DrawFn) -> Any:
    raw = json.loads((preset_dir() / f"{draw(st.sampled_from(list_presets()))}.json").read_text())
    target = raw.get("text_config", raw) if draw(st.booleans()) else raw
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(KEYS))
        if draw(st.integers(0, 3)) == 0:
            target.pop(key, None)
        else:
            target[key] = draw(JSON)
    if draw(st.integers(0, 20)) == 0:
        return draw(JSON)
    return raw


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs(), st.integers(1, 16))
def test_malformed_config_only_raises_input_error(raw: Any, tp: int) -> None:
    try:
        model = shard_model(parse_config(raw, file="fuzz/config.json"), tp)
    except InputError as exc:
        assert exc.file in ("fuzz/config.json", None)
        return
    fa = BackendKVFacts(
        name="FLASH_ATTN",
        class_name="FlashAttentionBackend",
        kernel_block_sizes=(MultipleOf(multiple_of=16),),
    )
    try:
        plan = plan_model(model, lambda layer: fa, (KVOptions(max_model_len=4096, cudagraph_mode="FULL_AND_PIECEWISE",
                                                          max_num_batched_tokens=2048, max_num_seqs=256,
                                                          gpu_memory_utilization=0.92)).for_engine(load_catalog().engine()))
    except InputError:
        return
    assert isinstance(plan, ModelPlan)
