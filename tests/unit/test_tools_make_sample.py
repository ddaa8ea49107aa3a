"""tools/make_sample.py: deterministic, well-formed oracle configs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))

import make_sample  # noqa: E402

ORACLE_FIELDS = {
    "device_capability", "head_size", "dtype", "kv_cache_dtype", "block_size", "use_mla",
    "has_sink", "use_sparse", "use_mm_prefix", "attn_type", "num_heads", "num_kv_heads",
    "use_per_head_quant_scales", "has_sliding_window", "use_non_causal", "model",
    "attention_backend",
}
ALWAYS = {
    "device_capability", "head_size", "dtype", "kv_cache_dtype", "block_size", "use_mla",
    "has_sink", "use_sparse", "use_mm_prefix", "use_per_head_quant_scales",
    "has_sliding_window", "use_non_causal", "attn_type",
}
FLAGS = ["use_mla", "has_sink", "use_sparse", "use_mm_prefix", "use_per_head_quant_scales",
         "has_sliding_window", "use_non_causal"]


@pytest.mark.parametrize("family", ["standard", "mla", "all"])
def test_same_seed_same_output(family: str) -> None:
    assert make_sample.generate(family, 300, 7) == make_sample.generate(family, 300, 7)


def test_different_seed_different_output() -> None:
    assert make_sample.generate("all", 50, 1) != make_sample.generate("all", 50, 2)


def test_prefix_stable() -> None:
    """The first k configs do not depend on n."""
    assert make_sample.generate("standard", 500, 3)[:100] == make_sample.generate(
        "standard", 100, 3)


def test_cli_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "a.jsonl"
    assert make_sample.main(["--family", "mla", "--n", "40", "--seed", "5", "-o", str(out)]) == 0
    assert make_sample.main(["--family", "mla", "--n", "40", "--seed", "5"]) == 0
    stdout = capsys.readouterr().out
    assert out.read_text() == stdout
    lines = stdout.splitlines()
    assert len(lines) == 40
    assert [json.loads(line) for line in lines] == make_sample.generate("mla", 40, 5)
    assert make_sample.main(["--family", "mla", "--n", "40", "--seed", "5", "--json-list"]) == 0
    assert json.loads(capsys.readouterr().out) == make_sample.generate("mla", 40, 5)


@pytest.mark.parametrize("version", make_sample.VERSIONS)
def test_configs_are_well_formed(version: str) -> None:
    configs = make_sample.generate("all", 3000, 11, version)
    kvs = set(make_sample.KV_CACHE_DTYPES[version])
    backends = set(make_sample.STANDARD_BACKENDS[version] + make_sample.MLA_BACKENDS[version]
                   + make_sample.EXPLICIT_ONLY_BACKENDS[version])
    for c in configs:
        assert ALWAYS <= set(c) <= ORACLE_FIELDS
        assert c["device_capability"] in make_sample.CAPABILITIES
        assert c["dtype"] in make_sample.DTYPES
        assert c["kv_cache_dtype"] in kvs
        assert c["attn_type"] in make_sample.ATTN_TYPES
        assert 32 <= c["head_size"] <= 1024 + 128  # kv_lora_rank + qk_rope_head_dim at most
        bs = c["block_size"]
        assert bs is None or (isinstance(bs, int) and 1 <= bs <= 1024)
        assert all(isinstance(c[f], bool) for f in FLAGS)
        if "attention_backend" in c:
            assert c["attention_backend"] in backends
        if "model" in c or "num_kv_heads" in c:
            model = c.get("model", {})
            nah = model.get("num_attention_heads", c.get("num_heads"))
            nkv = model.get("num_kv_heads", c.get("num_kv_heads", nah))
            assert nah is not None and nkv is not None and nah % nkv == 0
    # the sample reaches every value of every categorical field
    assert {c["device_capability"] for c in configs} == set(make_sample.CAPABILITIES)
    assert {c["kv_cache_dtype"] for c in configs} == kvs
    assert {c["attn_type"] for c in configs} == set(make_sample.ATTN_TYPES)
    assert {c["dtype"] for c in configs} == set(make_sample.DTYPES)
    assert {c.get("attention_backend") for c in configs} - {None} == backends
    for f in FLAGS:
        assert {c[f] for c in configs} == {False, True}
    assert None in {c["block_size"] for c in configs}
    assert any("model" in c for c in configs) and any("num_kv_heads" in c for c in configs)


def test_families() -> None:
    std = make_sample.generate("standard", 2000, 1)
    mla = make_sample.generate("mla", 1000, 2)
    assert sum(c["use_mla"] for c in std) < 0.1 * len(std)
    assert all(c["use_mla"] for c in mla)
    assert {576, 512, 320} <= {c["head_size"] for c in mla}
    assert any(c["use_sparse"] for c in mla)
    hf = [c["model"]["hf_text_config"] for c in mla if "model" in c]
    assert make_sample.DEEPSEEK_V3 in hf and make_sample.DEEPSEEK_V32 in hf
    assert any(h not in (make_sample.DEEPSEEK_V3, make_sample.DEEPSEEK_V32) for h in hf)


def test_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="family"):
        make_sample.generate("bogus", 1, 0)
    with pytest.raises(ValueError, match="version"):
        make_sample.generate("all", 1, 0, "0.1.0")
