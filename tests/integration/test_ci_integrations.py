"""The pre-commit hook and the GitHub Action, exercised for real: pre-commit runs the
hook from this repository against a temporary git repository, and the action's
script runs locally with GitHub's environment files."""

from __future__ import annotations

import json
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
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    action = yaml.safe_load(text)
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    assert {"ignore", "args", "format", "command-file"} <= set(inputs)
    for name, spec in inputs.items():
        assert spec["description"] and isinstance(spec["default"], str), name
    # every input the steps read exists, and every input is read by a step
    referenced = set(re.findall(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*}}", text))
    assert referenced == set(inputs)
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "check")
    assert "ci/action.sh" in step["run"]
    script = (ROOT / "ci" / "action.sh").read_text(encoding="utf-8")
    header = script.split("set -uo pipefail")[0]
    for variable, value in step["env"].items():
        assert variable in script.split("set -uo pipefail")[1], variable  # read by the script
        assert f"#   {variable}" in header, variable  # and documented in its header
        assert re.fullmatch(r"\$\{\{ inputs\.[a-z-]+ }}", value), value
    assert set(action["outputs"]) == {"exit-code", "sarif-file"}
    for name in action["outputs"]:
        assert f"{name}=" in script
    formats = re.search(r"github \(annotations on the files\), (.*)\.", inputs["format"]["description"])
    from selector.report.formats import REPORTERS

    assert formats is not None
    assert {"github", *re.split(r", | or ", formats.group(1))} == set(REPORTERS)


def test_action_ignore_args_and_format(tmp_path: Path) -> None:
    downgrade = ("device: H100\nattention_backend: FLASHINFER\ncudagraph_mode: FULL\n"
                 "layer: {head_size: 128, num_heads: 32, num_kv_heads: 8}\n")
    (tmp_path / "downgrade.yaml").write_text(downgrade, encoding="utf-8")
    done, _, output = _run_action(tmp_path, ATTN_SELECT_FILES="downgrade.yaml",
                                  ATTN_SELECT_STRICT="true")
    assert done.returncode == 1 and "::error file=downgrade.yaml" in done.stdout
    done, _, output = _run_action(tmp_path, ATTN_SELECT_FILES="downgrade.yaml",
                                  ATTN_SELECT_STRICT="true", ATTN_SELECT_IGNORE="AS002, KV001")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::notice file=downgrade.yaml" in done.stdout and "exit-code=0" in output.read_text()
    done, _, _ = _run_action(tmp_path, ATTN_SELECT_FILES="downgrade.yaml",
                             ATTN_SELECT_FORMAT="compact", ATTN_SELECT_ARGS="--device 'RTX 5090'",
                             ATTN_SELECT_PYTHON=sys.executable)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("downgrade.yaml: VALID FLASHINFER on RTX 5090"), done.stdout
    done, _, _ = _run_action(tmp_path, ATTN_SELECT_FILES="downgrade.yaml",
                             ATTN_SELECT_IGNORE="AS999")
    assert done.returncode == 2 and "unknown code 'AS999'" in done.stderr
    done, _, _ = _run_action(tmp_path, ATTN_SELECT_FILES="downgrade.yaml",
                             ATTN_SELECT_ARGS="--device 'H100", ATTN_SELECT_PYTHON=sys.executable)
    assert done.returncode == 2 and "the args input cannot be split" in done.stdout + done.stderr


def test_action_locates_a_command_in_its_workflow(tmp_path: Path) -> None:
    workflow = tmp_path / ".github" / "workflows" / "serve.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("on: [push]\njobs:\n  check:\n    steps:\n      - uses: x/attn-select@v1\n"
                        "        with:\n          command: vllm serve llama-3.1-8b --enforce-eager\n",
                        encoding="utf-8")
    done, _, _ = _run_action(
        tmp_path, ATTN_SELECT_DEVICES="H100", ATTN_SELECT_SARIF="out.sarif",
        ATTN_SELECT_COMMAND="vllm serve llama-3.1-8b --enforce-eager",
        GITHUB_REPOSITORY="octo/app",
        GITHUB_WORKFLOW_REF="octo/app/.github/workflows/serve.yml@refs/heads/main")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::notice file=.github/workflows/serve.yml,line=7," in done.stdout
    log = json.loads((tmp_path / "out.sarif").read_text(encoding="utf-8"))
    for result in log["runs"][0]["results"]:
        physical = result["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"]["uri"] == ".github/workflows/serve.yml"
        assert physical["region"]["startLine"] == 7


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

