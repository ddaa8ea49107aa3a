#!/usr/bin/env python3
"""Compare the project's model reader with vLLM's committed answers
(``tests/golden/vllm_models/vllm-<version>.jsonl.gz`` and the parts in
``vllm-<version>/*.jsonl.gz``, written by
``tools/vllm_model_reference.py``), layer by layer, without vLLM::

    python tools/model_agreement.py [--engine vllm-0.33.0] [--markdown]

For every config vLLM built, each KV-cache module vLLM registered is matched to
the project's layer of the same index and role (attention, indexer, state) and
compared on: spec kind, KV heads, head size (K and V), sliding window, chunk
size, SSM state shapes and the page size at vLLM's block size. Layers vLLM
gives no cache (KV sharing, MLP/MoE-only blocks) must be cache-less here too.

Then the KV-cache groups after the engine's block-size alignment
(``update_block_size_for_backend``: the backends' preferred block size, the hybrid
Mamba alignment) are compared with the tool's whole plan for the same deployment
(one H200, compute capability 9.0 as the reference emulates, ``--dtype bfloat16``,
the reference's ``max_model_len``): each group's block size, page size and layers.
Configs vLLM refused are listed with vLLM's error. A model whose layers choose their own
backend (``schemas/engines/*/model-driven.yaml``: DeepSeek-V4) is compared module by
module (name, module class, backend, block size, page) with the model-driven data.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import oracle
from oracle import REPO

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.inputs.config import parse_deployment
from selector.kv.backend_facts import BackendKVFacts
from selector.kv.layer_specs import SpecContext, build_spec, indexer_spec, indexer_tail_spec
from selector.kv.ssm_state import ssm_state_shapes
from selector.models import LayerFacts, ModelFacts, load_model

__all__ = [
    "ConfigAgreement", "agreements", "agreements_of", "answer_files", "compare_groups", "encoder_only_record",
    "load_answers",
    "reference_deployment",
    "tool_groups",
]

GOLDEN = REPO / "tests" / "golden" / "vllm_models"

_SPEC_KIND = {
    "FullAttentionSpec": "full",
    "SinkFullAttentionSpec": "full",
    "SlidingWindowSpec": "sliding",
    "ChunkedLocalAttentionSpec": "chunked",
    "MLAAttentionSpec": "mla",
    "CircularBufferSpec": "circular_buffer",
    "RSWASpec": "rswa",
    "SlidingWindowMLASpec": "sliding_mla",
    "MambaSpec": "state",
    "CrossAttentionSpec": "cross",
    "EncoderOnlyAttentionSpec": "encoder_only",
}
_DENSE = BackendKVFacts(name="FLASH_ATTN", class_name="FlashAttentionBackend")
_MLA = BackendKVFacts(name="FLASHMLA", class_name="FlashMLABackend", is_mla=True)


def answer_files(engine: str = "vllm-0.33.0") -> list[Path]:
    """The release's answer files: ``<engine>.jsonl.gz`` and then, sorted, any
    ``<engine>-*.jsonl.gz`` beside it (answers recorded separately, e.g. ``-mm`` for the
    multimodal and pooling wrappers), but not the prefix-caching runs of an older release
    (``-prefix-caching``: a run mode of its own, loaded by that name)."""
    main = GOLDEN / f"{engine}.jsonl.gz"
    extra = [p for p in sorted(GOLDEN.glob(f"{engine}-*.jsonl.gz"))
             if not p.name.endswith("-prefix-caching.jsonl.gz")]
    return [main, *extra]


def load_answers(engine: str = "vllm-0.33.0") -> list[dict[str, Any]]:
    """vLLM's committed answers, one per config (a config answered again in a later
    file of :func:`answer_files` is that file's answer)."""
    out: dict[tuple[str, Any], dict[str, Any]] = {}
    for path in answer_files(engine):
        for answer in oracle.read_jsonl(path):
            out[(str(answer["config"]), answer.get("enable_prefix_caching"))] = answer
    return list(out.values())


