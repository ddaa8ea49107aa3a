"""Generated docs and JSON Schemas: up to date, complete, and valid for the data."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from selector.catalog import load_catalog
from selector.docsgen import BANNER, attribute_docs, drifted, generate, json_schemas, write
from tests.fuzz.test_config_fuzz import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_committed_docs_match_the_data() -> None:
    """The drift guard CI runs: `attn-select docs --check` on the committed tree."""
    code, out, _ = run_cli(["docs", "--check", "--root", str(ROOT)])
    assert code == 0, out


def test_check_lists_drifted_and_stale_files(tmp_path: Path) -> None:
    files = generate(load_catalog())
    assert sorted(write(tmp_path, files)) == sorted(f.path for f in files)
    assert drifted(tmp_path, files) == [] and write(tmp_path, files) == []
    (tmp_path / "docs" / "devices.md").write_text("edited by hand\n", encoding="utf-8")
    stale = tmp_path / "docs" / "engines" / "vllm-0.0.1.md"
    stale.write_text(f"<!-- {BANNER} -->\n", encoding="utf-8")
    code, out, _ = run_cli(["docs", "--check", "--root", str(tmp_path)])
    assert code == 1
    assert "docs/devices.md" in out and "docs/engines/vllm-0.0.1.md" in out
    code, _, _ = run_cli(["docs", "--root", str(tmp_path)])
    assert code == 0 and not stale.exists() and drifted(tmp_path, files) == []


def test_every_generated_file_has_the_banner() -> None:
    for file in generate(load_catalog()):
        assert BANNER in file.text, file.path


def test_one_page_per_engine_and_an_anchor_per_code() -> None:
    catalog = load_catalog()
    files = {f.path: f.text for f in generate(catalog)}
    for engine in catalog.engines:
        page = files[f"docs/engines/{engine.replace('==', '-')}.md"]
        assert "## Priority lists" in page and "## Feature table" in page
        for name in catalog.engines[engine].backends:
            assert f"\n### {name}\n" in page
    codes = files["docs/reason-codes.md"]
    for code in catalog.codes:
        assert f'<a id="{code.lower()}"></a>' in codes
    for code in ("AS001", "AS002", "AS101"):
        assert f'<a id="{code.lower()}"></a>' in codes
    assert "H100" in files["docs/devices.md"]


def test_attribute_docstrings_become_descriptions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('class A:\n    x: int = 1\n    """The x."""\n    y: int\n', "utf-8")
    assert attribute_docs(module) == {"A": {"x": "The x."}}
    deployment = json_schemas()["deployment.schema.json"]
    assert deployment["properties"]["block_size"]["description"].startswith("`--block-size`")
    assert "description" in deployment["$defs"]["LayerSpec"]["properties"]["num_heads"]


def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((ROOT / "schemas" / "jsonschema" / name).read_text("utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.mark.parametrize(("schema", "pattern"), [
    ("devices.schema.json", "devices.yaml"),
    ("reason-codes.schema.json", "reason-codes.yaml"),
    ("engine-profile.schema.json", "engines/*/profile.yaml"),
    ("backend.schema.json", "engines/*/backends/*.yaml"),
    ("platforms.schema.json", "platforms.yaml"),
    ("engine-platform.schema.json", "engines/*/platforms/*.yaml"),
])
def test_the_data_files_validate_against_their_schemas(schema: str, pattern: str) -> None:
    validator = _validator(schema)
    paths = sorted((ROOT / "schemas").glob(pattern))
    assert paths
    for path in paths:
        error = jsonschema.exceptions.best_match(
            validator.iter_errors(yaml.safe_load(path.read_text("utf-8"))))
        assert error is None, f"{path}: {error.json_path}: {error.message[:300]}"


def test_the_examples_validate_against_the_deployment_schema() -> None:
    validator = _validator("deployment.schema.json")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        data = yaml.safe_load(path.read_text("utf-8"))
        if isinstance(data, dict) and "device" in data:
            assert not list(validator.iter_errors(data)), path
