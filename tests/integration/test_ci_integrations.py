"""The pre-commit hook and the GitHub Action, exercised for real: pre-commit runs the
hook from this repository against a temporary git repository, and the action's
script runs locally with GitHub's environment files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VALID = (ROOT / "examples" / "llama-3.1-8b-h100.yaml").read_text(encoding="utf-8")
INVALID = (ROOT / "examples" / "gpt-oss-20b-l40s-flashinfer.yaml").read_text(encoding="utf-8")


# ---------------------------------------------------------------- the action


def test_action_inputs_reach_the_script() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "check")
    assert "ci/action.sh" in step["run"]
    script = (ROOT / "ci" / "action.sh").read_text(encoding="utf-8")
    for variable in step["env"]:
        assert variable in script, variable
    assert set(action["outputs"]) == {"exit-code", "sarif-file"}
    for name in action["outputs"]:
        assert f"{name}=" in script


def _run_action(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    summary = tmp_path / "summary.md"
    output = tmp_path / "github_output"
    environment = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary),
                   "GITHUB_OUTPUT": str(output), **env}
    binary = shutil.which("attn-select")
    if binary is None:
        wrapper = tmp_path / "attn-select"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m selector \"$@\"\n", "utf-8")
        wrapper.chmod(0o755)
        binary = str(wrapper)
    environment["ATTN_SELECT_BIN"] = binary
    done = subprocess.run(["bash", str(ROOT / "ci" / "action.sh")], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=120, check=False)
    return done, summary, output


def test_action_script_annotates_summarises_and_writes_sarif(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    (deploy / "good.yaml").write_text(VALID, encoding="utf-8")
    (deploy / "bad.yaml").write_text(INVALID, encoding="utf-8")
    done, summary, output = _run_action(tmp_path, ATTN_SELECT_FILES="deploy/*.yaml",
                                        ATTN_SELECT_SARIF="out.sarif")
    assert done.returncode == 1, done.stderr
    assert re.search(r"^::error file=deploy/bad.yaml,line=4,title=", done.stdout, re.M)
    assert "| `deploy/good.yaml` | H100 | ✅ valid |" in summary.read_text(encoding="utf-8")
    assert output.read_text(encoding="utf-8").splitlines() == ["exit-code=1",
                                                              "sarif-file=out.sarif"]
    assert '"version": "2.1.0"' in (tmp_path / "out.sarif").read_text(encoding="utf-8")


def test_action_script_fleet_and_command(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(VALID, encoding="utf-8")
    done, _, output = _run_action(tmp_path, ATTN_SELECT_FILES="good.yaml",
                                  ATTN_SELECT_DEVICES="H100, RTX 5090", ATTN_SELECT_STRICT="true")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on RTX 5090 FLASHINFER" in done.stdout
    assert "exit-code=0" in output.read_text(encoding="utf-8")
    done, _, _ = _run_action(tmp_path, ATTN_SELECT_DEVICES="B200",
                             ATTN_SELECT_COMMAND="vllm serve llama-3.1-8b --kv-cache-dtype fp8")
    assert done.returncode == 0 and "on B200" in done.stdout
    done, _, _ = _run_action(tmp_path)
    assert done.returncode == 2 and "::error" in done.stdout


def test_action_command_is_split_as_a_shell_does(tmp_path: Path) -> None:
    # the same line works on the CLI: a quoted JSON flag value is one argument
    command = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config "
               "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
               "\"prompt_lookup_max\": 4}'")
    done, _, output = _run_action(tmp_path, ATTN_SELECT_DEVICES="H100",
                                  ATTN_SELECT_COMMAND=command, ATTN_SELECT_PYTHON=sys.executable)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on H100" in done.stdout and "exit-code=0" in output.read_text(encoding="utf-8")
    done, _, _ = _run_action(tmp_path, ATTN_SELECT_DEVICES="H100",
                             ATTN_SELECT_COMMAND="vllm serve x --speculative-config '{",
                             ATTN_SELECT_PYTHON=sys.executable)
    assert done.returncode == 2 and "::error title=attn-select::" in done.stdout + done.stderr


# ---------------------------------------------------------------- pre-commit


@pytest.mark.slow
def test_pre_commit_hook_runs_from_this_repository(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is needed")
    pytest.importorskip("pre_commit")
    pre_commit = [sys.executable, "-m", "pre_commit"]
    project = tmp_path / "project"
    (project / "attn-select").mkdir(parents=True)
    (project / "attn-select" / "llama.yaml").write_text(VALID, encoding="utf-8")
    (project / "serving.attn.yaml").write_text(INVALID, encoding="utf-8")
    (project / "README.md").write_text("not a deployment\n", encoding="utf-8")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q"], cwd=project, check=True, env=env)
    subprocess.run(["git", "add", "."], cwd=project, check=True, env=env)
    done = subprocess.run([*pre_commit, "try-repo", str(ROOT), "attn-select-check",
                           "--all-files"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=540, check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 1, log
    assert "attn-select check" in log and "Failed" in log
    assert "serving.attn.yaml" in log and "INVALID" in log
    assert "README.md" not in log
    assert "VALID  FLASH_ATTN" in log  # the good file is reported too