@dataclass
class ConfigAgreement:
    config: str
    architecture: str
    vllm_status: str
    layers: int = 0
    agreeing: int = 0
    differences: list[str] = field(default_factory=list)
    tool_error: str | None = None
    groups: int = 0
    """vLLM's KV-cache groups after the block-size alignment."""
    groups_agreeing: int = 0
    group_differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.tool_error is None and not self.differences and not self.group_differences


def encoder_only_record(record: dict[str, Any]) -> bool:
    """A module the runner appends as encoder-only (an Attention of attn_type
    ENCODER_ONLY: the EncoderOnlyAttention class, or the ``attn_type`` the reference
    records for a spec-less module, vllm/v1/worker/gpu_model_runner.py:7057-7079)."""
    return record.get("module") == "EncoderOnlyAttention" or record.get("attn_type") == "encoder_only"


def _role(record: dict[str, Any]) -> str:
    # DeepSeek-V3.2 names its cache ...indexer.k_cache, MiniMax-M3 ...attn.index_cache
    # (a MiniMaxM3IndexerCache module)
    if "indexer" in record["name"] or "Indexer" in str(record.get("module")):
        # GLM-5.3's indexer keeps its tail ring (a CircularBufferSpec) beside its K cache
        return "indexer_tail" if record.get("spec") == "CircularBufferSpec" else "indexer"
    if record.get("spec") == "MambaSpec":
        return "state"
    return "attention"


def _tool_kind(layer: LayerFacts) -> str:
    if layer.kind == "mla":
        return "sliding_mla" if layer.sliding_window else "mla"
    if layer.is_ssm:
        return "state"
    if layer.kind == "cross_attention":
        return "cross"
    if layer.kind == "encoder_only":
        return "encoder_only"
    if layer.sliding_window:
        return "sliding"
    if layer.attention_chunk_size:
        return "chunked"
    if layer.rswa_window is not None:
        return "rswa"
    return "full"


def _context(answer: dict[str, Any], block_size: int) -> SpecContext:
    return SpecContext(
        model_dtype=answer.get("dtype", "bfloat16"),
        # a layer-build answer's --kv-cache-dtype (tools/model_driven_reference.py)
        kv_cache_dtype=answer.get("kv_cache_dtype") or "auto",
        block_size=block_size,
        mamba_block_size=block_size,
    )


def _compare(layer: LayerFacts, role: str, record: dict[str, Any], answer: dict[str, Any]) -> list[str]:
    out: list[str] = []
    want_kind = _SPEC_KIND.get(record["spec"], record["spec"])
    ctx = _context(answer, record["block_size"])
    if layer.kv_cache_dtype is not None:  # the layer's own dtype (a conv cache: the model's)
        ctx = ctx.model_copy(update={"kv_cache_dtype": layer.kv_cache_dtype})
    if role == "indexer":
        if layer.indexer is None:
            return ["vLLM has a sparse indexer cache, the tool none"]
        spec = indexer_spec(layer, ctx)
        if spec.page_size_bytes != record["page_size_bytes"]:
            out.append(f"indexer page {spec.page_size_bytes} != {record['page_size_bytes']}")
        return out
    if role == "indexer_tail":
        if layer.indexer is None or layer.indexer.tail is None:
            return ["vLLM has an indexer tail ring, the tool none"]
        tail = indexer_tail_spec(layer, ctx)
        have_tail = (tail.block_size, tail.num_kv_heads, tail.head_size, tail.page_size_bytes)
        want_tail = (record["block_size"], record.get("num_kv_heads"), record.get("head_size"),
                     record["page_size_bytes"])
        if have_tail != want_tail:
            out.append(f"tail ring (block, heads, head size, page) {have_tail} != vLLM {want_tail}")
        return out
    have_kind = _tool_kind(layer)
    if have_kind != want_kind:
        return [f"kind {have_kind} != vLLM {want_kind} ({record['spec']})"]
    if role == "state":
        assert layer.ssm is not None
        shapes = [list(s) for s in ssm_state_shapes(layer.ssm, 1)]
        if shapes != record["shapes"]:
            out.append(f"state shapes {shapes} != {record['shapes']}")
    else:
        checks = {
            "num_kv_heads": layer.num_kv_heads,
            "head_size": layer.head_size,
            "head_size_v": layer.head_size_v if layer.kind != "mla" else 0,
            "sliding_window": layer.sliding_window,
            "attention_chunk_size": layer.attention_chunk_size,
            # a StaticSinkAttention's sink tokens (SinkFullAttentionSpec.sink_len)
            "sink_len": layer.sink_tokens or None,
        }
        for key, have in checks.items():
            want = record.get(key)
            if key == "head_size_v" and want is None:
                want = record.get("head_size")
            if have != want:
                out.append(f"{key} {have} != vLLM {want}")
        if layer.model_backend is not None and layer.model_backend != record.get("backend"):
            out.append(f"the module's own backend {layer.model_backend} != vLLM "
                       f"{record.get('backend')}")
    backend = _MLA if layer.kind == "mla" else _DENSE
    spec = build_spec(layer, backend, ctx)
    if spec.page_size_bytes != record["page_size_bytes"]:
        out.append(f"page {spec.page_size_bytes} != vLLM {record['page_size_bytes']}")
    return out


