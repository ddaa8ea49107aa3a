"""The speculative draft at start-up as vLLM answers it.

The expected answers are vLLM's own (``tests/golden/oracle/vllm-<version>/draft.jsonl.gz``,
written by ``tools/draft_oracle.py`` with the release's oracle interpreter): for each
target config and ``--speculative-config`` of the grid, the model runner, the draft's
layers and the backend vLLM built them with, every layer's KV spec grouped by vLLM's
``get_kv_cache_groups`` after the engine's block-size alignment, the draft's parameters
as its class builds them, or vLLM's refusal. ``check``'s pipeline (each release's
``speculative.yaml`` and ``model-runner.yaml``, 0.25.1's patched forward) must answer the
same, for every recorded release.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from selector.catalog import load_catalog
from selector.inputs.config import parse_deployment
from selector.pipeline import solve_deployment
from selector.pipeline.deployment import Solved

ROOT = Path(__file__).parent / "oracle"
REPO = Path(__file__).resolve().parents[2]


def _golden_files() -> list[Path]:
    return sorted(ROOT.glob("vllm-*/draft.jsonl.gz"))


@cache
def _answers(path: Path) -> tuple[dict[str, Any], ...]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def _rows() -> list[tuple[str, dict[str, Any]]]:
    return [(path.parent.name, row) for path in _golden_files() for row in _answers(path)]


def _config_copy(path: Path, folder: Path, name: str) -> Path:
    """The config as the oracle built it (``quantization_config`` removed)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw.pop("quantization_config", None)
    out = folder / name / "config.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(raw), encoding="utf-8")
    return out


def _solve(row: dict[str, Any], version: str, tmp_path: Path) -> Solved:
    speculative = dict(row["speculative_config"])
    spec: dict[str, Any] = {key: speculative[key] for key in
                            ("method", "num_speculative_tokens", "attention_backend",
                             "parallel_drafting", "kv_cache_dtype", "draft_tensor_parallel_size",
                             "quantization") if key in speculative}
    spec["adaptive_verification"] = bool(speculative.get("enable_adaptive_verification"))
    if "draft" in row:
        spec["model"] = str(_config_copy(REPO / row["draft"], tmp_path, "draft"))
    deployment = {
        "engine": version.replace("vllm-", "vllm=="),
        "device": "H200",
        "model": str(_config_copy(REPO / row["target"], tmp_path, "target")),
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "speculative": spec,
    }
    if "attention_backend" in row:
        deployment["attention_backend"] = row["attention_backend"]
    path = tmp_path / "deploy.yaml"
    text = yaml.safe_dump(deployment)
    path.write_text(text, encoding="utf-8")
    return solve_deployment(parse_deployment(str(path), text), load_catalog(),
                            environ=row.get("env", {}))


_WIRED = {"DEEPSEEK_V32_INDEXER"}
"""Cache modules vLLM wires beside a layer's attention (a sparse MLA layer's indexer)."""


def _layer_of(name: str) -> str:
    """A cache module's layer (``model.layers.78.self_attn.indexer.k_cache`` and
    ``model.layers.78.self_attn.attn`` are one layer)."""
    return name.split(".self_attn", 1)[0]


def _ids(item: tuple[str, dict[str, Any]]) -> str:
    return f"{item[0]}-{item[1]['id']}"


def test_the_newest_release_is_recorded() -> None:
    assert "vllm-0.33.0" in {path.parent.name for path in _golden_files()}


# The releases' own planning steps a draft of another backend meets are the profile's
# ``kv_spec``: before 0.31.0 the first layer's backend alone prefers the block size (a
# FLASHMLA draft beside FLASH_ATTN_MLA target layers: block 16), before 0.32.0 no
# exact-size ``block_stride_alignment`` (a FlashInfer draft's spec equals a FLASH_ATTN
# target's: one group).


_ALL_OK = [item for item in _rows() if item[1]["status"] == "ok"]
_REFUSED = [item for item in _rows() if item[1]["status"] == "refused"]


def test_every_profiled_release_is_recorded() -> None:
    releases = {path.name for path in (REPO / "schemas" / "engines").iterdir()
                if (path / "profile.yaml").is_file()}
    assert releases <= {path.parent.name for path in _golden_files()}


