"""The `vllm serve` reader's parts: the flag table inherited along the profile chain
(one file per engine version), the argparse parsing of the words, and flat configs."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from selector.catalog import _load_catalog_files, load_catalog
from selector.errors import InputError
from selector.inputs.flat import facts_from_flat
from selector.inputs.serve import parse_serve_command
from selector.inputs.serve.flags import SERVE_FLAGS_FILE, release_flags, serve_flags
from selector.inputs.serve.tokenize import RawCommand, tokenize
from selector.util.resources import schemas_dir


def _raw(line: str) -> RawCommand:
    return tokenize(shlex.split(line), serve_flags(load_catalog()))


# ---------------------------------------------------------------- the flag table


def test_only_the_base_profile_states_the_whole_table() -> None:
    catalog = load_catalog()
    base = catalog.engine_names[0]
    for name in catalog.engine_names[1:]:
        path = catalog.engine_dirs[name] / SERVE_FLAGS_FILE
        if path.is_file():
            # what a release's own parser says (tools/serve_flags.py), and short spellings
            assert set(yaml.safe_load(path.read_text())) <= {
                "engine_flags", "frontend_flags", "speculative_methods", "config_fields",
                "config_literals", "flag_choices", "aliases"}, path
    assert serve_flags(catalog, base).flags == serve_flags(catalog).flags


def test_a_new_version_that_drops_a_flag_is_one_file(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_SELECT_NO_CACHE", "1")
    root = tmp_path / "schemas"
    shutil.copytree(schemas_dir(), root, ignore=shutil.ignore_patterns("jsonschema"))
    newest = _load_catalog_files(root).default_engine
    family, version = newest.split("==")
    major, minor, _ = (int(p) for p in version.split("."))
    child = f"{family}=={major}.{minor + 1}.0"
    folder = root / "engines" / child.replace("==", "-")
    folder.mkdir()
    (folder / "profile.yaml").write_text(yaml.safe_dump({"engine": child, "extends": newest}))
    (folder / SERVE_FLAGS_FILE).write_text("engine_flags:\n  --block-size: null\n")
    catalog = _load_catalog_files(root)
    assert "--block-size" not in release_flags(catalog)[f"{major}.{minor + 1}.0"]
    assert "--block-size" in release_flags(catalog)[version]
    command = parse_serve_command(["vllm", "serve", "llama-3.1-8b", "--block-size", "16"],
                                  device="H100", catalog=catalog, engine=child)
    refused = [n for n in command.notes if n.code == "SU007"]
    assert refused and refused[0].flag == "--block-size" and version in refused[0].hint


# ---------------------------------------------------------------- argparse


def test_flags_take_the_words_their_arity_says() -> None:
    raw = _raw("vllm serve --trust-remote-code llama-3.1-8b --frobnicate 3 --new-switch "
               "--served-model-name a b --max_num_seqs=8 -tp 2 -O3 -cc.mode=0")
    assert raw.model == "llama-3.1-8b"
    assert raw.values == {"--trust-remote-code": "", "--max-num-seqs": "8",
                          "--tensor-parallel-size": "2", "--optimization-level": "3"}
    assert raw.dotted == {"--compilation-config": {"mode": 0}}
    assert "--served-model-name" in raw.order and not raw.notes
    # the release's parser has neither: vLLM leaves them over, with the word a flag takes
    assert raw.unrecognized == ["--frobnicate", "3", "--new-switch"]
    assert raw.unknown_flags == ["--frobnicate", "--new-switch"]


def test_words_after_double_dash_are_positional_as_in_argparse() -> None:
    raw = _raw("vllm serve llama-3.1-8b -- --block-size 16")
    assert raw.model == "llama-3.1-8b" and "--block-size" not in raw.values
    assert raw.unrecognized == ["--block-size", "16"] and not raw.unknown_flags


def test_negative_numbers_are_values_and_a_lone_dash_is_a_word() -> None:
    raw = _raw("vllm serve llama-3.1-8b --max-model-len -1 -")
    assert raw.values["--max-model-len"] == "-1"
    assert raw.unrecognized == ["-"]


@pytest.mark.parametrize("line", ["vllm serve llama-3.1-8b --block-size",
                                  "vllm serve llama-3.1-8b --block-size --dtype half",
                                  "vllm serve llama-3.1-8b -ac.backend"])
def test_a_missing_value_names_the_flag_and_never_exits(line: str) -> None:
    with pytest.raises(InputError) as info:
        _raw(line)
    assert info.value.message == "expected a value after this flag"
    assert info.value.field in ("--block-size", "--attention-config.backend")
    assert info.value.exit_code == 2


# ---------------------------------------------------------------- flat configs


@pytest.mark.parametrize(("config", "field", "words"), [
    ({"device_capability": "9.0", "head_size": 128, "dtype": "bf16", "bogus": 1}, "bogus",
     "unknown field(s) ['bogus']"),
    ({"head_size": 128, "dtype": "bf16"}, "device_capability", "missing required field"),
    ({"device_capability": "9.0", "head_size": None, "dtype": "bf16"}, "head_size",
     "missing required field"),
    ({"device_capability": "9.0", "head_size": True, "dtype": "bf16"}, "head_size",
     "expected an integer, got True"),
    ({"device_capability": "9.0", "head_size": 128, "dtype": "bf17", "use_mla": "yes"}, "dtype",
     "unknown dtype 'bf17'"),
    ({"device_capability": "9.0", "head_size": 128, "dtype": "bf16", "use_mla": "yes"},
     "use_mla", "expected true or false, got 'yes'"),
    ({"device_capability": "9.0", "head_size": 128, "dtype": "bf16", "model": "llama"}, "model",
     "expected a JSON object, got 'llama'"),
    ({"device_capability": "9.0", "head_size": 128, "dtype": "bf16",
      "model": {"num_attention_heads": 8, "heads": 1}}, "model", "unknown model field(s) ['heads']"),
])
def test_flat_config_faults_name_the_field(config: dict[str, object], field: str,
                                           words: str) -> None:
    with pytest.raises(InputError) as info:
        facts_from_flat(config, load_catalog().engine().profile)
    assert info.value.field == field and words in info.value.message


def test_every_api_key_is_hidden_in_the_shown_command_line() -> None:
    command = parse_serve_command(
        ["HF_TOKEN=hf_x", "vllm", "serve", "llama-3.1-8b", "--port", "8000", "--api-key", "k1",
         "k2", "--hf-token", "t", "--block-size", "16"],
        device="H100", catalog=load_catalog())
    assert command.command_line == ("'HF_TOKEN=***' vllm serve llama-3.1-8b --port 8000 "
                                    "--api-key '***' '***' --hf-token '***' --block-size 16")
    assert command.deployment.block_size == 16


def test_a_release_without_recorded_frontend_flags_borrows_the_nearest_newer_ones() -> None:
    """0.25.1-0.32.0 record their engine flags only: the frontend's flags of the nearest newer
    release that records them stand in, so a frontend flag is never refused as unknown."""
    catalog = load_catalog()
    recorded = [n for n in catalog.engine_names if serve_flags(catalog, n).parser_recorded]
    assert recorded, "no release records its whole parser"
    newest = serve_flags(catalog, recorded[0])
    for name in catalog.engine_names:
        table = serve_flags(catalog, name)
        if not table.parser_recorded and catalog.engine_names.index(name) < \
                catalog.engine_names.index(recorded[0]):
            assert set(newest.frontend_flags) <= table.parser_flags, name
    command = parse_serve_command(
        ["vllm", "serve", "llama-3.1-8b", "--tool-parser-plugin", "x"], device="H100",
        catalog=catalog, engine=catalog.engine_names[0])
    assert not [n for n in command.notes if n.code in ("SE005", "SE006")]