def compare(answer: dict[str, Any]) -> ConfigAgreement:
    """The agreement of the tool with one vLLM answer."""
    result = ConfigAgreement(
        config=answer["config"],
        architecture=answer.get("architecture") or "?",
        vllm_status=answer["status"],
    )
    try:
        model: ModelFacts = load_model(REPO / answer["config"])
    except InputError as exc:
        result.tool_error = exc.render()
        return result
    result.architecture = model.architecture
    if answer["status"] != "ok":
        return result
    default = model.kv_cache_dtype_default
    cc = int(str(answer.get("capability") or "9.0").replace(".", ""))
    if default is not None and default.applies(answer.get("kv_cache_dtype"), cc,
                                               f"vllm=={answer['vllm_version']}"):
        # the model's verify_and_update_config sets the cache dtype (GLM-5.3 on SM10x)
        answer = {**answer, "kv_cache_dtype": default.dtype}
    if _compare_driven(model, answer, result):
        return result
    by_index = {layer.index: layer for layer in model.layers}
    seen: set[tuple[int, str]] = set()
    modules: dict[int, int] = {}  # attention caches per layer index (LongCat-Flash: 2)
    for record in answer["layers"]:
        index = record["index"]
        role = _role(record)
        result.layers += 1
        if role == "state" and index is not None and index >= model.num_layers:
            index -= model.num_layers  # Falcon-H1 names its mixers model.<layers + i>.mixer
        layer = by_index.get(index)
        if layer is not None and role == "state" and layer.has_parallel_state:
            layer = layer.state_view()
        if layer is not None and record.get("spec") == "CrossAttentionSpec" and layer.cross_attention:
            layer = layer.cross_view()  # an encoder-decoder's decoder layer: its encoder_attn
        if layer is None:
            result.differences.append(f"layer {index}: vLLM has it, the tool does not")
            continue
        conv = layer.conv_cache
        if conv is not None and record["name"].rsplit(".", 1)[-1] == conv.name:
            # the decoder layer's short-convolution state (Inkling's conv_state)
            _record_conv(layer, record, answer, result)
            continue
        if record.get("kv_sharing_target") is not None or record.get("spec") is None:
            # an EncoderOnlyAttention module gives no spec (get_kv_cache_spec returns None);
            # the runner then appends its layers as one zero-memory EncoderOnlyAttentionSpec
            # group (vllm/v1/worker/gpu_model_runner.py:7057-7078 in 0.33.0), which the
            # tool's plan states as its encoder_only layers
            encoder = encoder_only_record(record) and layer.kind == "encoder_only"
            if layer.kind == "none" or encoder:
                result.agreeing += 1
            else:
                result.differences.append(f"layer {index}: vLLM keeps no cache, the tool a {layer.kind}")
            continue
        seen.add((index, role))
        if role == "attention" and record.get("spec") != "CrossAttentionSpec":
            modules[index] = modules.get(index, 0) + 1
        diffs = _compare(layer, role, record, answer)
        if diffs:
            result.differences.extend(f"layer {index} {role}: {d}" for d in diffs)
        else:
            result.agreeing += 1
    for layer in model.layers:
        role = "state" if layer.is_ssm else "attention"
        built = modules.get(layer.index, 0)
        if layer.is_attention and layer.kind != "cross_attention" and built \
                and built != layer.attentions:
            result.differences.append(f"layer {layer.index}: vLLM builds {built} attention "
                                      f"caches, the tool {layer.attentions}")
        if layer.kind != "none" and (layer.index, role) not in seen:
            known = any(r["index"] == layer.index for r in answer["layers"])
            if not known:
                result.layers += 1
                result.differences.append(
                    f"layer {layer.index}: the tool has a {layer.kind} cache, vLLM none"
                )
    return result


