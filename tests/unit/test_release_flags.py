"""`vllm serve` flags per release: a flag the checked release lacks is that release's error."""

from __future__ import annotations

import itertools

from selector.catalog import load_catalog
from selector.inputs.serve.flags import release_flags
from tests.fuzz.test_config_fuzz import run_cli


def _first_added_flag() -> tuple[str, str, str]:
    """(a flag, the release before it appeared, the release that added it)."""
    releases = release_flags(load_catalog())
    for older, newer in itertools.pairwise(releases):
        added = sorted(f for f in releases[newer] - releases[older] if not f.startswith("--no-"))
        if added:
            return added[0], older, newer
    raise AssertionError("no release adds a flag")


def _check(engine: str, flag: str) -> tuple[int, str]:
    code, out, err = run_cli(["check", "--engine", f"vllm=={engine}", "--device", "H100",
                              "--format", "json", "--", "vllm", "serve",
                              "meta-llama/Llama-3.1-8B-Instruct", flag, "8"])
    return code, out + err


def test_a_flag_is_refused_by_releases_that_lack_it() -> None:
    flag, older, _ = _first_added_flag()
    code, output = _check(older, flag)
    assert code == 1, output
    assert "SU007" in output and f"unrecognized arguments: {flag}" in output


def test_the_same_flag_passes_where_it_exists() -> None:
    flag, _, newer = _first_added_flag()
    code, output = _check(newer, flag)
    assert "SU007" not in output, output
    assert code == 0, output
