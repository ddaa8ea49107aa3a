"""The shared KV-cache dtype an MLA layer writes back, against vLLM's own builds.

vLLM's ``MLAAttention.__init__`` canonicalises the cache dtype for the backend it selected
(or was handed) and writes a changed one back into the model's one cache config
(mla_attention.py:523-528 in 0.33.0): after the first ``FLASHMLA_SPARSE`` layer with a
quantized dtype, or the first ``FLASHINFER_MLA_SPARSE_SM120`` layer with ``auto`` / ``fp8``,
every later layer asks for ``fp8_ds_mla``, and a dense MLA layer then finds no backend. The
tool follows the profile's ``kv_cache_dtype_rewrite`` (selector/pipeline/model.py).

vLLM's answers: ``tests/golden/vllm_models/hyv4/vllm-<release>-fp8.jsonl.gz``
(``tools/model_driven_reference.py --capability 9.0 --capability 10.0 --capability 12.0
--backends --kv-cache-dtype auto --kv-cache-dtype fp8``, the four HY-V4 configs of
``tools/synthetic_model_configs.py``) for 0.32.0 and 0.33.0. Before 0.32.0 HY-V4's layers
do not read the layer type the oracle venvs' transformers (5.24) folds the sparse types into
(``indexed_attention``, absent from ``_SPARSE_LAYER_TYPES`` of
vllm/models/hy_v4/nvidia/attention.py:50 in 0.29.0-0.31.0): vLLM builds those configs dense
there, so they say nothing of the rewrite.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.golden.test_hyv4_sparse_mla import _key, _tool_modules, _vllm_modules
from tools.model_agreement import reference_deployment, tool_groups

REPO = Path(__file__).resolve().parents[2]
ANSWERS = sorted((REPO / "tests" / "golden" / "vllm_models" / "hyv4").glob("vllm-*-fp8.jsonl.gz"))


def _answers() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in ANSWERS:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            out.extend(a for a in map(json.loads, handle) if a["config"] != "<backend classes>")
    return out


def _id(answer: dict[str, Any]) -> str:
    return f"{answer['vllm_version']}-" + "-".join(map(str, _key(answer)))


def test_the_answers_are_each_release_grid() -> None:
    assert [p.name for p in ANSWERS] == ["vllm-0.32.0-fp8.jsonl.gz", "vllm-0.33.0-fp8.jsonl.gz"]
    by_release: dict[str, set[tuple[str, str, str | None, str | None]]] = {}
    for answer in _answers():
        by_release.setdefault(answer["vllm_version"], set()).add(_key(answer))
    grid = {(config, cap, None, dtype)
            for config in ("HYV4ForCausalLM", "HYV4ForCausalLM-sparse", "HYV4ForCausalLM-shared",
                           "HYV4ForCausalLM-dense-first")
            for cap in ("9.0", "10.0", "12.0") for dtype in (None, "fp8")}
    assert by_release == {"0.32.0": grid, "0.33.0": grid}


@pytest.mark.parametrize("answer", _answers(), ids=_id)
def test_each_layer_has_vllms_backend_or_vllms_refusal(answer: dict[str, Any]) -> None:
    """The backend per cache module, or no build where vLLM refuses (a dense layer after
    the rewrite: "No valid attention backend found ... kv_cache_dtype=fp8_ds_mla")."""
    want = _vllm_modules(answer) if answer["status"] == "ok" else None
    assert _tool_modules(answer) == want, answer.get("error")


def _tool_bytes_per_token(answer: dict[str, Any]) -> list[tuple[int, str, int]]:
    """The tool's (layer, role, page bytes per token) per cache module of its plan for the
    reference's deployment (each layer's spec as its selected backend stores it)."""
    from selector.catalog import load_catalog
    from selector.inputs.config import parse_deployment
    from selector.pipeline.deployment import solve_deployment

    loaded = parse_deployment("<reference deployment>", reference_deployment(answer, 8192))
    solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                              refuse_split=False)
    assert solved.model is not None and solved.model.plan is not None
    return sorted((e.layer_index, e.role, e.spec.page_size_bytes // e.spec.block_size)
                  for e in solved.model.plan.entries)


def _vllm_bytes_per_token(answer: dict[str, Any]) -> list[tuple[int, str, int]]:
    return sorted((r["index"], "indexer" if r["module"] == "DeepseekV32IndexerCache"
                   else "attention", r["page_size_bytes"] // r["block_size"])
                  for r in answer["layers"])


@pytest.mark.parametrize("answer", [a for a in _answers() if a["status"] == "ok"], ids=_id)
def test_each_build_stores_and_groups_as_vllm(answer: dict[str, Any]) -> None:
    """Every cache's bytes per token (the dense layers' fp8 before the rewrite, the sparse
    layers' 656-byte fp8_ds_mla entries after it) and the KV-cache groups after the
    block-size alignment (block size, page, layers)."""
    assert _tool_bytes_per_token(answer) == _vllm_bytes_per_token(answer)
    want = sorted((g["block_size"], g["page_size_bytes"], tuple(sorted(set(g["layers"]))))
                  for g in answer["aligned"]["groups"])
    assert sorted(tool_groups(answer)) == want


@pytest.mark.parametrize("answer", [a for a in _answers() if a["status"] != "ok"], ids=_id)
def test_each_refusal_is_vllms_in_its_words(answer: dict[str, Any]) -> None:
    """The dense layer after the rewrite: the tool's refusal of that layer is vLLM's
    ValueError, word for word (the selector config with kv_cache_dtype=fp8_ds_mla and each
    backend's reasons)."""
    from selector.catalog import load_catalog
    from selector.inputs.config import parse_deployment
    from selector.pipeline.deployment import solve_deployment

    loaded = parse_deployment("<reference deployment>", reference_deployment(answer, 8192))
    solved = solve_deployment(loaded, load_catalog(), suggest=False, startup=False,
                              refuse_split=False)
    assert solved.model is not None
    refused = [s for s in solved.model.selections if s.result.error is not None]
    assert [s.facts.kv_cache_dtype for s in refused] == ["fp8_ds_mla"]
    error = refused[0].result.error
    assert error is not None
    assert f"ValueError: {error.message}" == answer["error"]


def test_the_grid_shows_the_rewrite() -> None:
    """vLLM refuses the dense layer after a sparse one exactly where a layer rewrites the
    dtype: fp8 on SM90 / SM100 (the sink binds FLASHMLA_SPARSE), and on SM120 with auto too
    (FLASHINFER_MLA_SPARSE_SM120); the same model with its dense layers first builds, the
    sparse layers stored as fp8_ds_mla."""
    refused = {(a["vllm_version"], *_key(a)) for a in _answers() if a["status"] != "ok"}
    assert refused == {(release, "HYV4ForCausalLM-sparse", cap, None, dtype)
                       for release in ("0.32.0", "0.33.0")
                       for cap, dtype in (("9.0", "fp8"), ("10.0", "fp8"), ("12.0", None),
                                          ("12.0", "fp8"))}
    for answer in _answers():
        if answer["status"] != "ok":
            assert "kv_cache_dtype=fp8_ds_mla" in answer["error"]
            assert "use_sparse=False" in answer["error"]
    dense_first = [a for a in _answers() if _key(a) == ("HYV4ForCausalLM-dense-first", "9.0",
                                                         None, "fp8")]
    for answer in dense_first:
        stored = {(r["index"], r.get("cache_dtype_str")) for r in answer["layers"]
                  if r["module"] != "DeepseekV32IndexerCache"}
        assert stored == {(0, "fp8"), (1, "fp8"), (2, "fp8_ds_mla"), (3, "fp8_ds_mla")}


def test_every_profile_names_backends_that_state_the_dtype_they_write() -> None:
    """Each release's ``kv_cache_dtype_rewrite`` names backends of that release, each with
    the ``canonical_kv_cache_dtype`` fact the dtype written is read from."""
    from selector.catalog import load_catalog

    catalog = load_catalog()
    for name, engine in catalog.engines.items():
        rewrite = engine.profile.kv_cache_dtype_rewrite
        assert rewrite is not None, name
        assert rewrite.backends == ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120"), name
        for backend in rewrite.backends:
            facts = {fact.name for fact in engine.backends[backend].facts}
            assert "canonical_kv_cache_dtype" in facts, (name, backend)


def test_one_layer_is_asked_for_with_the_dtype_written_before_it() -> None:
    """``explain --layer``'s request (``layer_of``): the dense layer 4 of the sparse config
    at fp8 on an H200 asks for fp8_ds_mla, as vLLM's refusal of it says; layer 0, built
    before any sparse layer, for fp8."""
    from selector.catalog import load_catalog
    from selector.inputs.config import parse_deployment
    from selector.pipeline.deployment import layer_of

    answer = next(a for a in _answers() if a["vllm_version"] == "0.33.0" and _key(a) == (
        "HYV4ForCausalLM-sparse", "9.0", None, "fp8"))
    loaded = parse_deployment("<reference deployment>", reference_deployment(answer, 8192))
    catalog = load_catalog()
    assert layer_of(loaded, catalog, 0).facts.kv_cache_dtype == "fp8"
    assert layer_of(loaded, catalog, 4).facts.kv_cache_dtype == "fp8_ds_mla"
    assert "kv_cache_dtype=fp8_ds_mla" in answer["error"]