def _record_conv(layer: LayerFacts, record: dict[str, Any], answer: dict[str, Any],
                 result: ConfigAgreement) -> bool:
    """A decoder layer's conv-state cache against the tool's conv view of the layer."""
    diffs = _compare(layer.conv_view(), "attention", record, answer)
    if diffs:
        result.differences.extend(f"layer {layer.index} conv: {d}" for d in diffs)
    else:
        result.agreeing += 1
    return not diffs


def _driven(model: ModelFacts, answer: dict[str, Any]) -> Any:
    """The model-driven rule and the backend its layers choose with no
    ``--attention-backend`` on the reference's GPU (None: not a model-driven model)."""
    from selector.kv import model_driven as md

    engine = f"vllm=={answer['vllm_version']}"
    found = md.driven_rule(model, engine, load_catalog())
    if found is None:
        return None
    data, rule = found
    major, minor = (int(p) for p in str(answer.get("capability") or "9.0").split("."))
    # the CPU reference's FlashMLA has no mega-attention ops unless the answer says so
    # (tools/model_driven_reference.py --mega-ops)
    probes = {"mega_attn_ops": bool(answer.get("mega_attn_ops"))}
    choice = md.select_driven(rule, answer.get("attention_backend"), major, config=model.config,
                              cc=major * 10 + minor, tp_size=1, probes=probes)
    if choice.backend is None:  # the layer code refuses the checkpoint or the name
        return data, rule, None, None, f"{choice.exc_type}: {choice.error}", major
    backend = md.driven_backend(data, rule, choice.backend, major)
    kv_cache_dtype = answer.get("kv_cache_dtype") or "auto"
    dtype, detail = md.resolve_cache_dtype(rule, backend, kv_cache_dtype, major)
    element_bytes = detail if isinstance(detail, int) else None
    refused = md.layer_refusal(
        rule, model.config or {}, kv_cache_dtype=kv_cache_dtype, cc=major * 10 + minor,
        element_bytes=element_bytes, specs=dtype is not None,
        cache_block=md.aligned_block(rule, data, choice.backend, model.config or {},
                                     answer.get("requested_block_size"),
                                     element_bytes=element_bytes, cache_dtype=dtype,
                                     architecture=model.architecture, cc_major=major)
        if dtype is not None else 16)
    if refused is not None:
        return data, rule, None, None, f"{refused.exc_type}: {refused.error}", major
    # detail: element bytes, None, or the refusal
    return data, rule, choice.backend, dtype, detail, major


