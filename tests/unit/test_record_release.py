"""tools/record_release.py: every per-release answer file the tests read has its step.

No vLLM here: the step table is read through ``--list``, and the failure path runs with
a stand-in interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from selector.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "record_release.py"
sys.path.insert(0, str(ROOT / "tools"))

import record_release  # noqa: E402


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          check=False, cwd=ROOT)


def _listed(version: str) -> set[str]:
    done = _run(version, "--list")
    assert done.returncode == 0, done.stderr
    return {line.split("-> ", 1)[1] for line in done.stdout.splitlines() if "-> " in line}


def _answer_files(version: str) -> set[str]:
    """What the repository holds of vLLM's answers for one release: the files of its
    oracle golden folders and the non-YAML files of its profile folder."""
    folders = [f"tests/golden/oracle/vllm-{version}", f"tests/golden/oracle/releases/vllm-{version}"]
    found = {str(path.relative_to(ROOT)) for folder in folders
             for path in (ROOT / folder).glob("*") if path.is_file()}
    profile = ROOT / "schemas" / "engines" / f"vllm-{version}"
    found |= {str(path.relative_to(ROOT)) for path in profile.glob("*")
              if path.is_file() and path.suffix not in (".yaml", ".yml")}
    return found


VERSIONS = [str(load_catalog().engine(name).version) for name in load_catalog().engine_names]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_answer_file_of_a_release_has_its_step(version: str) -> None:
    listed = _listed(version)
    exempt = {path.format(version=version) for path in record_release.NOT_PER_RELEASE}
    unrecorded = sorted(_answer_files(version) - listed - exempt)
    assert not unrecorded, (
        f"vLLM {version}: no step of tools/record_release.py writes {unrecorded}; "
        "add one to STEPS (or, if no test needs it of a new release, to NOT_PER_RELEASE)")


def test_the_list_is_the_step_table() -> None:
    assert _listed("9.9.9") == set(record_release.step_outputs("9.9.9"))
    names = [step.name for step in record_release.STEPS]
    assert len(names) == len(set(names))
    for step in record_release.STEPS:
        assert (ROOT / "tools" / step.tool).is_file(), step.tool
        assert step.interpreter in ("oracle", "project"), step.name
        assert not hasattr(step, "stdout"), "a recorder writes its own files (tools/oracle/)"


def test_a_new_release_gets_every_answer_the_newest_has() -> None:
    """The newest release's answer kinds (file names), minus the exempt ones, are all
    written for a release that has none yet."""
    newest = VERSIONS[-1]
    exempt = {path.format(version=newest) for path in record_release.NOT_PER_RELEASE}
    kinds = {Path(path).name for path in _answer_files(newest) - exempt}
    assert kinds <= {Path(path).name for path in _listed("9.9.9")}


def _stand_in(tmp_path: Path, version: str) -> Path:
    """An 'interpreter' that claims vLLM ``version``, writes the file dcp_oracle.py is
    given and fails every other tool with status 3."""
    script = tmp_path / "python"
    script.write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = -c ]; then echo '[\"{version}\", \"/nonexistent/vllm\"]'; exit 0; fi\n"
        "case \"$1\" in *dcp_oracle.py) echo '{}' > \"$2\"; exit 0;; esac\n"
        "exit 3\n")
    script.chmod(0o755)
    return script


def test_a_failing_step_stops_the_run_and_says_what_was_done(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    (root / "schemas" / "engines").mkdir(parents=True)
    python = _stand_in(tmp_path, "9.9.9")
    done = _run("9.9.9", "--python", str(python), "--root", str(root),
                "--only", "dcp", "weights", "model-registry")
    assert done.returncode == 1
    assert "step weights: tools/weights_oracle.py exited 3" in done.stderr
    assert "done: dcp; not run: model-registry" in done.stderr
    assert (root / "tests/golden/oracle/vllm-9.9.9/dcp.json.gz").is_file()
    assert "Traceback" not in done.stderr


def test_bad_arguments_get_a_clear_message(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    (root / "schemas" / "engines").mkdir(parents=True)
    python = _stand_in(tmp_path, "9.9.9")
    cases = {
        ("9.9.9", "--only", "nonesuch", "--python", str(python)): "unknown step(s) ['nonesuch']",
        ("9.9.9",): "--python PATH",
        ("9.9.8", "--python", str(python), "--root", str(root)): "has vLLM 9.9.9, not 9.9.8",
        ("9.9.9", "--python", str(python), "--root", str(tmp_path)): "not a copy of the repository",
        ("9.9.9", "--python", str(tmp_path / "none"), "--root", str(root)): "--python",
    }
    for args, message in cases.items():
        done = _run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


def test_one_release_serve_flags_are_written_against_the_parent_profile() -> None:
    """The ``serve-flags`` step writes one release's ``engine_flags`` from its own answer
    alone: the parent's flags come from the profiles. Given each release's flags as its
    answer, every committed file comes out unchanged (and no file where none changed)."""
    import serve_flags

    from selector.inputs.serve.flags import release_flags

    for version, flags in release_flags(load_catalog()).items():
        assert serve_flags.profile_flags(version) == set(flags), version
        for path, text in serve_flags.write([{"vllm_version": version, "flags": sorted(flags)}]).items():
            assert text == (path.read_text() if path.is_file() else ""), path
