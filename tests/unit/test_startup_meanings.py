"""vLLM's meanings of ``--max-model-len auto`` / -1 (the largest length that fits, with
vLLM's log line; tests/golden/test_memory_oracle.py compares the length and the line with
vLLM's own ``_auto_fit_max_model_len``), ``--cpu-offload-gb`` (decoder-layer weights kept
in CPU memory) and ``--kv-cache-memory-bytes`` (the KV memory, skipping the profile),
from the ``vllm serve`` line and the deployment file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selector.models.presets import preset_dir
from tests.fuzz.test_config_fuzz import run_cli

GIB = 1024**3


@pytest.fixture
def llama(tmp_path: Path) -> Path:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(
        (preset_dir() / "llama-3.1-8b.json").read_text(encoding="utf-8"), encoding="utf-8")
    return folder


def _check(*argv: str, device: str = "L4") -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli(["check", "--device", device, "--format", "json", "--", "vllm",
                              "serve", *argv])
    assert code in (0, 1), (out, err)
    return code, json.loads(out)


def _memory(doc: dict[str, Any]) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "available_kv_bytes" in node and "reservations" in node:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("value", ["auto", "-1", "AUTO"])
def test_auto_fits_the_context_to_the_memory(llama: Path, value: str) -> None:
    """Llama-3.1-8B on an L4: 131072 tokens do not fit, vLLM shortens the length to what
    does and starts (no MM002); the capacity is planned at that length."""
    code, doc = _check(str(llama), "--max-model-len", value)
    memory = _memory(doc)
    kv = memory["kv_cache"]
    assert code == 0 and memory["error"] is None
    assert 0 < kv["max_model_len"] < 131072 and kv["fits"]
    assert (f"Auto-fit max_model_len: reduced from 131072 to {kv['max_model_len']} to fit in "
            "available KV cache memory (") in " ".join(memory["log"])
    # the length chosen is the largest: one more block's worth of tokens does not fit
    assert kv["needed_bytes"] <= memory["available_kv_bytes"]


def test_auto_keeps_the_full_length_when_it_fits(llama: Path) -> None:
    code, doc = _check(str(llama), "--max-model-len", "auto", device="H100")
    memory = _memory(doc)
    assert code == 0 and memory["kv_cache"]["max_model_len"] == 131072
    assert any(line.startswith("Auto-fit max_model_len: full model context length 131072 fits")
               for line in memory["log"])


def test_auto_without_one_token_of_memory_is_vllms_refusal(llama: Path) -> None:
    code, doc = _check(str(llama), "--max-model-len", "auto", "--gpu-memory-utilization", "0.5")
    memory = _memory(doc)
    assert code == 1 and memory["error"]["code"] == "MM006"
    assert memory["error"]["message"].startswith("Cannot auto-fit max_model_len")


def test_a_fixed_length_that_does_not_fit_is_still_mm002(llama: Path) -> None:
    code, doc = _check(str(llama), "--max-model-len", "131072")
    assert code == 1 and _memory(doc)["error"]["code"] == "MM002"


def test_auto_in_a_deployment_file(tmp_path: Path, llama: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(f"model: {llama}\ndevice: L4\nmax_model_len: auto\n", encoding="utf-8")
    code, out, err = run_cli(["check", str(path), "--format", "json"])
    assert code == 0, (out, err)
    memory = _memory(json.loads(out))
    assert memory["kv_cache"]["max_model_len"] < 131072
    path.write_text(f"model: {llama}\ndevice: L4\nmax_model_len: 0\n", encoding="utf-8")
    assert run_cli(["check", str(path)])[0] == 2


def test_cpu_offload_takes_decoder_weights_off_the_gpu(llama: Path) -> None:
    """vLLM's UVA offloader moves decoder-layer parameters to CPU memory until the GiB
    asked for are reached (vllm/model_executor/offloader/uva.py:75-124); the embedding and
    lm_head stay (only make_layers' decoder layers are wrapped, models/utils.py:905-917)."""
    _, plain = _check(str(llama), "--max-model-len", "4096")
    _, offload = _check(str(llama), "--max-model-len", "4096", "--cpu-offload-gb", "4")
    weights = {doc_id: next(r for r in _memory(doc)["reservations"] if r["name"] == "weights")
               for doc_id, doc in (("plain", plain), ("offload", offload))}
    assert weights["plain"]["bytes"] - weights["offload"]["bytes"] == 4 * GIB
    assert "4.00 GiB of it in CPU memory (--cpu-offload-gb)" in weights["offload"]["detail"]
    assert (_memory(offload)["available_kv_bytes"] - _memory(plain)["available_kv_bytes"]
            == 4 * GIB)
    # more than the decoder layers hold: only the decoder layers move
    _, most = _check(str(llama), "--max-model-len", "4096", "--cpu-offload-gb", "1000")
    parts = _memory(most)["weights"]["parts"]
    kept = sum(p["bytes"] for p in parts if p["name"] in ("embedding", "lm_head"))
    assert next(r for r in _memory(most)["reservations"] if r["name"] == "weights")["bytes"] == kept


def test_a_13b_needs_offload_on_a_24_gb_gpu(tmp_path: Path) -> None:
    """vLLM's own example (UVAOffloadConfig.cpu_offload_gb, vllm/config/offload.py:24-32):
    a 13B bfloat16 model (26 GB) on one 24 GB GPU starts with --cpu-offload-gb 10."""
    folder = tmp_path / "llama13b"
    folder.mkdir()
    config = json.loads((preset_dir() / "llama-3.1-8b.json").read_text(encoding="utf-8"))
    config.update({"hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
                   "num_attention_heads": 40, "num_key_value_heads": 40, "vocab_size": 32000,
                   "max_position_embeddings": 4096, "rope_scaling": None})
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    code, doc = _check(str(folder), device="RTX 4090")
    assert code == 1 and _memory(doc)["error"]["code"] == "MM003"
    code, doc = _check(str(folder), "--cpu-offload-gb", "10", device="RTX 4090")
    assert _memory(doc)["error"] is None or _memory(doc)["error"]["code"] != "MM003"


def test_kv_cache_memory_bytes_is_the_kv_memory(llama: Path) -> None:
    """With --kv-cache-memory-bytes vLLM skips the memory profiling and reserves that
    much for the KV cache (vllm/v1/worker/gpu_worker.py:656-681 in 0.33.0)."""
    _, doc = _check(str(llama), "--max-model-len", "4096", "--kv-cache-memory-bytes", "2G")
    memory = _memory(doc)
    assert memory["available_kv_bytes"] == 2 * GIB
    assert memory["inputs"]["kv_cache_memory_bytes"] == 2 * GIB


def test_every_release_auto_fits_in_its_own_words() -> None:
    """0.25.1-0.31.0 log "... fits in available GPU memory"; 0.32.0 and 0.33.0 name the KV
    cache memory and its device (each release's wheel, kv_cache_utils.py / kv_cache_planning.py
    as cited in its startup.yaml)."""
    from packaging.version import Version

    from selector.catalog import load_catalog
    from selector.memory.profile import startup_profile

    catalog = load_catalog()
    for name in catalog.engine_names:
        profile = startup_profile(catalog, name)
        row = profile.auto_fit()
        assert row is not None and row.code == "MM006", name
        newer = Version(profile.engine.split("==")[1]) >= Version("0.32.0")
        wording = "available KV cache memory ({gib} GiB GPU)" if newer else "available GPU memory"
        assert wording in row.full and wording.split(" (", maxsplit=1)[0] in row.reduced, name