def _compare_driven(model: ModelFacts, answer: dict[str, Any], result: ConfigAgreement) -> bool:
    """A model whose layers choose their own backend: each cache module vLLM registered
    against the model-driven data's (name, module, backend, block size, page)."""
    from selector.kv import model_driven as md

    found = _driven(model, answer)
    if found is None:
        return False
    data, rule, backend, dtype, element_bytes, cc_major = found
    if dtype is None or backend is None:
        result.tool_error = str(element_bytes)
        return True
    caches = md.driven_caches(rule, model.config or {}, selected=backend, element_bytes=element_bytes,
                              cache_dtype=dtype, cache_block=answer["block_size"],
                              layer_class=md.driven_backend(data, rule, backend, cc_major).layer_class,
                              architecture=model.architecture, cc_major=cc_major)
    have = {c.name: c for c in caches}
    for record in answer["layers"]:
        result.layers += 1
        cache = have.pop(record["name"], None)
        if cache is None:
            result.differences.append(f"{record['name']}: vLLM has it, the tool does not")
            continue
        mine = (cache.module, cache.backend if cache.spec else None,
                cache.spec.block_size if cache.spec else None,
                cache.spec.page_size_bytes if cache.spec else None)
        theirs = (record["module"], record.get("backend"), record.get("block_size"),
                  record.get("page_size_bytes"))
        if mine == theirs:
            result.agreeing += 1
        else:
            result.differences.append(f"{record['name']}: {mine} != vLLM {theirs}")
    result.differences.extend(f"{name}: the tool has it, vLLM does not" for name in have)
    return True


Group = tuple[int, int, tuple[int, ...]]
"""(block size, page bytes, the decoder layers it holds) of one KV-cache group (a
layer's indexer or parallel state is the same decoder layer)."""


def _vllm_groups(answer: dict[str, Any], num_layers: int) -> list[Group]:
    def layer(index: int) -> int:  # Falcon-H1 names its mixers model.<layers + i>.mixer
        return index - num_layers if index >= num_layers else index

    return [(g["block_size"], g["page_size_bytes"],
             tuple(sorted({layer(i) for i in g["layers"] if i is not None})))
            for g in answer["aligned"]["groups"]]


REFERENCE_DEVICES = {"9.0": "H200", "10.0": "B200", "12.0": "RTX PRO 6000"}
"""The GPU of each compute capability the reference emulates (``oracle.set_capability``)."""


def reference_deployment(answer: dict[str, Any], max_len: int) -> str:
    """The deployment file of the reference's run: its release, config, emulated GPU, dtype,
    ``max_model_len`` and what it pinned (``--attention-backend``, ``--kv-cache-dtype``,
    ``--enable-prefix-caching``)."""
    device = REFERENCE_DEVICES[str(answer.get("capability") or "9.0")]
    text = (f"engine: vllm=={answer['vllm_version']}\nmodel: {REPO / answer['config']}\n"
            f"device: {device}\ndtype: {answer.get('dtype', 'bfloat16')}\nmax_model_len: {max_len}\n"
            "max_num_seqs: 1\n")
    if answer.get("enable_prefix_caching") is not None:
        text += f"enable_prefix_caching: {str(answer['enable_prefix_caching']).lower()}\n"
    for key in ("attention_backend", "kv_cache_dtype"):
        if answer.get(key):
            text += f"{key}: {answer[key]}\n"
    return text


def tool_groups(answer: dict[str, Any]) -> list[Group]:
    """The tool's groups for the reference's deployment (raises InputError / a plan
    error text as ValueError)."""
    from selector.pipeline.deployment import solve_deployment

    max_len = answer.get("max_model_len") or _config_max_len(REPO / answer["config"])
    # the reference is vLLM's model class and KV-cache specs, built without GPU memory: the
    # deployment runs one sequence, so no memory-dependent refusal (the Mamba blocks for
    # max_num_seqs under FULL graphs) stands in for the structure being compared
    loaded = parse_deployment("<reference deployment>", reference_deployment(answer, max_len))
    solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                              refuse_split=False)
    checked = solved.model
    if checked is None or checked.plan is None:
        raise ValueError("the tool selects no valid backend for every layer")
    plan = checked.plan
    if not plan.ok:
        raise ValueError("; ".join(e.message for e in plan.errors))
    out: list[Group] = []
    for group in plan.groups:
        if group.spec is not None and group.spec.kind == "encoder_only_attention":
            continue  # the runner's own group, after the engine's grouping (see compare)
        page = (group.spec.page_size_bytes if group.spec is not None
                else sum(spec.page_size_bytes for spec in group.layer_specs))
        out.append((group.manager_block_size, page, tuple(sorted(set(group.layer_indices)))))
    return out