@pytest.mark.parametrize("item", _ALL_OK, ids=[_ids(i) for i in _ALL_OK])
def test_draft_layers_backend_and_groups_are_vllms(item: tuple[str, dict[str, Any]],
                                                  tmp_path: Path) -> None:
    version, row = item
    solved = _solve(row, version, tmp_path)
    result = solved.model
    assert result is not None and result.draft is not None, solved
    # every layer selected, the KV cache planned (a target too large for one GPU is the
    # memory check's refusal, not the draft's)
    assert all(s.result.valid for s in result.selections)
    assert not result.draft.issues
    assert result.draft.runner == row["runner"]
    draft = [s for s in result.selections if s.draft]
    # a sparse MLA layer's indexer keeps a K cache module of its own beside the layer's
    # attention (DEEPSEEK_V32_INDEXER, which vLLM wires: no selection)
    attention = [r for r in row["draft_layers"] if r["backend"] not in _WIRED]
    assert sum(len(s.layers) for s in draft) == len({_layer_of(r["name"]) for r in attention})
    assert {s.result.selected for s in draft} == {r["backend"] for r in attention}
    for layer in attention:
        assert {s.facts.head_size for s in draft} == {layer["head_size"]}
    plan = result.plan
    assert plan is not None
    aligned = row["aligned"]
    assert plan.block_size is not None
    assert plan.block_size.block_size == aligned["block_size"]
    assert len(plan.groups) == len(aligned["groups"])
    # each group's page as vLLM's group spec states it: one layer's page, or the sum of
    # its layers' pages for a group of specs that differ only in their backend's layout
    # (UniformTypeKVCacheSpecs)
    mine = sorted((g.uniform_type, g.bytes_per_block if g.uniform_type else g.page_size_bytes[0])
                  for g in plan.groups)
    theirs = sorted((g["spec"] == "UniformTypeKVCacheSpecs", g["page_size_bytes"])
                    for g in aligned["groups"])
    assert mine == theirs
    # the draft's layers are in a group of as many layers as vLLM's (a sparse layer's
    # indexer cache beside its attention is the same layer)
    if row["groups"] is None:  # the harness groups the specs before the engine's
        return  # alignment, which a hybrid model's specs of 0.25.1-0.28.0 need first
    expected = [len(set(g["layers"])) + len({_layer_of(n) for n in g["draft_layers"]})
                for g in row["groups"] if g["draft_layers"]]
    draft_indices = {i for s in draft for i in s.layers}
    assert expected == [len(g.layer_indices) for g in plan.groups
                        if draft_indices & set(g.layer_indices)]


def _expected_draft_params(row: dict[str, Any]) -> int:
    """The draft's parameters vLLM keeps: all its class builds, less the input
    embedding the V2 runner shares with the target (maybe_share_target_embed: a draft
    checkpoint without its own), and a top-level lm_head of the target's vocabulary
    (shared the same way); a draft model shares nothing (draft_model.py)."""
    params = dict(row["draft_parameters"])
    if row["method"] == "draft_model":
        return sum(params.values())
    params.pop("model.embed_tokens", None)
    draft_raw = json.loads((REPO / row["draft"]).read_text()) if "draft" in row else {}
    if "draft_vocab_size" not in draft_raw:
        params.pop("lm_head", None)
    return sum(params.values())


@pytest.mark.parametrize("item", [i for i in _ALL_OK if i[1].get("draft_parameters")],
                         ids=[_ids(i) for i in _ALL_OK if i[1].get("draft_parameters")])
