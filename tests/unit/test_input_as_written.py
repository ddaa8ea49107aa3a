"""A deployment file is taken exactly as written: a boolean is not a number, a string is
not a number (except the size suffixes the command line takes too), a key given twice is
an error naming both lines, and the messages for the usual mistakes (a typo, a Hugging
Face config.json, a numeric capability, a list of devices) say what to write instead.
Every refusal is exit 2 with the file, the line and the field; never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selector.errors import InputError
from selector.inputs.serve.values import parse_bytes, parse_max_model_len
from tests.fuzz.test_config_fuzz import run_cli

LAYER = "layer:\n  head_size: 128\n  num_heads: 32\n  num_kv_heads: 8\n"


def _check(path: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(["check", *extra, str(path)])


def _refused(path: Path, line: int, field: str, *words: str) -> str:
    code, out, err = _check(path)
    assert code == 2, (code, out[-400:], err)
    assert "Traceback" not in out + err
    assert f"{path}:{line}: field '{field}'" in err, err
    for word in words:
        assert word in err, err
    return err


# -- 1. no coercion --------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "text", "line", "field", "words"), [
    ("len.yaml", "device: H100\nmodel: llama-3.1-8b\nmax_model_len: true\n", 3, "max_model_len",
     ("got the boolean true", "true and false are not 1 and 0")),
    ("head.yaml", "device: H100\nlayer:\n  head_size: true\n", 3, "layer.head_size",
     ("expected a whole number, got the boolean true",)),
    ("head.toml", 'device = "H100"\n[layer]\nhead_size = "128"\n', 3, "layer.head_size",
     ("got the string '128'", "without quotes")),
    ("heads.json", '{"device": "H100",\n "layer": {"head_size": 128, "num_heads": "32"}}\n', 2,
     "layer.num_heads", ("got the string '32'",)),
    ("sink.yaml", "device: H100\nlayer:\n  head_size: 128\n  has_sink: 1\n", 4, "layer.has_sink",
     ("expected true or false, got the number 1",)),
    ("util.yaml", "device: H100\nmodel: llama-3.1-8b\ngpu_memory_utilization: '0.9'\n", 3,
     "gpu_memory_utilization", ("expected a number, got the string '0.9'",)),
    ("tp.yaml", "device: H100\n" + LAYER + "parallel:\n  tensor_parallel_size: 2.0\n", 7,
     "parallel.tensor_parallel_size", ("expected a whole number, got the number 2.0",)),
    ("env.yaml", "device: H100\n" + LAYER + "environment:\n  fa3_built: 'no'\n", 7,
     "environment.fa3_built", ("expected true or false",)),
    ("fa.yaml", "device: H100\n" + LAYER + "attention_config: {flash_attn_version: '3'}\n", 6,
     "attention_config.flash_attn_version", ("expected a number, got the string '3'",)),
    ("block.yaml", "device: H100\nblock_size: '16'\n" + LAYER, 2, "block_size",
     ("got the string '16'",)),
    ("layer.yaml", "device: H100\nlayer: 128\n", 2, "layer",
     ("expected a mapping of keys, got the number 128",)),
])
def test_a_value_of_the_wrong_type_is_refused_not_converted(
        tmp_path: Path, name: str, text: str, line: int, field: str, words: tuple[str, ...]) -> None:
    path = tmp_path / name
    path.write_text(text)
    _refused(path, line, field, *words)


def test_the_documented_forms_still_read(tmp_path: Path) -> None:
    """A capability as a string, a whole number where a fraction belongs, and the size
    suffixes of the command line."""
    for name, text in {
        "cc.yaml": 'device: {capability: "9.0"}\n' + LAYER,
        "util.yaml": "device: H100\ngpu_memory_utilization: 1\n" + LAYER,
        "util.toml": 'device = "H100"\ngpu_memory_utilization = 1\n[layer]\nhead_size = 128\n',
    }.items():
        path = tmp_path / name
        path.write_text(text)
        code, _, err = _check(path)
        assert code == 0, (name, err)


def _json_report(path: Path, *extra: str) -> dict[str, object]:
    code, out, err = run_cli(["check", "--format", "json", *extra, str(path)])
    assert code in (0, 1), err
    report: dict[str, object] = json.loads(out)
    report.pop("source", None)
    return report


def test_size_suffixes_read_as_the_command_line_reads_them(tmp_path: Path) -> None:
    suffixed = tmp_path / "suffixed.yaml"
    suffixed.write_text("device: H100\nmodel: llama-3.1-8b\nmax_model_len: 32k\n"
                        "kv_cache_memory_bytes: 10G\nmax_num_batched_tokens: 8K\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("device: H100\nmodel: llama-3.1-8b\nmax_model_len: 32000\n"
                     f"kv_cache_memory_bytes: {10 * 2**30}\nmax_num_batched_tokens: 8192\n")
    assert _json_report(suffixed) == _json_report(plain)
    code, out, err = run_cli(["check", "--format", "json", "--device", "H100", "--", "vllm",
                              "serve", "llama-3.1-8b", "--max-model-len", "32k",
                              "--kv-cache-memory-bytes", "10G", "--max-num-batched-tokens", "8K"])
    assert code in (0, 1), err
    assert json.loads(out)["memory"] == _json_report(suffixed)["memory"]


def test_auto_fit_reads_as_the_command_line_reads_it(tmp_path: Path) -> None:
    reports = []
    for value in ("auto", "-1", "'-1'"):
        path = tmp_path / "auto.yaml"
        path.write_text(f"device: H100\nmodel: llama-3.1-8b\nmax_model_len: {value}\n")
        reports.append(_json_report(path)["memory"])
    code, out, err = run_cli(["check", "--format", "json", "--device", "H100", "--", "vllm",
                              "serve", "llama-3.1-8b", "--max-model-len", "auto"])
    assert code in (0, 1), err
    assert reports == [json.loads(out)["memory"]] * 3


@pytest.mark.parametrize(("value", "words"), [
    ("lots", "expected a token count, got the string 'lots'"),
    ("'32768'", "expected a token count, got the string '32768' (write a number without quotes"),
    ("1.5K", "Decimals are not allowed with binary suffixes like K"),
])
def test_a_bad_size_names_the_field_and_line(tmp_path: Path, value: str, words: str) -> None:
    path = tmp_path / "len.yaml"
    path.write_text(f"device: H100\nmodel: llama-3.1-8b\nmax_model_len: {value}\n")
    _refused(path, 3, "max_model_len", words)


@given(st.from_regex(r"\s?[0-9]{1,6}(\.[0-9]{1,2})?[kKmMgGtT]?\s?", fullmatch=True)
       | st.text(max_size=8))
def test_one_reader_for_the_file_and_the_command_line(text: str) -> None:
    """``parse_bytes`` (``--kv-cache-memory-bytes``) and ``parse_max_model_len`` are the
    file's readers; they accept and refuse the same texts."""
    from selector.schema.sizes import human_readable_int, human_readable_int_or_auto

    try:
        number: int | None = human_readable_int(text)
    except ValueError:
        number = None
    try:
        flag: int | None = parse_bytes("--kv-cache-memory-bytes", text)
    except InputError:
        flag = None
    if number is not None and 0 <= number <= 1 << 50:
        assert flag == number
    else:
        assert flag is None
    try:
        length: int | None = human_readable_int_or_auto(text)
    except ValueError:
        length = None
    try:
        read: int | None = parse_max_model_len("--max-model-len", text)
    except InputError:
        read = None
    assert read == (None if length is None or (length < 1 and length != -1) else length)


