"""``smoke`` and ``bench`` refuse a deployment ``vllm serve`` would not start, exactly as
``check`` refuses it: the same code, vLLM's same words, exit 1, and no kernel run.

One deployment per refusal kind (tests/fixtures/startup/): SU001 (bfloat16 below
compute capability 8.0), SU002 (``--max-model-len`` above the derived length), SU006 (the
padded vocabulary not divisible by the TP size), MM001 (no memory left for the KV cache)
and MM002 (one full-length request does not fit the KV cache).

The expected texts are ``check``'s own output (its JSON findings), never written here;
``check``'s words are vLLM's: the MM001 / MM002 messages and the budget behind them are
compared word for word with vLLM's recorded answers in tests/golden/test_memory_oracle.py,
SU002 and the derived length with vLLM's own ``get_and_verify_max_len`` in
tests/golden/test_startup_facts.py; SU001 and SU006 are vLLM's assertions as cited in
``schemas/engines/*/startup.yaml`` (tests/unit/test_startup_checks.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import selector.bench.runner
import selector.smoke.runner
from selector.fleet.entry import bench_on_this_node, smoke_on_this_node
from tests.fuzz.test_config_fuzz import run_cli

STARTUP = Path(__file__).resolve().parents[1] / "fixtures" / "startup"
REFUSALS = {
    "SU001": "bfloat16-t4-su001.yaml",
    "SU002": "max-model-len-su002.yaml",
    "SU006": "vocab-tp-su006.yaml",
    "MM001": "no-kv-memory-mm001.yaml",
    "MM002": "kv-too-small-mm002.yaml",
}


@pytest.fixture
def kernels_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The commands that reached a kernel (a GPU, or the CPU stand-ins, being set up)."""
    reached: list[str] = []

    def smoke_machine(*args: object, **kwargs: object) -> object:
        reached.append("smoke")
        raise AssertionError("the smoke set up a device to run kernels on")

    def bench_environment(*args: object, **kwargs: object) -> object:
        reached.append("bench")
        raise AssertionError("the bench set up a device to time kernels on")

    monkeypatch.setattr(selector.smoke.runner, "platform_machine", smoke_machine)
    monkeypatch.setattr(selector.bench.runner, "device_environment", bench_environment)
    return reached


def _workload(tmp_path: Path) -> Path:
    # contexts well inside every fixture's max_model_len: the bench's own lengths do not
    # change whether vLLM starts
    workload = tmp_path / "tiny.yaml"
    workload.write_text("decode: {batch_sizes: [2], context_lengths: [40]}\n"
                        "prefill: {lengths: [24]}\n", encoding="utf-8")
    return workload


def _check_refusal(path: Path, code: str) -> str:
    """What ``check`` says of the file: exit 1 and exactly one error, ``code``; the line
    ``smoke`` and ``bench`` must print, built from check's finding."""
    exit_code, out, err = run_cli(["check", str(path), "--format", "json"])
    assert exit_code == 1, err
    errors = [f for f in json.loads(out)["findings"] if f["level"] == "error"]
    assert [f["code"] for f in errors] == [code]
    return (f"{path}: vLLM would reject this deployment: [{code}] "
            f"{errors[0]['message'].rstrip('.')}; `attn-select check {path}` says more")


@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_smoke_and_bench_refuse_what_check_refuses_at_start_up(
        code: str, tmp_path: Path, kernels_run: list[str]) -> None:
    path = STARTUP / REFUSALS[code]
    said = _check_refusal(path, code)
    out_dir = str(tmp_path / "out")
    for argv in (["smoke", str(path)], ["smoke", str(path), "--format", "json"],
                 ["smoke", str(path), "--dry-run"],
                 ["smoke", str(path), "--dry-run", "--format", "json"],
                 ["smoke", str(path), "--shards", "with"],
                 ["bench", str(path), "--output", out_dir],
                 ["bench", str(path), "--format", "json", "--output", out_dir],
                 ["bench", str(path), "--workload", str(_workload(tmp_path)),
                  "--policy", "fastest", "--output", out_dir]):
        exit_code, out, err = run_cli(argv)
        assert exit_code == 1, (argv, err)
        assert err == f"error: {said}\n", argv
        assert out == "", argv  # no report, no dry-run calls
    assert kernels_run == []
    assert not (tmp_path / "out").exists()  # nothing timed, nothing written


@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_a_fleet_node_answers_the_same_refusal(code: str, kernels_run: list[str]) -> None:
    # the per-node entries of `smoke --ray` / `bench --ray` run the same pipeline functions
    path = STARTUP / REFUSALS[code]
    said = _check_refusal(path, code)
    request = {"config": str(path), "text": path.read_text(encoding="utf-8"), "device": None}
    for answer in (smoke_on_this_node({**request, "options": {}}),
                   bench_on_this_node({**request, "workload": None})):
        assert answer["exit_code"] == 1
        assert answer["errors"] == [said]
    assert kernels_run == []


def test_the_stand_in_kernels_run_once_the_refusal_is_lifted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the refusal is the deployment's, not the machine's: the MM002 deployment with a
    # max_model_len that fits (the length check names) benches on the CPU stand-ins
    pytest.importorskip("torch")
    from cpu_env import cpu_environment

    monkeypatch.setattr(selector.bench.runner, "device_environment",
                        lambda plans, notify, catalog, device=None: cpu_environment())
    fitted = tmp_path / "fits.yaml"
    fitted.write_text((STARTUP / REFUSALS["MM002"]).read_text(encoding="utf-8")
                      + "max_model_len: 65536\n", encoding="utf-8")
    assert run_cli(["check", str(fitted)])[0] == 0
    workload = _workload(tmp_path)
    workload.write_text(workload.read_text(encoding="utf-8") + "settings: {min_repeats: 3, "
                        "max_repeats: 3, warmup: 1, builder_repeats: 1}\n", encoding="utf-8")
    exit_code, out, err = run_cli(["bench", str(fitted), "--format", "json", "--workload",
                                   str(workload), "--output", str(tmp_path / "out")])
    assert exit_code == 0, err
    assert json.loads(out)["passed"] is True


def test_a_fleet_node_of_a_type_that_holds_the_deployment_runs_it(
        kernels_run: list[str]) -> None:
    # the MM002 file names an RTX 5090; on an H200 node (the fleet negotiates the file for
    # each GPU type) check finds it valid, so the node goes on to its kernels
    path = STARTUP / REFUSALS["MM002"]
    request = {"config": str(path), "text": path.read_text(encoding="utf-8"), "device": "H200"}
    answer = smoke_on_this_node({**request, "options": {}})
    assert kernels_run == ["smoke"]  # reached the (refusing) stand-in for a GPU
    assert answer["exit_code"] != 1
    answer = smoke_on_this_node({**request, "device": "RTX 5090", "options": {}})
    assert answer["exit_code"] == 1 and "[MM002] " in answer["errors"][0]
    assert kernels_run == ["smoke"]
