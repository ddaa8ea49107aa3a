#!/usr/bin/env python3
"""Extract vLLM's model registry (architecture -> module/class tables, the
previously-supported and out-of-tree lists, and the refusal messages) from an
installed vLLM's ``vllm/model_executor/models/registry.py``, as data.

The file is parsed (``ast``), never imported, so any interpreter reads any
release::

    python tools/extract_model_registry.py \\
        /work/venvs/oracle-0.33.0/lib/python3.11/site-packages/vllm \\
        --out schemas/engines/vllm-0.33.0/model_registry.json

Output (JSON, sorted keys):

* ``vllm_version`` (from the package's ``version.py`` / dist-info);
* ``source``: the registry file and the line of each table;
* ``tables``: ``{table name: {architecture: [module, class]}}`` for every
  module-level ``_..._MODELS`` dict whose values are (module, class) pairs;
* ``previously_supported``: ``{architecture: last vLLM version}``;
* ``out_of_tree``: ``{architecture: plugin url}``;
* ``messages``: the f-string templates of ``_raise_for_unsupported``
  (``{arch}``, ``{previous_version}``, ``{architectures}``, ``{plugin_url}``,
  ``{all_supported_archs}`` are vLLM's own placeholders).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["extract", "main"]


def _version(package: Path) -> str:
    for dist in sorted(package.parent.glob("vllm-*.dist-info")):
        return dist.name.removeprefix("vllm-").removesuffix(".dist-info")
    generated = package / "_version.py"
    if generated.is_file():
        match = re.search(r"version\s*=\s*['\"]([^'\"]+)", generated.read_text(encoding="utf-8"))
        if match:
            return match.group(1)
    raise SystemExit(f"cannot find the vLLM version of {package}")


def _template(node: ast.expr) -> str:
    """An f-string (or a concatenation of them) as its template text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value).replace("{", "{{").replace("}", "}}"))
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + ast.unparse(value.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _template(node.left) + _template(node.right)
    raise ValueError(f"not a string: {ast.unparse(node)}")


def _pairs(node: ast.Dict) -> dict[str, list[str]] | None:
    out: dict[str, list[str]] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None:
            # ``**spread``: the union table or a comprehension over another
            # table (its entries are in that table already)
            continue
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        if isinstance(value, ast.Tuple) and len(value.elts) == 2 and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
        ):
            out[key.value] = [str(e.value) for e in value.elts]  # type: ignore[union-attr]
        else:
            return None
    return out


def _strings(node: ast.Dict) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
            out[str(key.value)] = str(value.value)
    return out


def _messages(tree: ast.Module) -> dict[str, str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_raise_for_unsupported":
            raised = []
            for sub in ast.walk(node):
                if isinstance(sub, ast.Raise) and isinstance(sub.exc, ast.Call) and sub.exc.args:
                    raised.append(_template(sub.exc.args[0]))
            names = ("inspection_failed", "previously_supported", "out_of_tree", "unsupported")
            by_marker = {}
            for text in raised:
                if "failed" in text and "inspected" in text:
                    by_marker["inspection_failed"] = text
                elif "previous_version" in text:
                    by_marker["previously_supported"] = text
                elif "plugin_url" in text:
                    by_marker["out_of_tree"] = text
                elif "not supported for now" in text:
                    by_marker["unsupported"] = text
            return {name: by_marker[name] for name in names if name in by_marker}
    raise SystemExit("registry.py has no _raise_for_unsupported")


def extract(package: Path) -> dict[str, Any]:
    """The registry data of the vLLM package directory ``package``."""
    path = package / "model_executor" / "models" / "registry.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    tables: dict[str, dict[str, list[str]]] = {}
    lines: dict[str, int] = {}
    previously: dict[str, str] = {}
    oot: dict[str, str] = {}
    for node in tree.body:
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Dict):
            continue
        name = target.id
        if name == "_PREVIOUSLY_SUPPORTED_MODELS":
            previously = _strings(value)
            lines[name] = node.lineno
        elif name == "_OOT_SUPPORTED_MODELS":
            oot = _strings(value)
            lines[name] = node.lineno
        elif name.endswith("_MODELS"):
            pairs = _pairs(value)
            if pairs:
                tables[name.strip("_").lower()] = pairs
                lines[name] = node.lineno
    return {
        "vllm_version": _version(package),
        "source": {"file": "vllm/model_executor/models/registry.py", "lines": lines},
        "tables": tables,
        "previously_supported": previously,
        "out_of_tree": oot,
        "messages": _messages(tree),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("package", type=Path, help="the installed vllm package directory")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    data = extract(args.package)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    total = sum(len(t) for t in data["tables"].values())
    print(f"vLLM {data['vllm_version']}: {total} architectures in {len(data['tables'])} tables, "
          f"{len(data['previously_supported'])} previously supported -> {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