_NUMERIC = [("max_model_len",), ("gpu_memory_utilization",), ("kv_cache_memory_bytes",),
            ("max_num_batched_tokens",), ("max_num_seqs",), ("reserved_memory_gib",),
            ("block_size",), ("layer", "head_size"), ("layer", "head_size_v"),
            ("layer", "num_heads"), ("layer", "num_kv_heads"), ("layer", "sliding_window"),
            ("layer", "logits_soft_cap"), ("parallel", "tensor_parallel_size"),
            ("parallel", "decode_context_parallel_size"), ("speculative", "num_speculative_tokens")]
_BOOLEAN = [("enable_prefix_caching",), ("batch_invariant",), ("layer", "has_sink"),
            ("layer", "alibi"), ("speculative", "adaptive_verification")]


@st.composite
def _wrong_typed(draw: st.DrawFn) -> tuple[tuple[str, ...], object]:
    if draw(st.booleans()):
        field = draw(st.sampled_from(_NUMERIC))
        number = draw(st.integers(1, 4096) | st.floats(0.01, 4096))
        return field, draw(st.sampled_from([True, False, str(number), f" {number}"]))
    field = draw(st.sampled_from(_BOOLEAN))
    return field, draw(st.sampled_from([0, 1, "true", "false", "yes", 1.0]))