HF_CONFIG = (ROOT / "tests" / "fixtures" / "hf_configs" / "meta-llama--Llama-3.1-8B.json")
MODEL_FOLDER_FILES = ("config.json", "generation_config.json", "tokenizer.json",
                      "tokenizer_config.json", "special_tokens_map.json",
                      "model.safetensors.index.json")


def _scratch_project(project: Path) -> None:
    """A repository as a user keeps one: deployments, a model folder beside them, other
    files the hook must not see."""
    (project / "attn-select" / "models" / "llama").mkdir(parents=True)
    (project / "attn-select" / "llama.yaml").write_text(VALID, encoding="utf-8")
    (project / "attn-select" / "llama-local.yaml").write_text(
        "device: H100\nmodel: models/llama\n", encoding="utf-8")
    for name in MODEL_FOLDER_FILES:
        (project / "attn-select" / "models" / "llama" / name).write_text(
            HF_CONFIG.read_text(encoding="utf-8") if name == "config.json" else "{}\n",
            encoding="utf-8")
    (project / "serving.attn.yaml").write_text(INVALID, encoding="utf-8")
    (project / "README.md").write_text("not a deployment\n", encoding="utf-8")
    (project / "package.json").write_text("{}\n", encoding="utf-8")


def _hook() -> dict[str, object]:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    hook: dict[str, object] = next(h for h in hooks if h["id"] == "attn-select-check")
    return hook


def test_hook_skips_model_folders_and_prints_one_line_per_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook's definition run as pre-commit runs it (without installing it): the
    `files` and `exclude` patterns searched in each path (``re.search``), then the entry
    with the matched files appended."""
    from tests.fuzz.test_config_fuzz import run_cli

    _scratch_project(tmp_path)
    hook = _hook()
    paths = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    chosen = [p for p in paths if re.search(str(hook["files"]), p)
              and not re.search(str(hook["exclude"]), p)]
    assert chosen == ["attn-select/llama-local.yaml", "attn-select/llama.yaml",
                      "serving.attn.yaml"]
    entry = str(hook["entry"]).split()
    assert entry[:2] == ["attn-select", "check"]
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli([*entry[1:], *chosen])
    assert code == 1 and not err, err
    assert out.splitlines() == [
        "attn-select/llama-local.yaml: VALID FLASH_ATTN on H100 (vllm==0.33.0)",
        "attn-select/llama.yaml: VALID FLASH_ATTN on H100 (vllm==0.33.0)",
        "serving.attn.yaml: INVALID on L40S (vllm==0.33.0): error SE002 line 4: Selected "
        "backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. "
        "Reason: ['attention sinks not supported']",
    ]
    # a user's args come after the entry: the last --format wins
    code, out, _ = run_cli([*entry[1:], "--format", "text", "serving.attn.yaml"])
    assert code == 1 and "Backends" in out


@pytest.mark.slow
def test_pre_commit_hook_runs_from_this_repository(tmp_path: Path) -> None:
    """`pre-commit try-repo` installs the hook from this checkout (uncommitted changes
    included) into its own environment, as a user's pre-commit does; offline it needs
    the package index pip is configured with (CI installs pre-commit with the dev
    extras)."""
    if shutil.which("git") is None:
        pytest.skip("git is needed")
    pytest.importorskip("pre_commit")
    pre_commit = [sys.executable, "-m", "pre_commit"]
    project = tmp_path / "project"
    project.mkdir()
    _scratch_project(project)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q"], cwd=project, check=True, env=env)
    subprocess.run(["git", "add", "."], cwd=project, check=True, env=env)
    done = subprocess.run([*pre_commit, "try-repo", str(ROOT), "attn-select-check",
                           "--all-files"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=540, check=False)
    log = done.stdout + done.stderr
    if done.returncode == 3 and "pip" in log:  # no package index reachable: cannot install
        pytest.skip("pre-commit could not install the hook's environment")
    assert done.returncode == 1, log
    assert "attn-select check" in log and "Failed" in log
    assert ("serving.attn.yaml: INVALID on L40S (vllm==0.33.0): error SE002 line 4: Selected "
            "backend AttentionBackendEnum.FLASHINFER is not valid") in log
    assert "attn-select/llama.yaml: VALID FLASH_ATTN on H100" in log
    assert "attn-select/llama-local.yaml: VALID FLASH_ATTN on H100" in log
    assert "config.json" not in log and "README.md" not in log and "AS001" not in log
    reported = [line for line in log.splitlines() if ": VALID " in line or ": INVALID " in line]
    assert len(reported) == 3  # one line per file, no tables
