"""The code registry's ``field`` column and attn-select's own code sections.

``schemas/reason-codes.yaml`` is the one registry: vLLM's reasons (``codes``), the
check's own findings (``cli_codes``) and the command line's notes (``argument_codes``),
each with the deployment field a finding points at.  ``CLI_CODES`` and ``ARG_CODES``
are views of it, not tables of their own.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from selector.catalog import load_catalog
from selector.check.records import CLI_CODES
from selector.inputs.serve import ARG_CODES
from selector.schema.request import Deployment

ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((ROOT / "schemas" / "reason-codes.yaml").read_text(encoding="utf-8"))


def test_the_python_views_are_the_yaml_sections_in_order() -> None:
    assert list(CLI_CODES.items()) == [(c["code"], (c["name"], c["summary"]))
                                       for c in RAW["cli_codes"]]
    assert list(ARG_CODES.items()) == [(c["code"], (c["name"], c["summary"]))
                                       for c in RAW["argument_codes"]]


def test_every_field_names_a_deployment_field() -> None:
    catalog = load_catalog()
    for section in ("codes", "cli_codes", "argument_codes"):
        for entry in RAW[section]:
            if "field" in entry:
                assert entry["field"].split(".")[0] in Deployment.model_fields, entry
                assert catalog.field_of(entry["code"]) == tuple(entry["field"].split(".")), entry
            else:
                assert catalog.field_of(entry["code"]) is None, entry


def test_located_codes_point_where_they_did() -> None:
    catalog = load_catalog()
    assert catalog.field_of("HS001") == ("layer", "head_size")
    assert catalog.field_of("FT011") == ("parallel", "decode_context_parallel_size")
    assert catalog.field_of("ML063") == ("layer", "mla")
    assert catalog.field_of("AS003") == ("cudagraph_mode",)
    assert catalog.field_of("SE001") is None
    assert catalog.field_of("ZZ999") is None