def _render(document: dict[str, object], suffix: str) -> str:
    if suffix == ".json":
        return json.dumps(document, indent=1)
    if suffix == ".toml":
        top = "".join(f"{k} = {json.dumps(v)}\n" for k, v in document.items()
                      if not isinstance(v, dict))
        tables = "".join(f"[{k}]\n" + "".join(f"{kk} = {json.dumps(vv)}\n" for kk, vv in v.items())
                         for k, v in document.items() if isinstance(v, dict))
        return top + tables
    import yaml

    return yaml.safe_dump(document, sort_keys=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_wrong_typed(), st.sampled_from([".yaml", ".json", ".toml"]))
def test_any_bool_or_string_for_a_number_is_refused_with_its_location(
        case: tuple[tuple[str, ...], object], suffix: str) -> None:
    field, value = case
    document: dict[str, object] = {"device": "H100",
                                   "layer": {"head_size": 128, "num_heads": 32, "num_kv_heads": 8}}
    node = document
    for part in field[:-1]:
        child = node.setdefault(part, {})
        assert isinstance(child, dict)
        node = child
    node[field[-1]] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"deploy{suffix}"
        path.write_text(_render(document, suffix))
        code, out, err = _check(path)
        assert code == 2, (document, code, err, out[-300:])
        assert "Traceback" not in out + err
        assert f"field '{'.'.join(field)}': expected " in err, err
        assert f"{path}:" in err and err.split(f"{path}:", 1)[1].split(":", 1)[0].isdigit(), err


# -- 2. duplicate keys -----------------------------------------------------------------------

@pytest.mark.parametrize(("name", "text", "field", "lines"), [
    ("twice.yaml", "device: H100\n" + LAYER + "device: B200\n", "device", (1, 6)),
    ("layer.yaml", "device: H100\n" + LAYER + "layer:\n  head_size: 64\n", "layer", (2, 6)),
    ("nested.yaml", "device: H100\n" + LAYER + "  head_size: 64\n", "layer.head_size", (3, 6)),
    ("twice.json", '{"device": "H100",\n "layer": {"head_size": 128},\n "device": "B200"}\n',
     "device", (1, 3)),
    ("tabs.json", '{\n\t"device": "H100",\n\t"layer": {\n\t\t"head_size": 128,\n'
                  '\t\t"head_size": 64}}\n', "layer.head_size", (4, 5)),
])
def test_a_key_given_twice_names_both_lines(tmp_path: Path, name: str, text: str, field: str,
                                            lines: tuple[int, int]) -> None:
    path = tmp_path / name
    path.write_text(text)
    _refused(path, lines[1], field, f"given twice, on lines {lines[0]} and {lines[1]}")


def test_a_key_given_twice_in_a_json_input_file(tmp_path: Path) -> None:
    """The measurements / workload / batch readers refuse it too."""
    path = tmp_path / "bench.json"
    path.write_text('{"schema": "attn-select.bench/1",\n "schema": "x"}\n')
    code, _, err = run_cli(["check", "--measurements", str(path), "--device", "H100", "--",
                            "vllm", "serve", "llama-3.1-8b"])
    assert code == 2 and f"{path}:2: field 'schema'" in err and "lines 1 and 2" in err, err


def test_toml_already_refuses_a_key_given_twice(tmp_path: Path) -> None:
    path = tmp_path / "twice.toml"
    path.write_text('device = "H100"\ndevice = "B200"\n')
    code, _, err = _check(path)
    assert code == 2 and "not valid TOML" in err, err


# -- 8 / 9. the usual mistakes ---------------------------------------------------------------

def test_a_hugging_face_config_says_how_to_check_the_model(tmp_path: Path) -> None:
    folder = tmp_path / "phi"
    folder.mkdir()
    config = folder / "config.json"
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                  "hidden_size": 4096, "num_attention_heads": 32}, indent=1))
    for extra in ((), ("--device", "H100")):
        code, _, err = _check(config, *extra)
        assert code == 2, err
        assert f"{config}:2: this is a Hugging Face model config" in err, err
        assert "model: config.json" in err and f"-- vllm serve {folder}" in err, err
        assert "Field required" not in err


