"""What the command line says, said once, to the right device and in the promised shape:
sweep's exit on input with no config, smoke's JSON when it cannot run, the fleet notes
naming their devices, each finding printed once, device names, the count flag and the
help."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]
VALID = str(ROOT / "examples" / "llama-3.1-8b-h100.yaml")
FLAT = {"device_capability": "9.0", "head_size": 128, "dtype": "bfloat16"}


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


# ---------------------------------------------------------------- sweep


@pytest.mark.parametrize("text", ["", "\n\n", "not json\n{\"x\": 1}\n"],
                         ids=["empty", "blank-lines", "every-line-bad"])
def test_sweep_with_no_config_exits_2(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, text)
    code, out, err = run_cli(["sweep"])
    assert code == 2, (out, err)
    assert err.startswith("attn-select: error: stdin: ") and "config" in err
    # every bad line still has its verdict line (nothing dropped)
    assert len(out.splitlines()) == len([line for line in text.splitlines() if line.strip()])


def test_sweep_with_some_configs_exits_0_and_counts_the_bad_lines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, json.dumps(FLAT) + "\nnot json\n")
    code, out, err = run_cli(["sweep"])
    assert code == 0 and len(out.splitlines()) == 2
    assert "1 of 2 line(s) are not configs (first: line 2: not JSON" in err


# ---------------------------------------------------------------- smoke and bench, no torch


def _no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from selector.errors import CannotRunHereError

    def missing(what: str = "the smoke check") -> None:
        raise CannotRunHereError(f"{what} needs PyTorch, which is not installed (test)")

    monkeypatch.setattr("selector.platforms.cuda.probe_torch", missing)


def test_smoke_json_that_cannot_run_is_a_json_document(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_torch(monkeypatch)
    code, out, err = run_cli(["smoke", VALID, "--format", "json"])
    assert code == 4
    document = json.loads(out)
    assert document["status"] == "CANNOT-RUN" and document["exit_code"] == 4
    assert document["passed"] is False and "needs PyTorch" in document["reason"]
    assert document["plans"] and document["groups"] == []
    # the reason is the error line, after at most the smoke's own notes, and no blank line
    assert "error: the smoke check needs PyTorch" in err.splitlines()[-1]
    assert not err.startswith("\n") and "\n\n" not in err


@pytest.mark.parametrize("argv", [["smoke", VALID], ["bench", VALID],
                                  ["smoke-plan", str(ROOT / "examples" / "smoke-plan-h200.json")]],
                         ids=["smoke", "bench", "smoke-plan"])
def test_cannot_run_is_said_without_a_blank_line_first(argv: list[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _no_torch(monkeypatch)
    code, out, err = run_cli(argv)
    assert code == 4 and not out
    # the error is the last line, after at most the smoke's own notes, and no blank line
    assert err.splitlines()[-1].startswith("error: "), repr(err)
    assert not err.startswith("\n") and "\n\n" not in err, repr(err)
    if argv[0] == "bench":
        assert err.startswith("error: the benchmark needs PyTorch")


# ---------------------------------------------------------------- the fleet names devices


def test_every_command_line_note_of_a_fleet_names_its_devices() -> None:
    code, out, _ = run_cli(["check", "--device", "all", "--", "vllm", "serve", "llama-3.1-8b",
                            "--enforce-eager"])
    assert code == 1
    notes = [line for line in out.splitlines() if line.startswith(("info [", "warning ["))]
    assert notes and all(re.match(r"(info|warning) \[AS1\d\d\] \[[^]]+\] ", n) for n in notes)
    # a note that holds on some devices only names them (no bfloat16 on V100 and T4)
    assert ("info [AS107] [V100, T4] --dtype auto: this GPU has no bfloat16, so vLLM uses "
            "float16") in notes
    assert "info [AS107] [every device] --enforce-eager: no CUDA graphs (cudagraph_mode NONE)" \
        in notes
    # one device: the report's title names it
    _, out, _ = run_cli(["check", "--device", "V100", "--", "vllm", "serve", "llama-3.1-8b"])
    assert "info [AS107] --dtype auto: this GPU has no bfloat16" in out


# ---------------------------------------------------------------- each finding once


def test_the_cuda_graph_downgrade_of_a_model_is_said_once(tmp_path: Path) -> None:
    path = tmp_path / "downgrade.yaml"
    path.write_text("device: H100\nmodel: llama-3.1-8b\nattention_backend: FLASHINFER\n"
                    "cudagraph_mode: FULL\n", encoding="utf-8")
    message = "CUDAGraphMode.FULL is not supported with FlashInferBackend backend"
    code, out, _ = run_cli(["check", str(path)])
    assert code == 0 and out.count(message) == 1, out
    assert "warning [AS002] " + message in out and "AS005" not in out
    code, out, _ = run_cli(["check", str(path), "--format", "json"])
    codes = [f["code"] for f in json.loads(out)["findings"]]
    assert codes.count("AS002") == 1 and "AS005" not in codes
    _, out, _ = run_cli(["check", str(path), "--format", "compact"])
    assert out.strip().endswith(": warning AS002 line 4")


def test_no_valid_backend_of_a_model_is_said_once(tmp_path: Path) -> None:
    path = tmp_path / "nvfp4.yaml"
    path.write_text("device: V100\nmodel: llama-3.1-8b\nkv_cache_dtype: nvfp4\n",
                    encoding="utf-8")
    code, out, _ = run_cli(["check", str(path)])
    assert code == 1
    assert out.count("No valid attention backend found") == 1, out
    assert "error [SE001]" not in out  # the layer group's report says it, with its backends


# ---------------------------------------------------------------- device names


@pytest.mark.parametrize(("name", "said"), [
    ("Gaudi3", "not in the catalog (Intel GPUs and Gaudi accelerators are not supported yet)"),
    ("H1000", "did you mean 'H100'"),
    ("B3000", "did you mean 'B300'"),
])
def test_a_device_name_gets_no_unrelated_suggestion(name: str, said: str) -> None:
    code, _, err = run_cli(["check", "--device", name, VALID])
    assert code == 2 and said in err, err
    if "catalog" in said:
        assert "did you mean" not in err


# ---------------------------------------------------------------- the count flag, the help


def test_verbose_is_a_flag_and_says_so() -> None:
    code, _, err = run_cli(["check", "-v", "2", VALID])
    assert code == 2 and "'2' is no file: -v is a flag and takes no value" in err
    assert "write -v without a number" in err
    code, out, _ = run_cli(["check", "-vv", VALID])
    assert code == 0 and "Backends" in out
    _, out, _ = run_cli(["check", "--help"])
    row = next(line for line in out.splitlines() if "--verbose" in line)
    assert "<int>" not in row and "[default: 0]" not in out.split("--verbose")[1].split("--")[0]
    assert "takes no" in out


def test_help_lists_the_commands_in_the_readme_order_and_wraps_at_the_terminal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from selector.cli import _SUBCOMMANDS

    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = run_cli(["--help"])
    listed = re.findall(r"^│ ([a-z][a-z-]+) {2,}", out, re.M)
    assert listed == list(_SUBCOMMANDS)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Commands")[1].split("\n\n")[1]
    in_readme = list(dict.fromkeys(re.findall(r"^\| `attn-select ([a-z-]+)", table, re.M)))
    assert in_readme == list(_SUBCOMMANDS)
    # a docstring's own line breaks are not kept: at 200 columns each paragraph is a line
    assert re.search(r"^│ explain +Every check of one backend for a deployment \(or one layer of "
                     r"a model\): the rule, the facts it read, the result\. +│$", out, re.M), out
    _, out, _ = run_cli(["check", "--help"])
    assert "`vllm serve MODEL [flags]` command line" in out  # not eaten as markup


@pytest.mark.parametrize(("words", "said"), [(["vllm"], "not `vllm` alone"),
                                             (["vllm", " "], "not `vllm` alone"),
                                             (["vllm", "bench"], "not `vllm bench`")])
def test_a_command_other_than_serve_is_named_without_a_dangling_space(words: list[str],
                                                                      said: str) -> None:
    code, _, err = run_cli(["check", "--device", "H100", "--", *words])
    assert code == 2 and said in err and "`vllm `" not in err, err


def test_shard_check_json_that_cannot_run_is_a_json_document(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from selector.errors import CannotRunHereError

    def missing(*args: object, **kwargs: object) -> None:
        raise CannotRunHereError("the shard check needs PyTorch (test)")

    monkeypatch.setattr("selector.parallel.simulate.run_shard_check", missing)
    code, out, err = run_cli(["smoke", str(ROOT / "examples" / "parallel"
                                           / "gqa-32q-2kv-h200-tp8-dcp2.yaml"), "--format", "json"])
    assert code == 4, err
    document = json.loads(out)
    assert document["status"] == "CANNOT-RUN" and "shard check needs PyTorch" in document["reason"]
