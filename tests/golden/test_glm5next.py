"""GLM-5.3 (Glm5NextForCausalLM, Glm5NextForConditionalGeneration; issue 24): vLLM's own
builds of the synthetic 8-layer configs (tools/synthetic_model_configs.py; the -dsa
copies name the MLA layers as transformers 5.17 does), recorded by
tools/vllm_model_reference.py (``vllm-<release>-glm5.jsonl.gz``: SM90) and
tools/model_driven_reference.py (``glm5/vllm-<release>-gpus.jsonl.gz`` and ``-dsa``: SM90 and
SM100), against the tool: every cache (KDA state with its FlashKDA checkpoint stamp, the
kpool index-key cache, the CircularBufferSpec tail ring, the sparse MLA latent), the groups
before the alignment (the block-outermost packed grouping at block 16) and after it (blocks
4608 / 8704), the same on both GPUs. vLLM 0.30.0-0.31.0 build another design (a
KpoolTailSpec sliding-window ring, the layer-outer LBHNC layout and the page-size
unification); their answers are kept beside (``glm5/vllm-0.30.0-gpus``,
``glm5/vllm-0.31.0-dsa``) and the tool refuses those releases with a message, not a
traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from selector.errors import InputError
from selector.kv.grouping import group_layers
from selector.kv.layer_specs import SpecContext, build_spec, indexer_spec, indexer_tail_spec
from selector.kv.merge import is_uniform_type
from selector.kv.packed import packed_layer_groups
from selector.kv.specs import AnySpec, CircularBufferSpec, MambaSpec, MLAAttentionSpec
from selector.models import load_model
from tools import oracle
from tools.model_agreement import _MLA, GOLDEN, agreements_of, tool_groups

ROOT = Path(__file__).resolve().parents[2]
FILES = [GOLDEN / "vllm-0.32.0-glm5.jsonl.gz", GOLDEN / "vllm-0.33.0-glm5.jsonl.gz",
         GOLDEN / "glm5" / "vllm-0.32.0-gpus.jsonl.gz", GOLDEN / "glm5" / "vllm-0.33.0-gpus.jsonl.gz",
         GOLDEN / "glm5" / "vllm-0.33.0-dsa.jsonl.gz"]
OLDER = [GOLDEN / "glm5" / "vllm-0.30.0-gpus.jsonl.gz", GOLDEN / "glm5" / "vllm-0.31.0-dsa.jsonl.gz"]


def _answers(paths: list[Path]) -> list[dict[str, Any]]:
    return [a for p in paths for a in oracle.read_jsonl(p) if "layers" in a]


def _id(answer: dict[str, Any]) -> str:
    return f"{answer['vllm_version']}-{answer['capability']}-{Path(str(answer['config'])).stem}"


ANSWERS = _answers(FILES)


def test_the_answers_are_vllms_builds() -> None:
    assert len(ANSWERS) == 16
    assert all(a["status"] == "ok" for a in ANSWERS)
    aligned = {(a["vllm_version"], a["capability"]): a["aligned"]["block_size"] for a in ANSWERS}
    # SM100 in 0.33.0: Glm5NextModelConfig's fp8 KV cache halves the latent page
    assert aligned == {("0.32.0", "9.0"): 4608, ("0.32.0", "10.0"): 4608,
                       ("0.33.0", "9.0"): 4608, ("0.33.0", "10.0"): 8704}


@pytest.mark.parametrize("answer", ANSWERS, ids=_id)
def test_every_cache_and_aligned_group_agrees(answer: dict[str, Any]) -> None:
    result = next(agreements_of([answer]))
    assert result.tool_error is None, result.tool_error
    assert result.differences == [], result.differences
    assert result.group_differences == [], result.group_differences
    assert (result.layers, result.agreeing) == (12, 12)
    assert (result.groups, result.groups_agreeing) == (5, 5)


def _specs_before_alignment(answer: dict[str, Any]) -> dict[str, AnySpec]:
    """The tool's specs at vLLM's block before the alignment, in vLLM's registration order
    (a KDA layer's state; a sparse layer's index-key cache, tail ring, latent)."""
    model = load_model(ROOT / answer["config"])
    dtype = "fp8" if model.kv_cache_dtype_default and model.kv_cache_dtype_default.applies(
        None, int(answer["capability"].replace(".", "")), f"vllm=={answer['vllm_version']}") else "auto"
    block = answer["block_size"]
    ctx = SpecContext(model_dtype="bfloat16", kv_cache_dtype=dtype, block_size=block,
                      mamba_block_size=block, spec_checkpoint_alignment=16)
    specs: dict[str, AnySpec] = {}
    for layer in model.layers:
        if layer.is_ssm:
            specs[f"{layer.index}.state"] = build_spec(layer, _MLA, ctx)
            continue
        specs[f"{layer.index}.indexer"] = indexer_spec(layer, ctx)
        specs[f"{layer.index}.tail"] = indexer_tail_spec(layer, ctx)
        specs[f"{layer.index}.attn"] = build_spec(layer, _MLA, ctx)
    return specs


@pytest.mark.parametrize("answer", ANSWERS, ids=_id)
def test_the_groups_before_the_alignment_agree(answer: dict[str, Any]) -> None:
    """vLLM's get_kv_cache_groups at block 16 (the packed grouping: each KDA layer its own
    group, the index-key caches with the latents, the tail rings together)."""
    specs = _specs_before_alignment(answer)
    grouping = group_layers(specs, block_outermost=answer["kv_cache_layout"].startswith("B"))
    assert grouping.path == "packed"
    have = sorted((g.block_size, sum(s.page_size_bytes for s in g.layer_specs),
                   sorted(int(n.split(".")[0]) for n in g.layer_names)) for g in grouping.groups)
    want = sorted((g["block_size"], g["page_size_bytes"], sorted(g["layers"]))
                  for g in answer["groups"])
    assert have == want
    states = {r["index"]: r for r in answer["layers"] if r["spec"] == "MambaSpec"}
    for name, spec in specs.items():
        if isinstance(spec, MambaSpec):  # the FlashKDA stamp (0.32.0 on)
            record = states[int(name.split(".")[0])]
            assert spec.prefill_checkpoint_alignment == record["prefill_checkpoint_alignment"]
            assert spec.num_prefill_checkpoint_blocks == record["num_prefill_checkpoint_blocks"]


def test_the_tail_ring_is_vllms_circular_buffer() -> None:
    """Glm5NextTailCache's ring: index_kpool * next_power_of_2(cdiv(index_kpool + spec
    tokens, index_kpool)) slots of 2 bf16 heads of index_head_dim (attention.py:153-180)."""
    model = load_model(ROOT / "tests/fixtures/hf_configs/synthetic/Glm5NextForCausalLM.json")
    layer = model.layers[3]
    assert layer.indexer is not None and layer.indexer.tail is not None
    assert layer.indexer.tokens_per_state == 16
    assert [layer.indexer.tail.ring(n) for n in (0, 1, 16, 17, 48)] == [16, 32, 32, 64, 64]
    ctx = SpecContext(model_dtype="bfloat16", block_size=16, mamba_block_size=16)
    tail = indexer_tail_spec(layer, ctx)
    assert isinstance(tail, CircularBufferSpec) and not tail.dcp_sharded
    assert tail.page_size_bytes == 8192
    latent = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=512, head_size_v=0,
                              kv_cache_dtype="bfloat16", dtype_bytes=2)
    # uniform only with other circular buffers (and one dcp_sharded value)
    assert not is_uniform_type([tail, latent])
    assert is_uniform_type([tail, tail])
    assert packed_layer_groups({"a": tail, "b": tail}) is None  # one page size: no packing


@pytest.mark.parametrize("answer", _answers(OLDER), ids=_id)
def test_the_older_design_is_refused_with_a_message(answer: dict[str, Any]) -> None:
    """0.30.0-0.31.0 (KpoolTailSpec, no Glm5NextIndexerBackend): the release states no
    facts of the kpool indexer's backend, and the tool says so."""
    assert answer["status"] == "ok" and answer["kv_cache_layout"] == "LBHNC"
    assert any(r["spec"] == "KpoolTailSpec" for r in answer["layers"])
    with pytest.raises(InputError, match="states no facts of backend DEEPSEEK_V32_INDEXER"):
        tool_groups(answer)