def test_draft_weights_are_vllms(item: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    version, row = item
    result = _solve(row, version, tmp_path).model
    assert result is not None and result.draft is not None
    expected = _expected_draft_params(row)
    # the estimate leaves out the layers' norms (a few hidden widths per layer)
    assert result.draft.weight_params == pytest.approx(expected, rel=2e-3), row["id"]
    memory = result.memory
    assert memory is not None
    parts = {p.name: p for p in memory.budget.weights.parts}
    assert parts["draft model"].params == result.draft.weight_params


@pytest.mark.parametrize("item", _REFUSED, ids=[_ids(i) for i in _REFUSED])
def test_refusals_are_vllms(item: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    version, row = item
    solved = _solve(row, version, tmp_path)
    result = solved.model
    assert result is not None and not result.valid
    error = row["error"]
    messages = [i.message for i in result.startup]
    messages += [s.result.error.message for s in result.selections
                 if s.draft and s.result.error is not None]
    kind, _, text = error.partition(": ")
    if kind == "ValueError":  # the draft's layers: the selection's refusal, word for word
        assert text in messages, (messages, text)
    else:  # pydantic's ValidationError: vLLM's message, then its link to pydantic's docs
        assert any(text.startswith(m) or m in text for m in messages), (messages, text)


def test_the_draft_model_backend_is_not_read_by_model_runner_v2(tmp_path: Path) -> None:
    """vLLM 0.33.0's V2 draft-model speculator ignores attention_backend (the oracle's
    llama-3.1-8b-draft-model-triton case builds FLASH_ATTN layers): check says so."""
    row = next(r for v, r in _ALL_OK if r["id"] == "llama-3.1-8b-draft-model-triton"
               and v == "vllm-0.33.0")
    result = _solve(row, "vllm-0.33.0", tmp_path).model
    assert result is not None and result.draft is not None
    assert "is not read" in result.draft.backend_rule


def test_the_memory_budget_reads_the_drafts_runner(tmp_path: Path) -> None:
    """One rule (model-runner.yaml) for both stages: the budget's runner is the draft's
    in every release (0.25.1's DeepSeek-V3 MTP on V1: an MoE architecture outside the
    default-V2 list; 0.33.0's on V2)."""
    for version, row in _ALL_OK:
        if row["id"] not in ("deepseek-v3-mtp", "llama-3.1-8b-eagle3", "llama-3.1-8b-ngram"):
            continue
        result = _solve(row, version, tmp_path).model
        assert result is not None and result.draft is not None and result.memory is not None
        assert result.memory.budget.model_runner == row["runner"].upper(), (version, row["id"])


_SIZED = [item for item in _rows() if item[1].get("cudagraph_capture_sizes")]


@pytest.mark.parametrize("item", _SIZED, ids=[_ids(i) for i in _SIZED])
def test_cudagraph_capture_sizes_with_spec_tokens_are_vllms(item: tuple[str, dict[str, Any]]
                                                            ) -> None:
    """``_set_cudagraph_sizes`` with a uniform decode query of 1 + num_speculative_tokens
    (each release's ``defaults.yaml``): the oracle's engine ran with vLLM's fallback batch
    tier on CPU: the row's ``max_num_seqs`` / ``max_num_batched_tokens`` (recorded since
    the oracle wrote them; the rows before: 128 requests, every size below the 512
    ceiling, as their sizes show)."""
    version, row = item
    from selector.catalog import load_catalog

    defaults = load_catalog().engine_defaults(version.replace("vllm-", "vllm=="))
    query = 1 + int(row["num_speculative_tokens"])
    sizes = defaults.cudagraph_capture.sizes(row.get("max_num_seqs", 128),
                                             row.get("max_num_batched_tokens", 8192), 90, query)
    assert list(sizes) == row["cudagraph_capture_sizes"]


_OWN_DTYPE = [item for item in _ALL_OK if item[1].get("draft_cache_dtype") not in (None, "auto")]


@pytest.mark.parametrize("item", _OWN_DTYPE, ids=[_ids(i) for i in _OWN_DTYPE])
def test_a_drafts_own_kv_cache_dtype_gives_vllms_draft_pages(item: tuple[str, dict[str, Any]],
                                                            tmp_path: Path) -> None:
    """vLLM builds the draft with its own cache config (``--speculative-config``
    ``kv_cache_dtype``; llama-3.1-8b-eagle3-fp8-kv: the draft's spec is fp8, uint8 pages of
    32,768 bytes beside the target's bf16 65,536): each draft layer's page is vLLM's, and
    the report names the draft's own dtype."""
    version, row = item
    result = _solve(row, version, tmp_path).model
    assert result is not None and result.draft is not None and result.plan is not None
    theirs = {layer["index"]: layer["page_size_bytes"] for layer in row["draft_layers"]}
    mine = {entry.layer_index: entry.spec.page_size_bytes for entry in result.plan.entries
            if entry.layer_index in theirs}
    assert mine == theirs
    note = " ".join(text for _, text in result.draft.notes)
    assert f"its own KV-cache dtype {row['draft_cache_dtype']}" in note


_ROUNDED = [item for item in _rows() if item[1].get("spec_decode_capture_sizes")]


@pytest.mark.parametrize("item", _ROUNDED, ids=[_ids(i) for i in _ROUNDED])
def test_the_v1_runners_spec_decode_capture_sizes_are_vllms(item: tuple[str, dict[str, Any]]
                                                            ) -> None:
    """``adjust_cudagraph_sizes_for_spec_decode`` (vLLM's method, recorded on the case's
    capture sizes): the V1 runner's rounding to multiples of 1 + num_speculative_tokens
    with FULL decode graphs (model-runner.yaml ``v1_spec_decode_rounding``)."""
    from selector.catalog import load_catalog
    from selector.memory.runner import runner_data, spec_decode_capture_sizes

    version, row = item
    data = runner_data(load_catalog(), version.replace("vllm-", "vllm=="))
    assert data is not None
    sizes = spec_decode_capture_sizes(
        data, tuple(row["cudagraph_capture_sizes"]), runner="v1",
        cudagraph_mode="FULL_AND_PIECEWISE",
        decode_query_len=1 + int(row["num_speculative_tokens"]))
    assert list(sizes) == row["spec_decode_capture_sizes"]
