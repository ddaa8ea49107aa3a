"""Every code the code can emit is registered, and no code is registered twice.

Codes in the data files (profile checks, combination rules, the MLA prefill selector,
start-up data) are cross-checked when the catalog loads; this test covers the codes
written in Python (``"SE002"``, ``"AS101"``, ...): each must be in
``schemas/reason-codes.yaml``, as one of vLLM's reasons (``codes``) or one of
attn-select's own (``cli_codes``, ``argument_codes``, seen through ``CLI_CODES`` and
``ARG_CODES``), and the three sections must not overlap.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from selector.catalog import load_catalog
from selector.check.records import CLI_CODES
from selector.inputs.serve import ARG_CODES

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"^[A-Z]{2}\d{3}$")


def test_every_code_literal_in_the_code_is_registered() -> None:
    registered = set(load_catalog().codes) | set(CLI_CODES) | set(ARG_CODES)
    unregistered = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}"
        for path in sorted((ROOT / "selector").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and CODE.match(node.value) and node.value not in registered
    ]
    assert not unregistered, "codes emitted but not registered:\n" + "\n".join(unregistered)


def test_the_code_tables_do_not_overlap() -> None:
    tables = {"reason-codes.yaml": set(load_catalog().codes), "CLI_CODES": set(CLI_CODES),
              "ARG_CODES": set(ARG_CODES)}
    names = list(tables)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            assert not tables[first] & tables[second], (first, second, tables[first] & tables[second])