@pytest.mark.parametrize("device", ["H200", "B200"])
def test_check_runs_on_the_synthetic_config(device: str, tmp_path: Path) -> None:
    from tests.fuzz.test_config_fuzz import run_cli

    config = ROOT / "tests/fixtures/hf_configs/synthetic/Glm5NextForConditionalGeneration.json"
    deployment = tmp_path / "glm5.yaml"
    deployment.write_text(f"engine: vllm==0.33.0\nmodel: {config}\ndevice: {device}\n"
                          "max_model_len: 8192\n", encoding="utf-8")
    code, out, err = run_cli(["check", "-f", "compact", str(deployment)])
    assert code == 0, out + err
    backend = "FLASHINFER_MLA_SPARSE_SM90" if device == "H200" else "FLASHINFER_MLA_SPARSE"
    assert f"VALID {backend} on {device}" in out


@pytest.mark.parametrize("release", ["0.32.0", "0.33.0"])
def test_the_indexer_backends_are_the_recorded_classes(release: str) -> None:
    """model-driven.yaml's layer_backends for GLM-5.3's caches against the classes vLLM's
    built layers named (``layer_backends`` of the release's gpus file: kernel block sizes
    under the model's config) and the builders' CUDA-graph support for each layer's spec."""
    from selector.catalog import load_catalog
    from selector.kv.model_driven import own_backend_facts

    answers = oracle.read_jsonl(GOLDEN / "glm5" / f"vllm-{release}-gpus.jsonl.gz")
    record = next(a for a in answers if "layer_backends" in a)
    classes = {c["class"].rsplit(".", 1)[-1]: c for c in record["layer_backends"]}
    # the builder's get_cudagraph_support for each layer's spec (not the class attribute)
    support = {(r["backend"], r["cudagraph_support"]) for a in answers if "layers" in a
               for r in a["layers"]}
    model = load_model(ROOT / "tests/fixtures/hf_configs/synthetic/Glm5NextForCausalLM.json")
    own = own_backend_facts(model, f"vllm=={release}", load_catalog())
    assert set(own) == {"DEEPSEEK_V32_INDEXER", "KPOOL_TAIL"}
    for name, facts in own.items():
        recorded = classes[facts.class_name]
        assert recorded["name"] == name
        assert {level for backend, level in support if backend == name} == {facts.cudagraph_support}
        sizes = [s if isinstance(s, int) else {"multiple_of": s.multiple_of}
                 for s in facts.kernel_block_sizes]
        assert sizes == recorded["kernel_block_sizes"], name


def test_the_packed_pool_is_not_sized() -> None:
    """vLLM sizes a block-outermost pool by the widest group rounded up to the lcm of every
    layer's block-stride alignment (kv_cache_planning.py:574-604 in 0.33.0: 9529344 bytes a
    block for the synthetic config on SM90, the sparse MLA latent's 1024-byte row alignment
    beside the index-key cache's 4224), which the tool does not model: no capacity, and the
    memory report says the fit is not checked."""
    answer = next(a for a in ANSWERS if a["vllm_version"] == "0.33.0" and a["capability"] == "9.0"
                  and "ForCausalLM" in str(a["config"]))
    from selector.catalog import load_catalog
    from selector.inputs.config import parse_deployment
    from selector.pipeline.deployment import solve_deployment
    from tools.model_agreement import reference_deployment

    loaded = parse_deployment("<glm5>", reference_deployment(answer, 8192))
    solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                              refuse_split=False)
    assert solved.model is not None and solved.model.plan is not None
    plan = solved.model.plan
    assert plan.ok and plan.grouping_path == "packed" and plan.capacity is None
