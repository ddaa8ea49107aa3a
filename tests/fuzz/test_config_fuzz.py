"""Malformed deployment files must end with exit code 2 and a message that names the
file (and the field where there is one) -- never a traceback, never another code."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selector.cli import main

VALID = {"device": "H100", "dtype": "bfloat16", "layer": {"head_size": 128, "num_heads": 32, "num_kv_heads": 8}}
KEYS = ["device", "dtype", "kv_cache_dtype", "block_size", "attention_backend", "cudagraph_mode",
        "layer", "parallel", "speculative", "engine", "environment", "attention_config", "batch_invariant"]
LAYER_KEYS = ["head_size", "num_heads", "num_kv_heads", "sliding_window", "has_sink", "mla",
              "attn_type", "logits_soft_cap", "head_size_v"]


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.argv
    sys.argv = ["attn-select", *argv]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    return code, out.getvalue(), err.getvalue()


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(["H100", "auto", "fp8", "bfloat16", "FLASH_ATTN",
                                                            "9.0", "-1", "1e9", "nan"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8) | st.sampled_from(LAYER_KEYS), inner, max_size=3),
                      max_leaves=8)


@st.composite
def broken_documents(draw: st.DrawFn) -> dict[str, object]:
    doc = json.loads(json.dumps(VALID))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "layer", "unknown"]))
        if where == "top":
            doc[draw(st.sampled_from(KEYS))] = draw(values)
        elif where == "layer":
            layer = doc.setdefault("layer", {})
            if isinstance(layer, dict):
                layer[draw(st.sampled_from(LAYER_KEYS))] = draw(values)
        else:
            doc[draw(st.text(min_size=1, max_size=10))] = draw(values)
    return doc


def _check_outcome(path: Path, code: int, out: str, err: str) -> None:
    assert "Traceback" not in err + out
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        assert str(path) in err, err
        assert err.startswith("attn-select: error:"), err


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_documents(), st.sampled_from([".yaml", ".json", ".toml"]))
def test_wrong_types_unknown_keys_and_names(doc: dict[str, object], suffix: str) -> None:
    if suffix == ".json":
        text = json.dumps(doc, default=str)
    elif suffix == ".yaml":
        text = yaml.safe_dump(doc)
    else:
        text = "".join(f"{k} = {json.dumps(v)}\n" for k, v in doc.items() if not isinstance(v, (dict, list)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"deploy{suffix}"
        path.write_text(text)
        code, out, err = run_cli(["check", str(path)])
        _check_outcome(path, code, out, err)


@settings(max_examples=800, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode), st.sampled_from([".yaml", ".json", ".toml", ".yml"]))
def test_garbage_bytes_and_broken_syntax(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"deploy{suffix}"
        path.write_bytes(data)
        code, out, err = run_cli(["check", str(path)])
        _check_outcome(path, code, out, err)
        if code != 2:  # garbage that happens to be a valid deployment is impossible
            raise AssertionError(f"garbage accepted: {data!r}")


def test_examples_of_located_messages(tmp_path: Path) -> None:
    cases = {
        "empty.yaml": ("", "the file is empty"),
        "typo.yaml": ("device: H100\nlayr: {head_size: 128}\n", "field 'layr': unknown key (did you mean 'layer'?)"),
        "device.yaml": ("device: H1000\nlayer: {head_size: 128}\n", "unknown device 'H1000'"),
        "kv.yaml": ("device: H100\nkv_cache_dtype: fp9\nlayer: {head_size: 128}\n", "field 'kv_cache_dtype'"),
        "backend.yaml": ("device: H100\nattention_backend: FLASH_ATN\nlayer: {head_size: 128}\n",
                         "did you mean 'FLASH_ATTN'"),
        "range.yaml": ("device: H100\nblock_size: -16\nlayer: {head_size: 128}\n", "field 'block_size'"),
        "broken.yaml": ("device: [H100\n", "not valid YAML"),
        "broken.json": ('{"device": "H100",}', "not valid JSON"),
        "broken.toml": ("device = \n", "not valid TOML"),
        "heads.yaml": ("device: H100\nlayer: {head_size: 128, num_heads: 32, num_kv_heads: 6}\n",
                       "not a multiple of num_kv_heads"),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        code, _, err = run_cli(["check", str(path)])
        assert code == 2, (name, err)
        assert str(path) in err and expected in err, (name, err)
    code, _, err = run_cli(["check", str(tmp_path / "missing.yaml")])
    assert code == 2 and "no such file" in err
    typo = tmp_path / "typo.yaml"
    assert ":2:" in run_cli(["check", str(typo)])[2], "the line of the unknown key is named"
