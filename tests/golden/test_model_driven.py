"""The backends a model's own layers choose (DeepSeek-V4's FLASHMLA_SPARSE_DSV4 /
FLASHINFER_MLA_SPARSE_DSV4 ...) agree with vLLM in every profiled release: vLLM's answers
(``tools/model_driven_reference.py``: the real model class built on the meta device on an
emulated H200 (SM90) and B200 (SM100), with no ``--attention-backend`` and with each
model-driven name, with vLLM's default KV-cache dtype and with ``fp8``) against the
project's data (``schemas/engines/*/model-driven.yaml``, ``selector/kv/model_driven/``):
the backend each cache module names, every module's spec and page before the engine's
block-size alignment, every group after it, each layer's CUDA-graph support as its
metadata builder answers, and vLLM's refusal texts word for word."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.kv import model_driven as md
from selector.models import load_model

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "vllm_models" / "model_driven"
RELEASES = ("0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0",
            "0.32.0", "0.33.0")


def _read(path: Path) -> tuple[dict[str, Any], ...]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def _parts(version: str) -> list[Path]:
    """The release's file, then the parts recorded beside it (``vllm-<version>-*.jsonl.gz``:
    configs added since, each part with its own ``<backend classes>`` record)."""
    return [GOLDEN / f"vllm-{version}.jsonl.gz",
            *sorted(GOLDEN.glob(f"vllm-{version}-*.jsonl.gz"))]


@cache
def _answers(version: str) -> tuple[dict[str, Any], ...]:
    return tuple(a for path in _parts(version) for a in _read(path))


def _runs(version: str) -> list[dict[str, Any]]:
    return [a for a in _answers(version) if "backends" not in a
            and "mega_available_by_tp" not in a and "selection_matrix" not in a]


def _all_classes(version: str) -> list[dict[str, Any]]:
    return [a for a in _answers(version) if "backends" in a]


def _cases() -> list[tuple[str, dict[str, Any]]]:
    return [(v, a) for v in RELEASES for a in _runs(v)]


def _id(case: tuple[str, dict[str, Any]]) -> str:
    version, a = case
    return (f"{version}-sm{a['capability'].replace('.', '')}-{a.get('attention_backend') or 'auto'}"
            f"-{a.get('kv_cache_dtype') or 'auto'}"
            + (f"-block{a['requested_block_size']}" if a.get("requested_block_size") else ""))


CONFIGS = {"tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V4-Flash.json",
           "tests/fixtures/hf_configs/model_driven/nvidia--DeepSeek-V4-Pro-NVFP4.json"}
"""Two real DeepSeek-V4 configs (Flash: 43 layers led by two sliding-only layers; Pro: 61
layers led by two 128x-compressed ones): ``tests/fixtures/hf_configs/SOURCES.md``."""

_DSV4_VISION = "tests/fixtures/hf_configs/synthetic/DeepseekV4ForConditionalGeneration.json"
_DOTS3 = "tests/fixtures/hf_configs/model_driven/synthetic--Dots3NoteForCausalLM.json"
_STEP5 = {f"tests/fixtures/hf_configs/model_driven/synthetic--Step5{name}.json"
          for name in ("ForCausalLM", "ForCausalLM-dense", "ForCausalLM-other",
                       "ForCausalLM-index4", "ForCausalLM-nogate", "ForCausalLM-heads16",
                       "ForCausalLM-onegroup", "ForCausalLM-indexer1", "ForCausalLM-head128",
                       "ForCausalLM-proxy128", "ForCausalLM-topk2048", "ForCausalLM-rope0",
                       "ForCausalLM-nohead",
                       "ForConditionalGeneration")}
_DSV41 = "tests/fixtures/hf_configs/model_driven/synthetic--DeepseekV41ForCausalLM.json"
_DSV41_ENGRAM = "tests/fixtures/hf_configs/model_driven/synthetic--DeepseekV41ForCausalLM-engram.json"
_DSV41_REFUSED = {
    "tests/fixtures/hf_configs/model_driven/synthetic--DeepseekV41ForCausalLM-no-kv-sources.json",
    "tests/fixtures/hf_configs/model_driven/synthetic--DeepseekV41ForCausalLM-ratio4.json"}
ADDED = {version: ({_DSV4_VISION} if version >= "0.30.0" else set()) | {_DOTS3}
         for version in ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")}
for _version in ("0.30.0", "0.31.0", "0.32.0", "0.33.0"):
    ADDED[_version] |= {_DSV41, _DSV41_ENGRAM, *_DSV41_REFUSED}
ADDED["0.33.0"] |= _STEP5
"""Configs recorded since, per release (the parts beside the release's file): the
DeepSeek-V4 vision wrapper (DeepSeek-V4-Flash's config with the vision tower's fields;
vLLM has it from 0.30.0 on), a synthetic 4-layer Dots3Note (one full, three sliding
layers; vLLM has it from 0.28.0 on: ``vllm-<version>-dots3.jsonl.gz``), a synthetic
DeepSeek-V4.1 config without Engram layers (``vllm-<version>-dsv41.jsonl.gz``; vLLM has V4.1
from 0.30.0 on), the same with Engram layers (``vllm-<version>-dsv41-engram*.jsonl.gz``: the
reference's tokenizer stand-in, ``tools/oracle/models.py`` ``engram_tokenizer``) and two
configs the V4.1 layer refuses (no ``kv_source_layer_ids``; a ratio-4 layer:
``vllm-<version>-dsv41-refused.jsonl.gz``; V4.1 is also recorded on an emulated SM120,
``vllm-<version>-dsv41-sm120.jsonl.gz``: its FlashInfer layer class stores the packed
layout there), and 0.33.0's Step5
(the 8-layer synthetic config, the same without its sparse_config section, the same with
an attention_other_setting for its sliding layers, three its DSA layers refuse
(index_tp_size 4, no head-wise gate, 2 query heads per KV group), one KV group of head 192
(its fp8 tail ring too small at block 16, built at 32), the same refused for 16 indexer
heads on one provider group or a head of 128, three sparse_config values vLLM refuses
(proxy_dim, topk, the indexer's RoPE dimension), one without head_dim, and under the Step5
vision frontend: ``vllm-0.33.0-step5.jsonl.gz``, recorded on Model Runner V2,
``--gpu-runner``)."""

SPEC_CLASSES = {"full_attention": ("FullAttentionSpec",), "mla_attention": ("MLAAttentionSpec",),
                "sliding_window": ("SlidingWindowSpec", "SlidingWindowMLASpec"),
                "circular_buffer": ("CircularBufferSpec",)}
"""vLLM's spec classes each kind of the project's specs stands for."""

REFERENCE_PROBES = {"mega_attn_ops": False}
"""What the CPU reference's vLLM probes on the GPU build: it has no ``_flashmla_C``, so
FlashMLA's mega-attention ops are absent (``is_flashmla_mega_attn_supported``). The
answers recorded with ``--mega-ops`` (``vllm-<version>-dsv41-mega.jsonl.gz``, each run
marked ``mega_attn_ops``) are those of a build that has them."""


def _probes(answer: dict[str, Any]) -> dict[str, bool]:
    return {**REFERENCE_PROBES, "mega_attn_ops": bool(answer.get("mega_attn_ops"))}


def test_every_release_is_recorded_on_both_gpus() -> None:
    for version in RELEASES:
        runs = _runs(version)
        assert {a["capability"] for a in runs} >= {"9.0", "10.0"}, version
        # SM103 and SM120 beside: Step5's DSA layers' own capability check
        assert {a["capability"] for a in runs} - {"9.0", "10.0"} <= {"10.3", "12.0"}, version
        assert {a["config"] for a in runs} == CONFIGS | ADDED.get(version, set()), version
        assert all(a["status"] in ("ok", "refused") for a in runs), version


@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_the_layers_choice_and_caches_are_vllms(case: tuple[str, dict[str, Any]]) -> None:
    version, answer = case
    data = md.load_model_driven(f"vllm=={version}", load_catalog())
    assert data is not None
    model = load_model(ROOT / answer["config"])
    rule = data.rule_for(model.architecture)
    assert rule is not None and model.config is not None
    requested = answer.get("attention_backend")
    cc_major = int(answer["capability"].split(".")[0])
    # a generic name (FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE, FLASHMLA) is mapped, refused
    # or ignored by the layer like a model-driven one
    if "KeyError" in str(answer.get("error")):
        assert requested not in data.backends
        return
    refusal = _platform_first_refusal(version, answer, model)
    if refusal is not None:  # the platform's refusal for the layer the model discards
        assert answer["status"] == "refused"
        assert refusal == answer["error"]
        return
    major, minor = (int(part) for part in answer["capability"].split("."))
    selection = md.select_driven(rule, requested, cc_major, config=model.config,
                                 cc=major * 10 + minor, tp_size=1, probes=_probes(answer))
    if selection.error is not None:
        assert answer["status"] == "refused"
        assert f"{selection.exc_type}: {selection.error}" == answer["error"]
        return
    assert selection.backend is not None
    backend = md.driven_backend(data, rule, selection.backend, cc_major)
    dtype, detail = md.resolve_cache_dtype(rule, backend, answer.get("kv_cache_dtype") or "auto",
                                           cc_major)
    element_bytes = detail if isinstance(detail, int) else None
    # a layer's build refused (before the KV-cache dtype's refusal), then a spec's
    refused = md.layer_refusal(rule, model.config, kv_cache_dtype=answer.get("kv_cache_dtype")
                               or "auto", cc=major * 10 + minor, element_bytes=element_bytes,
                               specs=dtype is not None,
                               cache_block=md.aligned_block(
                                   rule, data, selection.backend, model.config,
                                   answer.get("requested_block_size"),
                                   element_bytes=element_bytes, cache_dtype=dtype,
                                   architecture=model.architecture, cc_major=cc_major)
                               if dtype is not None else 16)
    if refused is not None:
        assert answer["status"] == "refused"
        assert f"{refused.exc_type}: {refused.error}" == answer["error"]
        return
    if dtype is None:
        assert answer["status"] == "refused"
        assert detail == answer["error"]
        return
    assert answer["status"] == "ok", answer.get("error")
    before = md.driven_caches(rule, model.config, selected=selection.backend,
                              element_bytes=element_bytes, cache_dtype=dtype,
                              cache_block=answer["block_size"], layer_class=backend.layer_class,
                              architecture=model.architecture, cc_major=cc_major)
    have = [(e.name, e.module, e.backend if e.spec else None,
             e.spec.block_size if e.spec else None, e.spec.page_size_bytes if e.spec else None)
            for e in before]
    want = [(r["name"], r["module"], r.get("backend"), r.get("block_size"), r.get("page_size_bytes"))
            for r in answer["layers"]]
    assert have == want
    assert all(r["spec"] in SPEC_CLASSES[e.spec.kind] for e, r in zip(before, answer["layers"],
                                                                       strict=True) if e.spec)
    plan = md.plan_driven(model, rule, data, selection.backend, cache_dtype=dtype,
                          element_bytes=element_bytes,
                          options=_options(answer.get("requested_block_size")), cc_major=cc_major)
    aligned = answer["aligned"]
    assert plan.block_size is not None and plan.block_size.block_size == aligned["block_size"]
    have_groups = sorted((g.manager_block_size, g.bytes_per_block, len(g.layer_names))
                         for g in plan.groups)
    want_groups = sorted((g["block_size"], g["page_size_bytes"], len(g["layers"]))
                         for g in aligned["groups"])
    assert have_groups == want_groups
    have_members = sorted(sorted(g.layer_indices) for g in plan.groups)
    want_members = sorted(sorted(g["layers"]) for g in aligned["groups"])
    assert have_members == want_members
    supports = {r["backend"]: r["cudagraph_support"] for r in answer["layers"]
                if r.get("cudagraph_support")}
    for name, level in supports.items():
        have_level = (data.backends[name].cudagraph_support if name in data.backends
                      else rule.layer_backends[name].support_with(selection.backend))
        assert have_level == level, name
    assert answer.get("kv_cache_layout") in (None, rule.kv_cache_layout)


def _platform_first_refusal(version: str, answer: dict[str, Any], model: Any) -> str | None:
    """The whole pipeline's refusal where the rule's ``platform_first`` selection refuses
    (the solver's text for that layer, vLLM's ``Selected backend ... is not valid``)."""
    from selector.models.tensor_parallel import shard_model
    from selector.pipeline.model import check_model

    rule = md.load_model_driven(f"vllm=={version}", load_catalog())
    assert rule is not None
    driven = rule.rule_for(model.architecture)
    if driven is None or not driven.platform_first:
        return None
    cc = int(answer["capability"].replace(".", ""))
    checked = check_model(shard_model(model, 1), {"cc": cc, "dtype": "bfloat16",
                                                  "kv_cache_dtype": answer.get("kv_cache_dtype") or "auto",
                                                  "block_size": answer.get("requested_block_size")},
                          engine=f"vllm=={version}", attention_backend=answer.get("attention_backend"),
                          catalog=load_catalog())
    said = {s.result.error.message for s in checked.selections
            if s.result.error is not None and not s.result.error.code.startswith("MD")}
    return f"ValueError: {said.pop()}" if said else None


def _options(block_size: int | None) -> Any:
    """The deployment's options (``--block-size`` as given to vLLM: the engine then keeps
    the user's block, ``update_block_size_for_backend`` phase 1)."""
    from selector.kv import KVOptions

    return KVOptions(cudagraph_mode="FULL_AND_PIECEWISE", max_num_batched_tokens=8192,
                     max_num_seqs=256, gpu_memory_utilization=0.9, block_size=block_size)


@pytest.mark.parametrize("version", RELEASES)
def test_the_backend_classes_are_vllms(version: str) -> None:
    """Each model-driven member of the release's enum is in the data, with the kernel
    block sizes and builder CUDA-graph support its class states (a ROCm twin cannot be
    imported on the CUDA reference host: its facts are the ROCm module's, cited)."""
    data = md.load_model_driven(f"vllm=={version}", load_catalog())
    assert data is not None
    for classes in _all_classes(version):  # each part records the release's classes again
        _check_classes(data, {b["backend"]: b for b in classes["backends"]})


def _check_classes(data: Any, recorded: dict[str, Any]) -> None:
    assert set(recorded) == set(data.backends)
    for name, fact in recorded.items():
        backend = data.backends[name]
        assert backend.class_path == fact["class_path"], name
        if "import_error" in fact:
            assert backend.platform == "rocm", name
            continue
        assert list(backend.kernel_block_sizes) == fact["kernel_block_sizes"], name
        assert backend.cudagraph_support == fact["cudagraph_support"], name
        assert list(backend.kv_cache_dtypes) == fact["kv_cache_dtypes"], name


def test_the_rules_own_backends_are_vllms() -> None:
    """The backends a rule's cache modules name that the release's enum does not make
    model-driven (Step5's STEP5_DSA, its split-KV FLASH_ATTN, the summary and ring caches'
    backends) state the kernel block sizes and builder CUDA-graph support their classes
    recorded (``layer_backends`` of the part's ``<backend classes>`` record)."""
    data = md.load_model_driven("vllm==0.33.0", load_catalog())
    assert data is not None
    rule = data.rule_for("Step5ForCausalLM")
    assert rule is not None
    recorded = {b["name"]: b for part in _all_classes("0.33.0")
                if any("Step5" in str(c.get("class")) for c in part["layer_backends"])
                for b in part["layer_backends"]}
    assert set(rule.layer_backends) == set(recorded)
    for name, helper in rule.layer_backends.items():
        fact = recorded[name]
        assert helper.class_name == fact["class"].rsplit(".", 1)[-1], name
        assert helper.cudagraph_support == fact["cudagraph_support"], name
        sizes = [f"multiple_of {s['multiple_of']}" if isinstance(s, dict) else s
                 for s in fact["kernel_block_sizes"]]
        assert list(helper.kernel_block_sizes) == sizes, name


UNMAPPED = GOLDEN / "unmapped"
"""vLLM's answers for model-driven architectures whose layer rule is not written yet
(DeepSeek-V4.1: ``schemas/models/unmapped.yaml`` says what the rule needs), recorded with
the same reference so that the rule can be checked against them once it is data."""


def test_the_unmapped_answers_are_vllms_and_have_no_rule() -> None:
    from selector.models.families import family_for, unmapped_reason

    paths = sorted(UNMAPPED.glob("vllm-*.jsonl.gz"))  # none left: every one is mapped
    for path in paths:
        version = path.name.removeprefix("vllm-").split("-", 1)[0]
        architecture = path.name.removesuffix(".jsonl.gz").split("-", 2)[2]
        data = md.load_model_driven(f"vllm=={version}", load_catalog())
        assert data is not None and data.rule_for(architecture) is None, architecture
        assert family_for(architecture) is None, architecture
        reason = unmapped_reason(architecture)
        assert reason is not None and path.name in reason, architecture
        runs = [a for a in _read(path) if "backends" not in a]
        assert runs and all(a["status"] in ("ok", "refused") for a in runs), path.name
        assert {a["capability"] for a in runs} == {"9.0", "10.0"}, path.name


DOTS3_PART = "vllm-{version}-dots3.jsonl.gz"
KERNEL_SIZES_SHARED: dict[tuple[str, str], list[object]] = {}
"""Kernel block sizes a release's classes state that its model-driven.yaml, shared with an
older release, does not (none: 0.32.0 has its own file since GLM-5.3, with the padded
sparse backend's [MultipleOf(64)])."""


@pytest.mark.parametrize("version", [v for v in RELEASES
                                     if (GOLDEN / DOTS3_PART.format(version=v)).is_file()])
def test_the_dots3_note_layer_backends_state_vllms_kernel_block_sizes(version: str) -> None:
    """The backends Dots3Note's layers pin (the rule's layer_backends) have the kernel
    block sizes their classes state in the release (the recorder's class facts)."""
    data = md.load_model_driven(f"vllm=={version}", load_catalog())
    assert data is not None
    rule = data.rule_for("Dots3NoteForCausalLM")
    assert rule is not None
    classes = next(a for a in _read(GOLDEN / DOTS3_PART.format(version=version)) if "backends" in a)
    recorded = {b["name"]: b for b in classes["layer_backends"]}
    assert set(recorded) == set(rule.layer_backends)
    for name, helper in rule.layer_backends.items():
        ours = [s if isinstance(s, int) else {"multiple_of": int(s.split()[-1])}
                for s in helper.kernel_block_sizes]
        theirs = recorded[name]["kernel_block_sizes"]
        assert helper.class_name == recorded[name]["class"].rsplit(".", 1)[-1], name
        if (version, name) in KERNEL_SIZES_SHARED:
            assert theirs == KERNEL_SIZES_SHARED[(version, name)] != ours
        else:
            assert ours == theirs, name


GAPS = GOLDEN / "gaps"
"""vLLM's answers the tool does not give yet, each asserted as still differing (drop the
file's rows into the release's part once the tool agrees)."""


@pytest.mark.parametrize("answer", [a for a in _read(GAPS / "vllm-0.33.0-dots3-driven-names.jsonl.gz")
                                    if "backends" not in a],
                         ids=lambda a: f"sm{a['capability'].replace('.', '')}-{a['attention_backend']}")
def test_a_model_driven_name_given_to_dots3_note_is_a_known_gap(answer: dict[str, Any]) -> None:
    """vLLM's platform validates another model's model-driven name (DeepSeek-V4's, V4.1's,
    MiniMax-M3's) for the sparse MLA layer Dots3Note's full layer builds first and refuses
    it with that class's reasons (``head_size not supported``, ...); the tool's selector
    knows no such class for an ordinary layer and refuses the name as an unknown attention
    backend (clear bad input, exit 2), not in vLLM's words."""
    from selector.errors import InputError

    model = load_model(ROOT / answer["config"])
    assert answer["status"] == "refused"
    assert answer["error"].startswith(
        f"ValueError: Selected backend AttentionBackendEnum.{answer['attention_backend']} is not valid")
    if answer["attention_backend"] in load_catalog().engine("vllm==0.33.0").backends:
        # modelled on CUDA now (MINIMAX_M3_SPARSE: tests/golden/test_cuda_pinned.py)
        assert _platform_first_refusal("0.33.0", answer, model) == answer["error"]
        return
    with pytest.raises(InputError, match="unknown attention backend"):
        _platform_first_refusal("0.33.0", answer, model)


def _topologies() -> list[tuple[str, dict[str, Any]]]:
    return [(v, a) for v in RELEASES for a in _answers(v) if "mega_available_by_tp" in a]


def _v41_case(version: str, answer: dict[str, Any]) -> tuple[Any, md.DrivenModel, int]:
    """(the model, its release's rule, the capability major) of a recorded V4.1 answer."""
    data = md.load_model_driven(f"vllm=={version}", load_catalog())
    assert data is not None
    model = load_model(ROOT / answer["config"])
    rule = data.rule_for(model.architecture)
    assert rule is not None
    return model, rule, int(answer["capability"].split(".")[0])


def test_the_mega_layer_topologies_are_recorded() -> None:
    """Every release with FlashMLA's mega attention (0.31.0 on) has its topology answers."""
    have = {v for v, _ in _topologies()}
    assert have == {"0.31.0", "0.32.0", "0.33.0"}


@pytest.mark.parametrize("case", _topologies(),
                         ids=lambda c: f"{c[0]}-sm{c[1]['capability'].replace('.', '')}")
def test_the_default_per_tensor_parallel_size_is_vllms(case: tuple[str, dict[str, Any]]) -> None:
    """With the mega-attention ops, the layer's default (no --attention-backend) is
    FLASHMLA_MEGA_ATTN_DSV41 exactly where vLLM's ``is_available_for`` answers True for
    that TP size (``tools/model_driven_reference.py --mega-topologies``), else FlashMLA."""
    version, answer = case
    model, rule, cc_major = _v41_case(version, answer)
    for tp, available in answer["mega_available_by_tp"].items():
        selection = md.select_driven(rule, None, cc_major, config=model.config,
                                     tp_size=int(tp), probes={"mega_attn_ops": True})
        want = "FLASHMLA_MEGA_ATTN_DSV41" if available else "FLASHMLA_SPARSE_DSV41"
        assert selection.backend == want, tp


def _matrices() -> list[tuple[str, dict[str, Any]]]:
    return [(v, a) for v in RELEASES for a in _answers(v) if "selection_matrix" in a]


def test_every_v41_release_has_its_selection_matrix() -> None:
    assert {v for v, _ in _matrices()} == {"0.30.0", "0.31.0", "0.32.0", "0.33.0"}


@pytest.mark.parametrize("case", _matrices(),
                         ids=lambda c: f"{c[0]}-sm{c[1]['capability'].replace('.', '')}")
def test_the_layers_choice_per_name_tp_and_pcp_is_vllms(case: tuple[str, dict[str, Any]]) -> None:
    """vLLM's own ``_select_dsv4_attn_cls`` (``tools/model_driven_reference.py
    --selection-matrix``: each --attention-backend, TP 1 / 8 / 16, PCP 1 / 2, with the
    mega-attention ops) against the rule's ``selection``: the backend, or vLLM's error."""
    version, answer = case
    model, rule, cc_major = _v41_case(version, answer)
    for key, want in answer["selection_matrix"].items():
        name, tp, pcp = key.split("|")
        selection = md.select_driven(rule, None if name == "none" else name, cc_major,
                                     config=model.config, tp_size=int(tp.removeprefix("tp")),
                                     pcp_size=int(pcp.removeprefix("pcp")),
                                     probes={"mega_attn_ops": bool(answer["mega_attn_ops"])})
        have = (selection.backend if selection.error is None
                else {"error": f"{selection.exc_type}: {selection.error}"})
        assert have == want, key
