"""`check` refuses a decode-context-parallel / tensor-parallel split exactly when vLLM does,
in vLLM's words, in every profiled release.

The expected answers are vLLM's own (``tests/golden/oracle/vllm-<version>/dcp.json.gz``,
written by ``tools/dcp_oracle.py`` with each release's oracle interpreter): what
``ParallelConfig`` and ``ModelConfig.verify_with_parallel_config`` raised for each split,
with and without prefill context parallelism (null: accepted). A ValueError is shown as its message, an assertion as
``AssertionError: <message>`` (the convention of SU006). Every recorded split goes through
``check`` as a model deployment (a ``config.json`` with those heads) and, where the heads
divide by the TP size (a layer deployment's input rule), as a single-layer deployment.
A release without recorded answers fails: goldens are never written by the tests.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from selector.catalog import load_catalog
from selector.check.records import CheckRecord
from selector.checkrun import CheckOptions
from selector.inputs.config import parse_deployment
from selector.memory import startup_profile
from selector.pipeline.check import check_deployment

ROOT = Path(__file__).parent / "oracle"
MLA = "{kv_lora_rank: 512, qk_rope_head_dim: 64, qk_nope_head_dim: 128, v_head_dim: 128}"


def _golden_files() -> list[Path]:
    return sorted(ROOT.glob("vllm-*/dcp.json.gz"))


@cache
def _answers(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def _engine(path: Path) -> str:
    return path.parent.name.replace("vllm-", "vllm==", 1)


def _vllm_says(row: dict[str, Any]) -> str | None:
    error = row["error"]
    if error is None:
        return None
    if error["type"] == "AssertionError":
        return f"AssertionError: {error['message']}"
    assert error["type"] == "ValueError", error
    return str(error["message"])


def _kv_says(path: Path, heads: int, kv_heads: int, tp: int) -> dict[str, Any] | bool | None:
    """vLLM's recorded answer on the KV heads by the TP size while the model is built
    (``kv_head_splits``): the error, None (built), or False (not recorded)."""
    for row in _answers(path).get("kv_head_splits", ()):
        if (row["num_heads"], row["num_kv_heads"], row["tp"]) == (heads, kv_heads, tp):
            error: dict[str, Any] | None = row["error"]
            return error
    return False


def _says_kv_words(said: str | None, error: dict[str, Any]) -> bool:
    """A bare assertion of vLLM's model code: its type, and the source line the traceback
    shows."""
    return (said is not None and error["message"] == "" and said.startswith(f"{error['type']} (")
            and error["source"] in said)


def _refusal(record: CheckRecord) -> tuple[str, str, int | None, str | None] | None:
    """The first start-up refusal of the record (code, message, line, field)."""
    kv_check = startup_profile(load_catalog(), record.engine).checks.tensor_parallel_kv_heads
    for finding in record.findings:
        if finding.level == "error" and (finding.code.startswith("SU") or finding.code in (
                kv_check.code, kv_check.replicate_code)):
            return finding.code, finding.message, finding.line, finding.field
    return None


def test_every_profiled_release_has_dcp_answers() -> None:
    have = {_engine(p) for p in _golden_files()}
    missing = [name for name in load_catalog().engine_names if name not in have]
    assert not missing, f"no DCP answers for {missing} (tools/dcp_oracle.py)"


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.parent.name)
def test_every_recorded_split_through_check_gives_vllms_answer(path: Path,
                                                               tmp_path: Path) -> None:
    answers = _answers(path)
    engine = _engine(path)
    assert answers["vllm_version"] == engine.split("==", 1)[1]
    rows = answers["splits"]
    assert len(rows) >= 800 and any(r["error"] for r in rows) and any(
        not r["error"] for r in rows)
    catalog = load_catalog()
    options = CheckOptions(engine=engine)
    checked = 0
    for row in rows:
        expected = _vllm_says(row)
        split = (f"parallel:\n  tensor_parallel_size: {row['tp']}\n"
                 f"  prefill_context_parallel_size: {row['pcp']}\n"
                 f"  decode_context_parallel_size: {row['dcp']}\n")
        documents = []
        tp, kv_heads = row["tp"], row["num_kv_heads"]
        kv_split = (kv_heads % tp == 0) if tp <= kv_heads else (tp % kv_heads == 0)
        # a split vLLM's config accepts but whose KV heads do not split evenly fails when
        # vLLM builds the model: kv_head_splits has its answer (a release without them:
        # the split is not checked here)
        built = _kv_says(path, row["num_heads"], kv_heads, tp) if (
            expected is None and not kv_split and not row["use_mla"]) else None
        if built is False:
            continue
        if not row["use_mla"]:
            config = tmp_path / f"h{row['num_heads']}-kv{row['num_kv_heads']}.json"
            if not config.exists():
                config.write_text(json.dumps({
                    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
                    "hidden_size": 128 * row["num_heads"], "head_dim": 128,
                    "intermediate_size": 1024, "num_hidden_layers": 2,
                    "num_attention_heads": row["num_heads"],
                    "num_key_value_heads": row["num_kv_heads"],
                    # 49152 = 2^14 * 3: divisible by every TP size of the grid
                    "vocab_size": 49152, "max_position_embeddings": 4096,
                    "torch_dtype": "bfloat16"}))
            documents.append(f"device: H200\nmodel: {config.name}\n{split}")
        if row["num_heads"] % row["tp"] == 0:
            layer = (f"{{num_heads: {row['num_heads']}, mla: {MLA}}}" if row["use_mla"] else
                     f"{{head_size: 128, num_heads: {row['num_heads']}, "
                     f"num_kv_heads: {row['num_kv_heads']}}}")
            documents.append(f"device: H200\ndtype: bfloat16\nlayer: {layer}\n{split}")
        for text in documents:
            loaded = parse_deployment(str(tmp_path / "split.yaml"), text)
            record = check_deployment(loaded, catalog, options)
            found = _refusal(record)
            said = None if found is None else found[1]
            if isinstance(built, dict):
                assert _says_kv_words(said, built), (engine, row, text, said)
            else:
                assert said == expected, (engine, row, text)
            if found is not None:  # a start-up refusal: exit 1, located at its field
                assert record.failed and record.status == "invalid"
                field = found[3]
                assert field is not None
                assert found[2] == loaded.line_of(tuple(field.split("."))), found
            checked += 1
    assert checked >= 1200


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.parent.name)
def test_every_recorded_kv_head_split_gives_vllms_answer(path: Path, tmp_path: Path) -> None:
    """The KV heads by the TP size (no DCP): ``check`` refuses exactly the splits vLLM's
    model code refuses, with its assertion, at ``parallel.tensor_parallel_size``."""
    rows = _answers(path).get("kv_head_splits")
    if rows is None:
        assert path.parent.name not in RECORDED_KV, f"{path}: kv_head_splits missing"
        pytest.skip("no kv_head_splits recorded for this release (tools/dcp_oracle.py)")
    assert any(r["error"] for r in rows) and any(not r["error"] for r in rows)
    catalog = load_catalog()
    options = CheckOptions(engine=_engine(path))
    for row in rows:
        heads, kv_heads, tp = row["num_heads"], row["num_kv_heads"], row["tp"]
        config = tmp_path / f"h{heads}-kv{kv_heads}.json"
        config.write_text(json.dumps({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": 128 * heads, "head_dim": 128, "intermediate_size": 1024,
            "num_hidden_layers": 2, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "vocab_size": 49152,
            "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}))
        split = f"parallel:\n  tensor_parallel_size: {tp}\n"
        for text in (f"device: H200\nmodel: {config.name}\n{split}",
                     f"device: H200\ndtype: bfloat16\nlayer: {{head_size: 128, num_heads: {heads}, "
                     f"num_kv_heads: {kv_heads}}}\n{split}"):
            loaded = parse_deployment(str(tmp_path / "split.yaml"), text)
            record = check_deployment(loaded, catalog, options)
            found = _refusal(record)
            if row["error"] is None:
                assert found is None, (row, text, found)
                continue
            assert found is not None and _says_kv_words(found[1], row["error"]), (row, found)
            assert record.failed and record.status == "invalid"
            assert found[3] == "parallel.tensor_parallel_size"
            assert found[2] == loaded.line_of(("parallel", "tensor_parallel_size"))


RECORDED_KV = ("vllm-0.25.1", "vllm-0.28.0", "vllm-0.30.0", "vllm-0.32.0", "vllm-0.33.0")
"""The releases whose kv_head_splits are recorded (an oracle interpreter was at hand)."""