def test_a_typo_leads_with_the_unknown_key(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("devise: H100\n" + LAYER)
    err = _refused(path, 1, "devise", "unknown key (did you mean 'device'?)")
    assert "Field required" not in err and "more problem" not in err


def test_a_numeric_capability_and_a_device_list(tmp_path: Path) -> None:
    path = tmp_path / "cc.yaml"
    path.write_text("device: {capability: 9.0}\n" + LAYER)
    _refused(path, 1, "device.capability", "capability is a string like '9.0'",
             'capability: "9.0"')
    path.write_text("device: [H100, B200]\n" + LAYER)
    _refused(path, 1, "device", "use --device for a fleet")
    path.write_text("device: 9.0\n" + LAYER)
    err = _refused(path, 1, "device", "a device is a catalog name", 'capability: "9.0"')
    assert "more problem" not in err


# -- 11. a verdict without a memory check says so --------------------------------------------

@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "junit", "github", "markdown"])
def test_a_model_whose_memory_is_not_known_says_the_fit_was_not_checked(
        tmp_path: Path, output_format: str) -> None:
    path = tmp_path / "cc.yaml"
    path.write_text('device: {capability: "9.0"}\nmodel: llama-3.1-8b\n')
    code, out, err = run_cli(["check", "--format", output_format, str(path)])
    assert code == 0, err
    assert "AS136" in out and "memory fit was not checked" in out, out[-2000:]
    known = tmp_path / "h100.yaml"
    known.write_text("device: H100\nmodel: llama-3.1-8b\n")
    code, out, err = run_cli(["check", "--format", output_format, str(known)])
    assert "AS136" not in out


def test_a_layout_the_budget_does_not_model_says_the_fit_was_not_checked() -> None:
    code, out, err = run_cli(["check", "--format", "json", "--device", "H100", "--", "vllm",
                              "serve", "gpt-oss-20b", "--enable-expert-parallel",
                              "--data-parallel-size", "2"])
    assert code in (0, 1), err
    report = json.loads(out)
    assert report["memory"] is None
    assert [f["code"] for f in report["findings"]].count("AS136") == 1, err


# -- 16. one rendering per value -------------------------------------------------------------

def _row(out: str, label: str) -> str:
    line = next(line for line in out.splitlines() if label in line)
    return line.split("│")[2].strip()


def test_the_reorder_threshold_reads_the_same_in_the_layer_and_the_model_view(
        tmp_path: Path) -> None:
    layer = tmp_path / "layer.yaml"
    layer.write_text("device: H100\n" + LAYER)
    model = tmp_path / "model.yaml"
    model.write_text("device: H100\nmodel: llama-3.1-8b\n")
    shown = {_row(run_cli(["check", str(path)])[1], "reorder batch threshold")
             for path in (layer, model)}
    assert shown == {"none (no decode-first reorder)"}


def test_each_gib_figure_vllm_names_is_a_row_of_the_memory_table(tmp_path: Path) -> None:
    """vLLM logs the KV memory and checks one request against it less the null block: where
    the two round apart, each has its own row, and the figure vLLM's refusal names is one."""
    path = tmp_path / "gemma.yaml"
    path.write_text("device: H100\nmodel: gemma-3-27b\n")
    code, out, err = run_cli(["check", str(path)])
    assert code == 1, err
    text = " ".join(out.split())
    logged = text.split("Available KV cache memory: ", 1)[1].split(" GiB", 1)[0]
    checked = text.split("larger than the available KV cache memory (", 1)[1].split(" GiB", 1)[0]
    assert _row(out, "= available for the KV cache") == logged
    rows = {_row(out, "= available for the KV cache")}
    if "= checked against" in out:
        rows.add(_row(out, "= checked against one max_model_len request"))
    assert checked in rows
    fixture = Path(__file__).parent.parent / "fixtures" / "models" / "gemma-2-9b@rtx5090.yaml"
    code, out, err = run_cli(["check", str(fixture)])
    available = _row(out, "= available for the KV cache")
    against = _row(out, "= checked against one max_model_len request")
    assert available != against
    code, document, _ = run_cli(["check", "--format", "json", str(fixture)])
    check_bytes = json.loads(document)["memory"]["kv_cache"]["check_bytes"]
    assert against == f"{round(check_bytes / 2**30, 2):.2f}"