def _config_max_len(path: Path) -> int:
    """The reference's ``max_model_len``: min(8192, the config's own maximum)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    # max_target_positions: an encoder-decoder's decoder length (WhisperConfig), which
    # vLLM's derived max_model_len reads when the others are absent
    for key in ("max_position_embeddings", "seq_length", "n_positions", "max_target_positions",
                "max_seq_len"):
        value = text.get(key) or raw.get(key)
        if isinstance(value, int | float) and value > 0:
            return min(8192, int(value))
    return 8192


def _render(group: Group) -> str:
    block, page, layers = group
    shown = ",".join(map(str, layers[:6])) + (",..." if len(layers) > 6 else "")
    return f"block {block} page {page} layers [{shown}] ({len(layers)})"


def compare_groups(answer: dict[str, Any], result: ConfigAgreement, num_layers: int) -> None:
    """vLLM's groups after the alignment against the tool's plan, as multisets."""
    want = _vllm_groups(answer, num_layers)
    result.groups = len(want)
    try:
        have = tool_groups(answer)
    except (InputError, ValueError) as exc:
        result.group_differences.append(f"the tool has no plan: {exc}")
        return
    unmatched = list(have)
    for group in want:
        if group in unmatched:
            unmatched.remove(group)
            result.groups_agreeing += 1
        else:
            result.group_differences.append(f"vLLM group {_render(group)}: the tool has none such")
    for group in unmatched:
        result.group_differences.append(f"the tool's group {_render(group)}: vLLM has none such")


def agreements(engine: str = "vllm-0.33.0") -> Iterator[ConfigAgreement]:
    return agreements_of(load_answers(engine))


def agreements_of(answers: Iterable[dict[str, Any]]) -> Iterator[ConfigAgreement]:
    """Layers and groups of each answer against the tool."""
    for answer in answers:
        result = compare(answer)
        if answer["status"] == "ok" and result.tool_error is None:
            # the tool's layer count (a looped stack has L caches per loop)
            compare_groups(answer, result, len(load_model(REPO / answer["config"]).layers))
        yield result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--engine", default="vllm-0.33.0")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    rows = list(agreements(args.engine))
    by_arch: dict[str, list[ConfigAgreement]] = {}
    for row in rows:
        by_arch.setdefault(row.architecture, []).append(row)
    print("| architecture | configs | layers agreeing | groups agreeing (after alignment) | notes |")
    print("| --- | --- | --- | --- | --- |")
    total = agree = groups = groups_agree = 0
    for arch in sorted(by_arch):
        group = by_arch[arch]
        built = [r for r in group if r.vllm_status == "ok"]
        layers = sum(r.layers for r in built)
        ok = sum(r.agreeing for r in built)
        arch_groups = sum(r.groups for r in built)
        arch_groups_ok = sum(r.groups_agreeing for r in built)
        total += layers
        agree += ok
        groups += arch_groups
        groups_agree += arch_groups_ok
        notes = "; ".join(
            [f"vLLM refused {Path(r.config).name}" for r in group if r.vllm_status != "ok"]
            + [f"the tool cannot read {Path(r.config).name}" for r in group
               if r.vllm_status == "ok" and r.tool_error]
        )
        print(f"| {arch} | {len(group)} | {ok}/{layers} | {arch_groups_ok}/{arch_groups} | {notes} |")
    built = sum(r.vllm_status == "ok" for r in rows)
    print(f"\n{agree}/{total} layers and {groups_agree}/{groups} groups agree over {built} "
          "configs vLLM built")
    if args.verbose:
        for row in rows:
            if row.tool_error or row.differences or row.group_differences:
                print(f"\n{row.config}: {row.tool_error or ''}")
                for diff in (row.differences[:8] + row.group_differences[:8]):
                    print(f"  {diff}")
    return 0 if all(r.ok for r in rows if r.vllm_status == "ok") else 1


if __name__ == "__main__":
    sys.exit(main())
