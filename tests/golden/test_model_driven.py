"""The backends a model's own layers choose (DeepSeek-V4's FLASHMLA_SPARSE_DSV4 /
FLASHINFER_MLA_SPARSE_DSV4 ...) agree with vLLM in every profiled release: vLLM's answers
(``tools/model_driven_reference.py``: the real model class built on the meta device on an
emulated H200 (SM90) and B200 (SM100), with no ``--attention-backend`` and with each
model-driven name, with vLLM's default KV-cache dtype and with ``fp8``) against the
project's data (``schemas/engines/*/model-driven.yaml``, ``selector/kv/model_driven.py``):
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
    return [a for a in _answers(version) if "backends" not in a]


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
ADDED = {version: ({_DSV4_VISION} if version >= "0.30.0" else set()) | {_DOTS3}
         for version in ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")}
"""Configs recorded since, per release (the parts beside the release's file): the
DeepSeek-V4 vision wrapper (DeepSeek-V4-Flash's config with the vision tower's fields;
vLLM has it from 0.30.0 on) and a synthetic 4-layer Dots3Note (one full, three sliding
layers; vLLM has it from 0.28.0 on: ``vllm-<version>-dots3.jsonl.gz``)."""


def test_every_release_is_recorded_on_both_gpus() -> None:
    for version in RELEASES:
        runs = _runs(version)
        assert {a["capability"] for a in runs} == {"9.0", "10.0"}, version
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
    selection = md.select_driven(rule, requested, cc_major)
    if selection.error is not None:
        assert answer["status"] == "refused"
        assert f"{selection.exc_type}: {selection.error}" == answer["error"]
        return
    assert selection.backend is not None
    backend = md.driven_backend(data, rule, selection.backend)
    dtype, detail = md.resolve_cache_dtype(rule, backend, answer.get("kv_cache_dtype") or "auto")
    if dtype is None:
        assert answer["status"] == "refused"
        assert detail == answer["error"]
        return
    assert answer["status"] == "ok", answer.get("error")
    element_bytes = detail if isinstance(detail, int) else None
    before = md.driven_caches(rule, model.config, selected=selection.backend,
                              element_bytes=element_bytes, cache_dtype=dtype,
                              cache_block=answer["block_size"], layer_class=backend.layer_class,
                              architecture=model.architecture)
    have = [(e.name, e.module, e.backend if e.spec else None,
             e.spec.block_size if e.spec else None, e.spec.page_size_bytes if e.spec else None)
            for e in before]
    want = [(r["name"], r["module"], r.get("backend"), r.get("block_size"), r.get("page_size_bytes"))
            for r in answer["layers"]]
    assert have == want
    plan = md.plan_driven(model, rule, data, selection.backend, cache_dtype=dtype,
                          element_bytes=element_bytes,
                          options=_options(answer.get("requested_block_size")))
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


UNMAPPED = GOLDEN / "unmapped"
"""vLLM's answers for model-driven architectures whose layer rule is not written yet
(DeepSeek-V4.1: ``schemas/models/unmapped.yaml`` says what the rule needs), recorded with
the same reference so that the rule can be checked against them once it is data."""


def test_the_unmapped_answers_are_vllms_and_have_no_rule() -> None:
    from selector.models.families import family_for, unmapped_reason

    paths = sorted(UNMAPPED.glob("vllm-*.jsonl.gz"))
    assert paths
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
KERNEL_SIZES_SHARED = {("0.32.0", "DOTS3_NOTE_PADDED_MLA_SPARSE"): [{"multiple_of": 64}]}
"""Kernel block sizes a release's classes state that its model-driven.yaml, shared with an
older release, does not: 0.32.0 reads 0.31.0's file, whose padded sparse backend states
FlashAttnMLASparseBackend's [64] of 0.28.0-0.31.0; 0.32.0's states [MultipleOf(64)] (as
0.33.0's file does). Every block the model reaches is a multiple of 64, so the plans agree
(the layers' test above)."""


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
