"""Which engine profile a command uses when none is named, and how a release is named."""

from __future__ import annotations

import pytest

from selector.catalog import (
    DEFAULT_ENGINE_ENV,
    INSTALLED_VLLM_ENV,
    installed_vllm_version,
    load_catalog,
)
from selector.errors import InputError


@pytest.fixture(autouse=True)
def no_pinned_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the default itself: the suite's pin is lifted."""
    monkeypatch.delenv(DEFAULT_ENGINE_ENV, raising=False)


def test_the_engine_variable_pins_the_default_over_the_installed_vllm(
        monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = load_catalog()
    oldest, newest = catalog.engine_names[0], catalog.engine_names[-1]
    monkeypatch.setenv(INSTALLED_VLLM_ENV, newest.split("==", 1)[1])
    installed_vllm_version.cache_clear()
    monkeypatch.setenv(DEFAULT_ENGINE_ENV, oldest)
    choice = catalog.choose(None)
    assert (choice.name, choice.from_installed) == (oldest, False)
    assert choice.reason == f"{DEFAULT_ENGINE_ENV}={oldest}"
    assert catalog.engine(None).engine == oldest
    assert catalog.choose(newest).name == newest  # --engine still wins
    monkeypatch.setenv(DEFAULT_ENGINE_ENV, "vllm==0.25")
    assert catalog.choose(None).name.startswith("vllm==0.25.")
    installed_vllm_version.cache_clear()


def test_a_bad_engine_variable_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEFAULT_ENGINE_ENV, "vllm==9.9.9")
    with pytest.raises(InputError) as caught:
        load_catalog().choose(None)
    assert caught.value.field == DEFAULT_ENGINE_ENV
    assert DEFAULT_ENGINE_ENV in caught.value.message


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def set_version(version: str) -> None:
        monkeypatch.setenv(INSTALLED_VLLM_ENV, version)
        installed_vllm_version.cache_clear()

    yield set_version
    installed_vllm_version.cache_clear()


def test_no_vllm_installed_means_the_newest_profile(installed) -> None:  # type: ignore[no-untyped-def]
    installed("none")
    catalog = load_catalog()
    choice = catalog.choose(None)
    assert choice.name == catalog.engine_names[-1]
    assert "no vLLM is installed" in choice.reason
    assert not choice.from_installed


def test_the_installed_release_is_the_default(installed) -> None:  # type: ignore[no-untyped-def]
    catalog = load_catalog()
    oldest = catalog.engine_names[0]
    installed(oldest.split("==", 1)[1])
    choice = catalog.choose(None)
    assert (choice.name, choice.from_installed) == (oldest, True)
    assert catalog.engine(None).engine == oldest


def test_an_installed_patch_release_without_profile_uses_its_minor_series(installed) -> None:  # type: ignore[no-untyped-def]
    catalog = load_catalog()
    name = catalog.engine_names[0]
    major, minor, _ = name.split("==", 1)[1].split(".")
    installed(f"{major}.{minor}.99")
    assert catalog.choose(None).name == name


def test_an_installed_release_newer_than_every_profile_falls_back_with_a_reason(installed) -> None:  # type: ignore[no-untyped-def]
    installed("99.0.0")
    catalog = load_catalog()
    choice = catalog.choose(None)
    assert choice.name == catalog.engine_names[-1]
    assert "99.0.0" in choice.reason and "nearest" in choice.reason


def test_a_minor_series_picks_its_newest_patch_release() -> None:
    catalog = load_catalog()
    for name in catalog.engine_names:
        version = name.split("==", 1)[1]
        series = ".".join(version.split(".")[:2])
        newest = [n for n in catalog.engine_names
                  if n.split("==", 1)[1].startswith(series + ".")][-1]
        assert catalog.engine(f"vllm=={series}").engine == newest


def test_an_unknown_release_names_the_nearest_profiles() -> None:
    catalog = load_catalog()
    names = catalog.engine_names
    with pytest.raises(InputError) as info:
        catalog.engine("vllm==0.25.99")
    hint = info.value.hint or ""
    assert "nearest:" in hint and "vllm==0.25.1 (older)" in hint
    assert names[1] + " (newer)" in hint
